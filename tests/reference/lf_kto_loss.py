"""The reference for studio-train's KTO loss (trainer/dpo/kto_loss.h): LLaMA-Factory 0.9.5's own
CustomKTOTrainer.get_batch_loss_metrics (its ftx rescaling, its metrics) over TRL 0.24's own
KTOTrainer.kto_loss (the KL estimate, the desirable/undesirable losses), both unmodified, run on
given log-prob sums in float64. Run by the interpreter of LLaMA-Factory's venv (TRL 0.24 is the
TRL that LLaMA-Factory 0.9.5 pins; TRL 1.x folds the loss into _compute_loss, not callable alone).

    python lf_kto_loss.py < request.json > answer.json

request.json: one request object, or an array of them (answered by an array in the same order). A
request is one micro-batch of N examples:
    "beta"                     float > 0 (pref_beta)
    "desirable_weight", "undesirable_weight"
                               floats (kto_chosen_weight, kto_rejected_weight; default 1)
    "ftx"                      float >= 0 (pref_ftx; default 0)
    "desirable"                [N] booleans (the kto_tag of each example)
    "policy_logps", "reference_logps"
                               [N] floats: each example's response log-prob SUM
    "policy_kl_logps", "reference_kl_logps"
                               [N] floats: the sums of each example's mismatched (KL) response
    "lengths"                  [N] ints >= 0: each response's token count (LF's valid_length; a
                               0 makes LF's per-token mean 0/0, NaN, which its nanmean skips)
An answer, one object:
    "loss"          the micro-batch's loss LF trains on
    "grad_policy"   [N] d loss / d policy_logps (torch.autograd through LF's and TRL's code)
    "kl"            TRL's KL estimate (clamped at 0)
    "chosen_rewards", "rejected_rewards"   TRL's rewards, in example order within each kind
    "metrics"       LF's metrics dict (rewards/chosen_sum, logps/chosen_sum, count/chosen, ...)
    "trl_version", "llamafactory_version"
Any failure exits 1 with the reason on stderr.

How it runs: a CustomKTOTrainer made with object.__new__ (no model, no data) with the attributes
its loss reads set as KTOTrainer.__init__ sets them (beta, desirable_weight, undesirable_weight,
loss_type "kto", calculate_KL) and LF's ftx_gamma, a CPU accelerate.Accelerator (one process:
gather_for_metrics is the identity), and concatenated_forward / compute_reference_log_probs
replaced on the instance by functions returning the given log-probs split the way LF's own
concatenated_forward splits them (batch["kto_tags"] and its negation; the per-token means as LF's
forward computes them, logps / valid_length). The logits LF logs are not compared (zeros here).
"""

import math
import os
import sys
import tempfile
import warnings

