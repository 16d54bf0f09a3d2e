"""The reference for studio-train's LoRA / DoRA adapters: PEFT itself (peft, pinned in
scripts/python-requirements.txt; written against PEFT 0.21.2) on a transformers model, fp32, CPU.

    python peft_lora.py --model DIR --config CONFIG.json --init-out ADAPTER_DIR
    python peft_lora.py --model DIR --adapter ADAPTER_DIR --batch BATCH.safetensors
                        --out OUT.safetensors [--merge-out MERGED_DIR]
    python peft_lora.py ARGUMENTS --and ARGUMENTS [--and ...]
        several of the above in one start of Python (its imports take seconds), in order; every
        one is checked before the first runs, and the first failure ends the run

--init-out: a FRESH adapter, get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **CONFIG)),
  CONFIG a JSON object of LoraConfig arguments (r, lora_alpha, target_modules, use_rslora, use_dora,
  modules_to_save, lora_dropout, ...), written by PEFT's save_pretrained (adapter_config.json,
  adapter_model.safetensors). PEFT's init makes B = 0 (a no-op adapter), so then torch.manual_seed(0),
  every lora_B is redrawn ~ N(0, 0.02^2) and every modules_to_save copy gets N(0, 0.02^2) noise
  added (else it equals the base weight), in named_parameters() order. lora_A keeps PEFT's
  kaiming_uniform(a=sqrt(5)) (torch.manual_seed(0) before get_peft_model); a DoRA magnitude keeps
  PEFT's init, the row norms of the base W (not of W + s*B@A). With --init-out, --adapter defaults
  to that folder, so --batch/--out may follow in the same run.
--batch/--out: PeftModel.from_pretrained(model, ADAPTER, is_trainable=True), model.train() (every
  dropout probability must be 0, lora_dropout and the model's own: a deterministic result), the
  model's own causal-LM loss (labels=: shifted inside transformers, -100 ignored, mean over the
  counted tokens) and its backward. BATCH: int64 input_ids [B,S], labels [B,S], optionally
  attention_mask [B,S] (position_ids: transformers' default, 0..S-1 in every row). OUT gets
      loss             0-dim float64 (the fp32 loss, widened)
      logits           [B,S,V] float32
      disabled_logits  [B,S,V] float32 under `with model.disable_adapter():` (the base model: LoRA
                       skipped, modules_to_save's original modules used): DPO's reference model
      KEY              for every tensor KEY of ADAPTER/adapter_model.safetensors (...lora_A.weight,
                       ...lora_magnitude_vector, base_model.model.lm_head.weight, ...): d loss / d KEY,
                       float32. For DoRA these are PEFT's gradients, which treat ||W + s*B@A|| as a
                       constant (detached): not the exact derivative for lora_A / lora_B.
--merge-out: then merge_and_unload() (LoRA: W + s*B@A; DoRA: m / ||W + s*B@A||_row * (W + s*B@A))
  and the plain transformers model's save_pretrained (safetensors: transformers 5 writes no other).
The model folder is loaded by AutoModelForCausalLM.from_pretrained(dtype=float32,
attn_implementation="eager"), locally only, and every weight must load. Any failure exits 1 with the
reason on stderr (reference_main's contract).
"""

import argparse
import json
import os

from reference_main import Failure, offline_cpu_environment, run

offline_cpu_environment()


class Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error exits 1 like every other failure (argparse: 2)
        raise Failure(f"{message}\n{self.format_usage().strip()}")


def load_model(model_dir):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()  # keep stderr for our own errors
    transformers.logging.disable_progress_bar()
    model, info = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", local_files_only=True,
        output_loading_info=True)
    bad = {k: sorted(map(str, v))[:8] for k, v in info.items() if v}
    if bad:
        raise Failure(f"{model_dir}: incomplete load: {bad}")
    return model


def init_adapter(model, config_path, out_dir):
    import torch
    from peft import LoraConfig, get_peft_model

    with open(config_path, encoding="utf-8") as f:
        kwargs = json.load(f)
    if not isinstance(kwargs, dict):
        raise Failure(f"{config_path}: expected a JSON object of LoraConfig arguments")
    torch.manual_seed(0)
    peft_model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **kwargs))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0.0, 0.02)
        for name, p in peft_model.named_parameters():
            if ".modules_to_save." in name:
                p.add_(torch.randn_like(p) * 0.02)
    peft_model.save_pretrained(out_dir)


def active_dropouts(model):
    """The names of the model's active dropouts (an empty list when the run is deterministic)."""
    import torch

    found = [f"{n} (p={m.p})" for n, m in model.named_modules()
             if isinstance(m, torch.nn.Dropout) and m.p > 0]
    cfg = model.get_base_model().config
    # eager attention applies config.attention_dropout functionally in train mode (no module to find)
    found += [f"config.{k}={getattr(cfg, k)}" for k in ("attention_dropout", "hidden_dropout")
              if isinstance(getattr(cfg, k, 0), (int, float)) and getattr(cfg, k, 0) > 0]
    found += [f"lora_dropout={c.lora_dropout}" for c in model.peft_config.values() if c.lora_dropout]
    return found


