"""The reference for studio-train's DPO losses: TRL's own DPO loss code (trl, pinned in
scripts/python-requirements.txt; written against TRL 1.16), run on given log-probs in float64.

    python trl_dpo.py < request.json > answer.json

request.json, one object, or an array of them (answered by an array in the same order, in one
start of Python: TRL's import takes seconds):
    "loss_type"                  "sigmoid" | "ipo" | "hinge", or any other TRL loss type, or a list
                                 of them (TRL adds their means, weighted by "loss_weights")
    "loss_weights"               optional, one per loss type (TRL's default: 1 each)
    "beta"                       float > 0
    "label_smoothing"            float, default 0 (see the note on sigmoid below)
    "policy_chosen_logps", "policy_rejected_logps", "reference_chosen_logps",
    "reference_rejected_logps"   [N] floats: per-pair SUMS of the response tokens' log-probs
    "chosen_lengths", "rejected_lengths"
                                 [N] ints >= 0: the number of response (completion) tokens.
                                 Required for the loss types that read them (ipo, sigmoid_norm,
                                 sft); optional (default 1) otherwise. A response of length 0
                                 must have log-prob 0.
answer.json, one object; per pair i (each pair run as its own batch of one, so TRL's batch mean
is the pair's own value):
    "losses"              TRL's loss
    "chosen_rewards"      TRL's rewards/chosen    = beta * (policy_chosen - reference_chosen)
    "rejected_rewards"    TRL's rewards/rejected  = beta * (policy_rejected - reference_rejected)
    "reward_accuracies"   TRL's rewards/accuracies = 1.0 if chosen_reward > rejected_reward else 0.0
    "reward_margins"      TRL's rewards/margins   = chosen_reward - rejected_reward
and, for all N pairs run as ONE batch:
    "batch": {"loss": ..., "metrics": {"rewards/chosen": ..., ..., "logps/chosen": ...,
              "logps/rejected": ...}}   TRL's loss and logged means (logps/* are the sums' means;
              TRL takes the mean of rewards/accuracies in float32, the others in float64)
    "trl_version"
Any failure exits 1 with the reason on stderr.

What runs. TRL 1.16 has no stand-alone dpo_loss() any more: the per-pair losses and the reward
metrics are computed inline in trl.trainer.dpo_trainer.DPOTrainer._compute_loss(model, inputs,
return_outputs), which calls the policy itself. This script calls that method, unmodified, on a
DPOTrainer made with object.__new__ whose attributes are set exactly as DPOTrainer.__init__ sets
them from a real trl.DPOConfig (loss_type, loss_weights, beta, label_smoothing,
precompute_ref_log_probs=True, defaults otherwise: reverse_kl f-divergence, no ld_alpha, no WPO
weighting, no MoE aux loss) and a real accelerate.Accelerator on the CPU. The "policy" is a stub
nn.Module answering TRL's fused-LM-head call, model(..., labels=labels, fused_lm_head=True), with a
trl.trainer.utils.FusedCausalLMOutput whose per-token log_probs are zero wherever the shifted
label is -100 (as TRL's fused head returns them) and put each response's whole given sum on its
first completion token; the reference log-probs arrive precomputed in inputs["ref_chosen_logps"]
and inputs["ref_rejected_logps"]. Each batch is laid out as DataCollatorForPreference lays it out:
rows [chosen..., rejected...], one prompt token, then the completion (completion_mask 1), then
padding.

TRL 1.16's definitions, in its code's terms (logps are per-sequence sums of the completion tokens'
log-probs; delta = (pc - rc) - (pr - rr)):
    sigmoid   -logsigmoid(beta * delta).  label_smoothing is NOT used: TRL 1.16 documents it for
              "robust" and "exo_pair" only (and "aot"/"aot_unpaired" read it). The label-smoothed
              ("conservative DPO") sigmoid of TRL < 1.0's dpo_loss(),
              -(1 - ls) * logsigmoid(beta * delta) - ls * logsigmoid(-beta * delta), is in TRL 1.16
              the "aot" loss on a batch of one pair (aot sorts the pairs' log-ratios across the
              batch; one pair sorts to itself, and delta is computed as (pc - pr) - (rc - rr)).
    hinge     relu(1 - beta * delta)
    ipo       (delta_avg - 1 / (2 * beta)) ** 2 with delta_avg = (pc - rc) / max(Lc, 1)
              - (pr - rr) / max(Lr, 1): TRL 1.16 takes SUMS and normalises the log-ratios by the
              completion token counts itself (completion_mask.sum(1).clamp(min=1)); it does not
              expect averaged log-probs (TRL < 1.0 had the caller average them for ipo).
    rewards   beta * (policy - reference) on the SUMS, for every loss type, ipo included (the
              rewards are not length-normalised for ipo); accuracies: chosen > rejected strictly.
    sft       -mean of the chosen completion tokens' log-probs over the batch (for one pair:
              -pc / Lc); ["sigmoid", "sft"] with weights [1, w] adds w times it.
"""

