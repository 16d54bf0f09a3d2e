"""The training loss of transformers' mixture-of-experts decoders (Qwen2MoeForCausalLM,
Qwen3MoeForCausalLM) with the auxiliary load-balancing loss on, and its gradients: the reference
for studio-train's router, expert dispatch and auxiliary loss (tests/trainer/tst_reference_logits).

    python hf_moe_loss.py MODEL_DIR BATCH_JSON

BATCH_JSON holds {"input_ids": [[...], ...], "attention_mask": [[...], ...],
"labels": [[...], ...], "coef": C, "params": [NAME, ...]}: right-padded rows, the labels in
transformers' convention (aligned with the inputs, -100 where not learned). The model is loaded
from the local folder only (nothing is downloaded), in float32 with eager attention, and run with
output_router_logits=True and router_aux_loss_coef=C, as LLaMA-Factory's moe_aux_loss_coef sets
them. Prints {"loss": L, "aux_loss": A, "grads": {NAME: [flattened fp32 gradient], ...}} where L is
transformers' own loss (mean token cross-entropy + C x A) and the gradients are dL/dNAME.
Any failure exits 1 with the reason on stderr.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    model_dir, batch_path = argv
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    with open(batch_path, encoding="utf-8") as f:
        batch = json.load(f)
    # As LLaMA-Factory's configure_moe: set on the config before the model is built (the model
    # copies router_aux_loss_coef when it is constructed).
    model, info = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", local_files_only=True,
        output_loading_info=True, output_router_logits=True,
        router_aux_loss_coef=float(batch["coef"]))
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f"{model_dir}: incomplete load: {bad}")
    if model.router_aux_loss_coef != float(batch["coef"]):
        raise SystemExit(f"router_aux_loss_coef is {model.router_aux_loss_coef}, not {batch['coef']}")
    model.train()  # no dropout in these models; gradients on
    ids = torch.tensor(batch["input_ids"], dtype=torch.long)
    mask = torch.tensor(batch["attention_mask"], dtype=torch.long)
    labels = torch.tensor(batch["labels"], dtype=torch.long)
    pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0).expand_as(ids)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, labels=labels,
                output_router_logits=True, use_cache=False)
    out.loss.backward()
    params = dict(model.named_parameters())
    grads = {}
    for name in batch["params"]:
        if name in params:
            grads[name] = params[name].grad.reshape(-1).tolist()
            continue
        # transformers 5 keeps each layer's experts fused: experts.E.gate_proj / up_proj are the
        # halves of row E of experts.gate_up_proj, experts.E.down_proj row E of experts.down_proj.
        head, expert, proj = name.rsplit(".", 3)[0], int(name.split(".")[-3]), name.split(".")[-2]
        fused = params[head + (".down_proj" if proj == "down_proj" else ".gate_up_proj")].grad[expert]
        if proj != "down_proj":
            half = fused.shape[0] // 2
            fused = fused[:half] if proj == "gate_proj" else fused[half:]
        grads[name] = fused.reshape(-1).tolist()
    json.dump({"loss": out.loss.item(), "aux_loss": out.aux_loss.item(), "grads": grads}, sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # every failure: exit 1 with the reason
        print(f"hf_moe_loss.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