def saved_key_grads(model, adapter_dir):
    """d loss / d KEY for every KEY of adapter_model.safetensors, named as PEFT names it when saving."""
    import torch
    from peft import get_peft_model_state_dict
    from safetensors import safe_open

    # PEFT's own save-time renaming (adapter name dropped, modules_to_save unwrapped, ...) applied to a
    # state dict of the Parameter objects themselves (keep_vars), so each saved key leads to its Parameter
    # (a tied copy to the shared one) and from it to the gradient.
    sd = model.state_dict(keep_vars=True)
    named = get_peft_model_state_dict(model, state_dict=sd, save_embedding_layers=False)
    with safe_open(os.path.join(adapter_dir, "adapter_model.safetensors"), "pt") as f:
        file_keys = set(f.keys())
    only_peft, only_file = sorted(set(named) - file_keys), sorted(file_keys - set(named))
    if only_peft or only_file:
        raise Failure(f"PEFT's keys differ from {adapter_dir}'s: only PEFT's {only_peft[:8]}, "
                      f"only the file's {only_file[:8]}")
    grads = {}
    for key, p in named.items():
        if not (isinstance(p, torch.nn.Parameter) and p.requires_grad):
            raise Failure(f"{key}: saved but not a trainable parameter")
        g = p.grad if p.grad is not None else torch.zeros_like(p)  # None: unused by this batch's graph
        grads[key] = g.detach().float().clone()  # a tied pair shares one .grad: safetensors wants copies
    return grads


def evaluate(model, adapter_dir, batch_path, out_path, merge_dir):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file, save_file

    batch = load_file(batch_path)
    for k in ("input_ids", "labels"):
        if k not in batch:
            raise Failure(f"{batch_path}: no tensor {k!r}")
    for k in ("input_ids", "labels", "attention_mask"):
        if k in batch and (batch[k].dtype != torch.int64 or batch[k].shape != batch["input_ids"].shape
                           or batch[k].dim() != 2):
            raise Failure(f"{batch_path}: {k} must be int64 [B,S] like input_ids, is {batch[k].dtype} "
                          f"{list(batch[k].shape)}")
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask") if k in batch}
    model = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
    dropouts = active_dropouts(model)
    if dropouts:
        raise Failure(f"dropout would make the result random: {', '.join(dropouts[:8])}")
    model.train()
    out = model(**inputs, labels=batch["labels"], use_cache=False)
    out.loss.backward()
    result = saved_key_grads(model, adapter_dir)
    for name in ("loss", "logits", "disabled_logits"):
        if name in result:
            raise Failure(f"{adapter_dir}: a saved tensor is named {name!r}, a name of this script's output")
    result["loss"] = out.loss.detach().double().reshape(())
    result["logits"] = out.logits.detach().float().contiguous()
    with torch.no_grad(), model.disable_adapter():
        result["disabled_logits"] = model(**inputs, use_cache=False).logits.float().contiguous()
    save_file(result, out_path)
    if merge_dir:
        with torch.no_grad():
            merged = model.merge_and_unload()
        merged.save_pretrained(merge_dir)


def parse_request(parser, argv):
    args = parser.parse_args(argv)
    if bool(args.config) != bool(args.init_out):
        raise Failure("--config and --init-out go together")
    if bool(args.batch) != bool(args.out) or (args.merge_out and not args.out):
        raise Failure("--batch and --out go together, and --merge-out needs them")
    if not args.init_out and not args.out:
        raise Failure("nothing to do: give --config/--init-out and/or --batch/--out")
    if args.out and not (args.adapter or args.init_out):
        raise Failure("--out needs --adapter (or --init-out)")
    return args


def main():
    import sys
    import warnings

    # transformers' deprecation notices for PEFT's calls (is_gradient_checkpointing); PEFT's own warnings stay
    warnings.filterwarnings("ignore", category=FutureWarning)

    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a Hugging Face model folder")
    parser.add_argument("--config", help="JSON object of LoraConfig arguments (with --init-out)")
    parser.add_argument("--init-out", help="write a fresh, nontrivial adapter here")
    parser.add_argument("--adapter", help="a PEFT adapter folder (default: --init-out)")
    parser.add_argument("--batch", help="safetensors: input_ids, labels[, attention_mask]")
    parser.add_argument("--out", help="safetensors: loss, logits, disabled_logits, gradients")
    parser.add_argument("--merge-out", help="save the merged model here (with --batch/--out)")
    groups = [[]]
    for arg in sys.argv[1:]:
        if arg == "--and":
            groups.append([])
        else:
            groups[-1].append(arg)
    requests = [parse_request(parser, argv) for argv in groups]
    try:
        import peft  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        raise Failure(f"the Python packages torch, transformers and peft are needed ({e}): "
                      f"run scripts/setup.sh (this is {sys.executable})") from e
    for args in requests:
        if args.init_out:
            init_adapter(load_model(args.model), args.config, args.init_out)
        if args.out:
            adapter = args.adapter or args.init_out
            evaluate(load_model(args.model), adapter, args.batch, args.out, args.merge_out)  # a fresh base model
    return 0


if __name__ == "__main__":
    run(main, "peft_lora.py")