import collections
import math
import os
import sys
import tempfile
import warnings

from reference_main import Failure, read_requests, require, run, write_answers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("ACCELERATE_USE_CPU", "true")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # float64 on the CPU; never touch a GPU

LOGPS = ("policy_chosen_logps", "policy_rejected_logps", "reference_chosen_logps", "reference_rejected_logps")
LENGTH_LOSSES = {"ipo", "sigmoid_norm", "sft"}  # the TRL 1.16 loss types that read the completion lengths
METRICS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
           "logps/rejected")




def parse(request):
    if not isinstance(request, dict):
        raise Failure("stdin must hold one JSON object, or an array of them")
    loss_types = request.get("loss_type")
    if isinstance(loss_types, str):
        loss_types = [loss_types]
    if not (isinstance(loss_types, list) and loss_types and all(isinstance(t, str) for t in loss_types)):
        raise Failure('"loss_type" must be a string or a non-empty list of strings')
    weights = request.get("loss_weights")
    if weights is not None and not (isinstance(weights, list) and len(weights) == len(loss_types)):
        raise Failure('"loss_weights" must be a list with one weight per loss type')
    beta = request.get("beta")
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not beta > 0:
        raise Failure(f'"beta" must be a number > 0, got {beta!r}')
    ls = request.get("label_smoothing", 0.0)
    if not isinstance(ls, (int, float)) or isinstance(ls, bool):
        raise Failure(f'"label_smoothing" must be a number, got {ls!r}')
    cols = {}
    for key in LOGPS:
        v = request.get(key)
        if not (isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
            raise Failure(f'"{key}" must be a list of numbers')
        cols[key] = [float(x) for x in v]
    n = len(cols[LOGPS[0]])
    if n == 0 or any(len(c) != n for c in cols.values()):
        raise Failure(f"the four log-prob lists must have the same, non-zero length (got "
                      f"{[len(c) for c in cols.values()]})")
    needs_lengths = bool(LENGTH_LOSSES & set(loss_types))
    for key in ("chosen_lengths", "rejected_lengths"):
        v = request.get(key)
        if v is None:
            if needs_lengths:
                raise Failure(f'"{key}" is required for loss type(s) {sorted(LENGTH_LOSSES & set(loss_types))}')
            v = [1] * n
        if not (isinstance(v, list) and len(v) == n and
                all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 and x == int(x) for x in v)):
            raise Failure(f'"{key}" must be a list of {n} integers >= 0')
        cols[key] = [int(x) for x in v]
    for side in ("chosen", "rejected"):
        for i, length in enumerate(cols[f"{side}_lengths"]):
            if length == 0 and (cols[f"policy_{side}_logps"][i] != 0 or cols[f"reference_{side}_logps"][i] != 0):
                raise Failure(f"pair {i}: the {side} response has no tokens but a non-zero log-prob")
    return loss_types, weights, float(beta), float(ls), cols, n


def make_trainer(loss_types, weights, beta, ls, tmp):
    from accelerate import Accelerator
    from trl import DPOConfig, DPOTrainer

    # A real config: TRL's own argument checks and defaults.
    args = DPOConfig(output_dir=tmp, loss_type=loss_types, loss_weights=weights, beta=beta,
                     label_smoothing=ls, precompute_ref_log_probs=True, use_cpu=True, report_to="none",
                     bf16=False, fp16=False)
    trainer = object.__new__(DPOTrainer)
    # What DPOTrainer.__init__ sets and _compute_loss reads (trl/trainer/dpo_trainer.py, "Training arguments").
    trainer.args = args
    trainer.beta = args.beta
    trainer.precompute_ref_logps = args.precompute_ref_log_probs
    trainer.loss_types = args.loss_type
    trainer.loss_weights = args.loss_weights or [1.0] * len(trainer.loss_types)
    trainer.ld_alpha = args.ld_alpha
    trainer.f_divergence_type = args.f_divergence_type
    trainer.f_alpha_divergence_coef = args.f_alpha_divergence_coef
    trainer.label_smoothing = args.label_smoothing
    trainer.use_weighting = args.use_weighting
    trainer.aux_loss_enabled = False  # the stub policy has no router
    trainer.ref_model = None
    trainer.accelerator = Accelerator(cpu=True)
    trainer._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    trainer._total_train_tokens = 0
    trainer._tp_size = 1
    trainer.model = stub_policy()
    trainer.model.train()  # TRL's "train" mode: the metrics land in trainer._metrics["train"]
    if trainer.accelerator.device.type != "cpu":
        raise Failure(f"accelerate chose {trainer.accelerator.device}, not the CPU")
    return trainer