from reference_main import Failure, read_requests, require, run, write_answers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("ACCELERATE_USE_CPU", "true")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def number(request, key, default=None):
    v = request.get(key, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise Failure(f'"{key}" must be a finite number, got {v!r}')
    return float(v)


def column(request, key, n, kind):
    """A list of n bools (kind bool) or n ints (kind int, bools refused)."""
    v = request.get(key)
    ok = isinstance(v, list) and len(v) == n and all(
        isinstance(x, bool) if kind is bool else (isinstance(x, kind) and not isinstance(x, bool)) for x in v)
    if not ok:
        raise Failure(f'"{key}" must be a list of {n} {kind.__name__} values')
    return v


def parse(request):
    if not isinstance(request, dict):
        raise Failure("each request must be a JSON object")
    p = {"beta": number(request, "beta"), "dw": number(request, "desirable_weight", 1.0),
         "uw": number(request, "undesirable_weight", 1.0), "ftx": number(request, "ftx", 0.0)}
    if not p["beta"] > 0:
        raise Failure(f'"beta" must be > 0, got {p["beta"]}')
    tags = request.get("desirable")
    if not isinstance(tags, list) or not tags:
        raise Failure('"desirable" must be a non-empty list of booleans')
    n = len(tags)
    p["tags"] = column(request, "desirable", n, bool)
    for key in ("policy_logps", "reference_logps", "policy_kl_logps", "reference_kl_logps"):
        v = request.get(key)
        if not (isinstance(v, list) and len(v) == n and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            raise Failure(f'"{key}" must be a list of {n} finite numbers')
        p[key] = [float(x) for x in v]
    p["lengths"] = column(request, "lengths", n, int)
    if any(x < 0 for x in p["lengths"]):
        raise Failure('"lengths" must not be negative')
    return p


def make_trainer(p, tmp):
    from accelerate import Accelerator
    from llamafactory.train.kto.trainer import CustomKTOTrainer

    trainer = object.__new__(CustomKTOTrainer)
    trainer.beta = p["beta"]
    trainer.desirable_weight = p["dw"]
    trainer.undesirable_weight = p["uw"]
    trainer.loss_type = "kto"
    trainer.calculate_KL = True
    trainer.ftx_gamma = p["ftx"]
    trainer.accelerator = Accelerator(cpu=True)
    if trainer.accelerator.device.type != "cpu" or trainer.accelerator.num_processes != 1:
        raise Failure("accelerate did not give one CPU process")
    return trainer


def answer(p):
    import torch

    tags = torch.tensor(p["tags"], dtype=torch.bool)
    policy = torch.tensor(p["policy_logps"], requires_grad=True)
    reference = torch.tensor(p["reference_logps"])
    policy_kl = torch.tensor(p["policy_kl_logps"])
    reference_kl = torch.tensor(p["reference_kl_logps"])
    lengths = torch.tensor(p["lengths"], dtype=torch.float64)
    batch = {"kto_tags": tags, "labels": torch.zeros(len(p["tags"]), 1, dtype=torch.long)}
    zeros = torch.zeros(len(p["tags"]))

    def concatenated_forward(model, b):  # LF's split of its forward's outputs
        avg = policy / lengths
        return (policy[b["kto_tags"]], policy[~b["kto_tags"]], zeros[b["kto_tags"]], zeros[~b["kto_tags"]],
                policy_kl, avg[b["kto_tags"]])

    def compute_reference_log_probs(model, b):
        return reference[b["kto_tags"]], reference[~b["kto_tags"]], reference_kl

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = make_trainer(p, tmp)
        trainer.concatenated_forward = concatenated_forward
        trainer.compute_reference_log_probs = compute_reference_log_probs
        # The KL and rewards as TRL returns them (the same call get_batch_loss_metrics makes).
        _, chosen_rewards, rejected_rewards, kl = trainer.kto_loss(
            policy[tags], policy[~tags], policy_kl, reference[tags], reference[~tags], reference_kl)
        loss, metrics = trainer.get_batch_loss_metrics(None, batch)
    if loss.dtype != torch.float64 or loss.dim() != 0:
        raise Failure(f"the loss came back as {loss.dtype} {tuple(loss.shape)}: LF or TRL changed")
    (grad,) = torch.autograd.grad(loss, policy, allow_unused=True)
    if grad is None:
        grad = torch.zeros_like(policy)

    def values(x):
        x = x.detach().reshape(-1).tolist()
        return [v if math.isfinite(v) else None for v in x]

    import llamafactory
    import trl

    value = float(loss.detach())
    return {"loss": value if math.isfinite(value) else None, "grad_policy": values(grad),
            "kl": float(kl.reshape(-1)[0]), "chosen_rewards": values(chosen_rewards),
            "rejected_rewards": values(rejected_rewards),
            "metrics": {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()},
            "trl_version": trl.__version__, "llamafactory_version": llamafactory.__version__}


def main():
    parsed, as_array = read_requests(parse)
    torch, trl, _ = require(["torch", "trl", "llamafactory"], "LLaMA-Factory 0.9.5's venv is needed")
    if not trl.__version__.startswith("0.24"):
        raise Failure(f"TRL {trl.__version__} here; LLaMA-Factory 0.9.5 pins 0.24 (kto_loss as a method)")
    torch.set_default_dtype(torch.float64)
    write_answers([answer(p) for p in parsed], as_array)
    return 0


if __name__ == "__main__":
    run(main, "lf_kto_loss.py")
