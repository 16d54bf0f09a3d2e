"""The reference forward pass of the decoders studio-train implements: Hugging Face transformers
itself (pinned in scripts/python-requirements.txt), loading the model folder with its own classes.

    python hf_logits.py MODEL_DIR [MODEL_DIR ...] 1,2,3[,...] [--dtype float32|float64]
        prints, per MODEL_DIR in order, one line {"dir": MODEL_DIR, "logits": [[...], ...]}: one
        row per input id (positions 0..S-1), fp32 values; or {"dir": MODEL_DIR, "error": why}

Several folders in one call share one start of Python, torch and transformers (seconds each).

MODEL_DIR is a Hugging Face folder (config.json and one .safetensors file or a sharded index) whose
architecture is one of SUPPORTED below (the decoders of docs/MODELS.md), with any RoPE scaling
transformers accepts (llama3, linear, yarn, dynamic, longrope; the legacy "rope_scaling" key and
its "type" spelling are converted by transformers itself). It is loaded with
AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=..., attn_implementation="eager") from the
local folder only: nothing is ever downloaded. The ids run as one sequence of batch 1 without
padding; the weights and the computation are in --dtype (default float32), except where
transformers itself computes in float32 whatever the dtype: the RMSNorm statistics, the attention
softmax and the RoPE frequencies and angles. So --dtype float64 is NOT a float64-exact reference:
it agrees with float32 to about 1e-6 relative.

The load must be complete: a weight transformers expects but the folder lacks (which it would
otherwise initialise at random), an unused or mis-shaped tensor, or a model class other than the
config's architecture is an error. A folder that fails gets its error line (and the reason on
stderr) and the others are still answered; the exit status is then 1. A bad request exits 1.
"""

import argparse
import json
import os
import sys

# Local folders only, before transformers is imported (it reads these at import time).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
             "Phi3ForCausalLM", "GlmForCausalLM", "Glm4ForCausalLM", "Gemma2ForCausalLM",
             "Gemma3ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")


class Failure(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error exits 1 like every other failure (argparse: 2)
        raise Failure(f"{message}\n{self.format_usage().strip()}")


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise Failure(f"{model_dir}: no config.json (expected a Hugging Face model folder)")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure(f"{path}: {e}") from e
    archs = cfg.get("architectures") or []
    if len(archs) != 1 or archs[0] not in SUPPORTED:
        raise Failure(f"{path}: architectures {archs} is not one of {', '.join(SUPPORTED)}")
    return cfg, archs[0]


def load(model_dir, arch, dtype):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()  # keep stderr for our own errors
    transformers.logging.disable_progress_bar()
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=getattr(torch, dtype), attn_implementation="eager",
            local_files_only=True, output_loading_info=True)
    except Exception as e:  # transformers raises OSError, ValueError, KeyError, ... : all fatal
        raise Failure(f"transformers {transformers.__version__} cannot load {model_dir}: "
                      f"{type(e).__name__}: {e}") from e
    if type(model).__name__ != arch:
        raise Failure(f"{model_dir}: transformers built {type(model).__name__}, config.json says {arch}")
    problems = []
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        entries = sorted(str(x) for x in (info.get(key) or []))
        if entries:
            problems.append(f"{key}: {', '.join(entries[:8])}" + (" ..." if len(entries) > 8 else ""))
    if problems:
        raise Failure(f"{model_dir}: incomplete load ({'; '.join(problems)})")
    model.eval()
    return model


def forward(model, ids, vocab):
    import torch

    if not ids:
        raise Failure("no token ids")
    bad = [i for i in ids if not 0 <= i < vocab]
    if bad:
        raise Failure(f"token ids {bad[:8]} outside the vocabulary [0, {vocab})")
    input_ids = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    position_ids=torch.arange(len(ids), dtype=torch.long)[None, :], use_cache=False)
    return out.logits[0]


def main(argv):
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", nargs="+")
    parser.add_argument("ids", help="comma-separated token ids")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = parser.parse_args(argv)
    try:
        ids = [int(x) for x in args.ids.split(",") if x.strip()]
    except ValueError:
        raise Failure(f"token ids must be comma-separated integers, got {args.ids!r}")
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        raise Failure(f"the Python packages torch and transformers are needed ({e}): run scripts/setup.sh "
                      f"(this is {sys.executable})") from e
    status = 0
    for model_dir in args.model_dir:
        try:
            _, arch = read_config(model_dir)
            model = load(model_dir, arch, args.dtype)
            logits = forward(model, ids, model.config.vocab_size)
            answer = {"dir": model_dir, "logits": logits.float().tolist()}
        except Exception as e:  # this folder's failure, whatever raised it: the others still run
            if not isinstance(e, Failure):
                import traceback
                traceback.print_exc()
                e = Failure(f"{type(e).__name__}: {e}")
            print(f"hf_logits.py: {e}", file=sys.stderr)
            answer = {"dir": model_dir, "error": str(e)}
            status = 1
        json.dump(answer, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
    return status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print(f"hf_logits.py: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # anything unexpected: still exit 1 with a message, not a traceback's rc
        import traceback
        traceback.print_exc()
        print(f"hf_logits.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