def stub_policy():
    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    class Stub(torch.nn.Module):
        """Answers model(input_ids=..., attention_mask=..., labels=..., fused_lm_head=True) with the
        given per-row log-prob sums: at the first position whose (shifted) label is not -100."""

        def __init__(self):
            super().__init__()
            self.row_logps = None  # [2B] float64, set per batch

        def forward(self, input_ids=None, attention_mask=None, labels=None, fused_lm_head=False, **kwargs):
            if not fused_lm_head or labels is None:
                raise Failure("TRL called the policy without fused_lm_head=True and labels: TRL changed")
            mask = labels[:, 1:] != -100
            log_probs = torch.zeros(mask.shape, dtype=torch.float64)
            for r in range(mask.shape[0]):
                valid = mask[r].nonzero()
                if len(valid):
                    log_probs[r, valid[0, 0]] = self.row_logps[r]
                elif self.row_logps[r] != 0:
                    raise Failure("a response without tokens has a non-zero log-prob")
            zeros = torch.zeros(mask.shape, dtype=torch.float64)
            return FusedCausalLMOutput(loss=-log_probs.sum() / mask.sum().clamp(min=1), log_probs=log_probs,
                                       entropy=zeros, mean_logits=zeros.clone(),
                                       is_top1=torch.zeros(mask.shape, dtype=torch.bool))

    return Stub()


def batch_inputs(cols, rows):
    """DataCollatorForPreference's layout for the pairs `rows`: [chosen..., rejected...], each row one
    prompt token, its completion tokens, then padding."""
    import torch

    lengths = [cols["chosen_lengths"][i] for i in rows] + [cols["rejected_lengths"][i] for i in rows]
    width = 1 + max(1, max(lengths))
    completion = torch.zeros(len(lengths), width, dtype=torch.long)
    attention = torch.zeros(len(lengths), width, dtype=torch.long)
    for r, n in enumerate(lengths):
        completion[r, 1:1 + n] = 1
        attention[r, :1 + n] = 1
    row_logps = [cols["policy_chosen_logps"][i] for i in rows] + [cols["policy_rejected_logps"][i] for i in rows]
    inputs = {
        "input_ids": torch.ones(len(lengths), width, dtype=torch.long),
        "attention_mask": attention,
        "completion_mask": completion,
        "ref_chosen_logps": torch.tensor([cols["reference_chosen_logps"][i] for i in rows], dtype=torch.float64),
        "ref_rejected_logps": torch.tensor([cols["reference_rejected_logps"][i] for i in rows], dtype=torch.float64),
    }
    return inputs, torch.tensor(row_logps, dtype=torch.float64)


def run_batch(trainer, cols, rows):
    inputs, row_logps = batch_inputs(cols, rows)
    trainer.model.row_logps = row_logps
    for values in trainer._metrics["train"].values():
        values.clear()
    loss = trainer._compute_loss(trainer.model, inputs, return_outputs=False)
    metrics = {}
    for key in METRICS:
        logged = trainer._metrics["train"].get(key)
        if not logged or len(logged) != 1:
            raise Failure(f"TRL did not log {key} once for the batch: TRL changed")
        metrics[key] = float(logged[0])
    return float(loss.item()), metrics


def answer(loss_types, weights, beta, ls, cols, n):
    """One request's answer (module docstring)."""
    import torch
    import trl

    if "sigmoid" in loss_types and ls != 0:
        print(f"trl_dpo.py: note: TRL {trl.__version__}'s sigmoid loss ignores label_smoothing "
              "(the label-smoothed sigmoid is its 'aot' loss on one pair)", file=sys.stderr)
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = make_trainer(loss_types, weights, beta, ls, tmp)
        out = {key: [] for key in ("losses", "chosen_rewards", "rejected_rewards", "reward_accuracies",
                                   "reward_margins")}
        for i in range(n):
            loss, m = run_batch(trainer, cols, [i])
            out["losses"].append(loss)
            out["chosen_rewards"].append(m["rewards/chosen"])
            out["rejected_rewards"].append(m["rewards/rejected"])
            out["reward_accuracies"].append(m["rewards/accuracies"])
            out["reward_margins"].append(m["rewards/margins"])
        loss, m = run_batch(trainer, cols, list(range(n)))
        out["batch"] = {"loss": loss, "metrics": m}
    out["trl_version"] = trl.__version__
    for key, values in out.items():
        if isinstance(values, list) and not all(math.isfinite(v) for v in values):
            print(f"trl_dpo.py: note: non-finite {key}", file=sys.stderr)
    return out


def main():
    parsed, as_array = read_requests(parse)
    require(["torch", "trl", "trl.trainer.dpo_trainer"], "the Python packages torch and trl are needed")
    write_answers([answer(*p) for p in parsed], as_array)
    return 0


if __name__ == "__main__":
    run(main, "trl_dpo.py")
