"""The reference greedy generation: Hugging Face transformers' own generate() on a model folder.

    python hf_generate.py MODEL_DIR PROMPT_IDS --max-new-tokens N --eos ID[,ID...]
        prints {"ids": [...]}: the new tokens, the end-of-sequence token left out

The model is loaded as hf_logits.py loads it (local folder only, eager attention, float32, every
weight used) and generate() runs with do_sample=False, the KV cache on, and eos_token_id set to the
given ids, so it stops where studio-train chat should. Any failure exits 1 with the reason.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_logits  # noqa: E402  (its loader and its checks)


def int_list(text):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise hf_logits.Failure(f"expected comma-separated integers, got {text!r}")


def main(argv):
    parser = hf_logits.Parser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("prompt_ids", help="comma-separated token ids")
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--eos", required=True, help="comma-separated end-of-sequence ids")
    args = parser.parse_args(argv)
    prompt, eos = int_list(args.prompt_ids), int_list(args.eos)
    if not prompt:
        raise hf_logits.Failure("no prompt ids")
    import torch

    _, arch = hf_logits.read_config(args.model_dir)
    model = hf_logits.load(args.model_dir, arch, "float32")
    input_ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             do_sample=False, max_new_tokens=args.max_new_tokens,
                             eos_token_id=eos, pad_token_id=eos[0], use_cache=True,
                             temperature=None, top_p=None, top_k=None)
    new = out[0, len(prompt):].tolist()
    if new and new[-1] in eos:
        new = new[:-1]
    json.dump({"ids": new}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except hf_logits.Failure as e:
        print(f"hf_generate.py: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        import traceback
        traceback.print_exc()
        print(f"hf_generate.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
