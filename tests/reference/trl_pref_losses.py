"""The reference for studio-train's orpo, simpo and kto_pair preference losses (trainer/dpo), run on
given log-probs in float64: TRL's own code where TRL 1.16 (pinned in scripts/python-requirements.txt)
has the loss, a transcription of TRL 0.8's code where it no longer does.

    python trl_pref_losses.py < request.json > answer.json

request.json, one request object, or an array of them (answered by an array in the same order: TRL's
import costs seconds, once per process). A request:
    "loss"                       "orpo" | "simpo" | "kto_pair"
    "beta"                       float > 0 (pref_beta)
    "simpo_gamma"                float (simpo; default 0.5)
    "ftx"                        float >= 0 (pref_ftx; default 0)
    "policy_chosen_logps", "policy_rejected_logps"
                                 [N] floats: per-pair SUMS of the response tokens' log-probs
    "reference_chosen_logps", "reference_rejected_logps"
                                 [N] floats, the reference model's sums (kto_pair only)
    "chosen_lengths", "rejected_lengths"
                                 [N] ints >= 1: the responses' token counts. Required for orpo and
                                 simpo (they compare per-token means) and for ftx > 0 (the SFT term
                                 is a per-token mean). An empty response has no mean here (TRL's
                                 and LLaMA-Factory's average is 0/0): it is refused.
An answer, one object, everything per pair i of the N pairs run as ONE batch:
    "losses"              [N] the pair's loss as LLaMA-Factory's DPO trainer forms it (below)
    "chosen_rewards", "rejected_rewards"
                          [N] the rewards of the code that runs (TRL's for orpo and simpo)
    "chosen_logps", "rejected_logps"
                          [N] the policy log-probs the loss compares: per-token means for orpo and
                          simpo, sums for kto_pair
    "grad_chosen", "grad_rejected"
                          [N] d mean(losses) / d policy_{chosen,rejected}_logps (the SUMS), by
                          torch.autograd through the code that computed "losses". For orpo that
                          includes TRL's float32 log1mexp, torch.where(x < -ln 2, log1p(-exp(x)),
                          log(-expm1(x))): where float32 exp(x) rounds to 1 (a mean within ~6e-8
                          of 0) the branch it does not take still gets a 0/0 gradient, so TRL's
                          gradient there is NaN (null here)
    orpo: "odds_ratio"    [N] TRL's ORPOTrainer.odds_ratio_loss losses, beta * logsigmoid(log_odds)
          "nll"           [N] -chosen mean, TRL's nll_loss for a batch of that one pair
    kto_pair: "halves"    [2N] the formula's losses, torch.cat((chosen halves, rejected halves))
              "loss"      their mean: the loss TRL < 0.9's DPOTrainer trained on
    "trl_version"
Non-finite numbers are written as null. Any failure exits 1 with the reason on stderr.

What runs, and LLaMA-Factory's loss per pair (src/llamafactory/train/dpo/trainer.py; c, r: the
policy's chosen and rejected log-probs; sft = -(chosen sum / chosen length), added as ftx * sft when
ftx > 1e-6, as LF's get_batch_loss_metrics does):
    orpo      trl.experimental.orpo.ORPOTrainer.odds_ratio_loss, unmodified, on an ORPOTrainer made
              with object.__new__ and the attributes it reads set from a real ORPOConfig (beta) and a
              CPU accelerate.Accelerator; c, r are per-token means (TRL's concatenated_forward calls
              get_batch_logps(average_log_prob=True): sum / count). TRL's ORPO loss is
              nll - mean(odds_ratio) with nll the chosen tokens' mean cross-entropy, for one pair -c;
              LF's per-pair loss is -c - beta * logsigmoid(log_odds), so
              losses = nll - odds_ratio (+ ftx * sft). TRL computes odds_ratio_loss in float32 (it
              calls .float() on the log-probs), so "odds_ratio", the rewards and their gradient
              carry float32 rounding (relative ~1e-7).
    simpo     trl.experimental.cpo.CPOTrainer.cpo_loss, unmodified, on a CPOTrainer made the same way
              from a real CPOConfig(loss_type="simpo", cpo_alpha=0, label_smoothing=0, simpo_gamma):
              -logsigmoid(beta * ((c - r) - simpo_gamma / beta)) on per-token means (TRL:
              average_log_prob for simpo). CPO's own NLL term is off (cpo_alpha 0), LF's ftx term is
              added as LF adds it.
    kto_pair  TRL 1.16 has no kto_pair (CPOTrainer refuses it; KTOTrainer is unpaired). This is the
              LF/TRL < 0.9 formula: TRL 0.8's DPOTrainer.dpo_loss branch for "kto_pair", which
              LLaMA-Factory's pinned TRL ran (transcribed below, kto_pair_trl08), on SUMS:
              chosen_KL = mean(pc - rc).clamp(min=0), rejected_KL likewise, the KL terms not
              detached; halves = cat(1 - sigmoid(beta * ((pc - rc) - rejected_KL)),
              1 - sigmoid(beta * (chosen_KL - (pr - rr)))); the trainer takes halves.mean(). The
              per-pair loss is (chosen half + rejected half) / 2, so mean(losses) = mean(halves).
              Rewards beta * (policy - reference) on the sums. With ftx, LF adds ftx * sft ([N]) to
              the [2N] halves, which only broadcasts for one pair; per pair that is the pair's loss
              + ftx * sft, and losses carries that for every N.
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
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # float64 on the CPU; never touch a GPU

LOSSES = ("orpo", "simpo", "kto_pair")
FTX_THRESHOLD = 1e-6  # LF: `if self.ftx_gamma > 1e-6: losses += self.ftx_gamma * sft_loss`




def number(request, key, default=None):
    v = request.get(key, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise Failure(f'"{key}" must be a finite number, got {v!r}')
    return float(v)


def column(request, key, n=None, integers=False):
    v = request.get(key)
    kinds = (int,) if integers else (int, float)
    if not (isinstance(v, list) and all(isinstance(x, kinds) and not isinstance(x, bool) for x in v)):
        raise Failure(f'"{key}" must be a list of {"integers" if integers else "numbers"}')
    if n is not None and len(v) != n:
        raise Failure(f'"{key}" must have {n} values, got {len(v)}')
    return [int(x) if integers else float(x) for x in v]


def parse(request):
    if not isinstance(request, dict):
        raise Failure("stdin must hold one JSON object")
    loss = request.get("loss")
    if loss not in LOSSES:
        raise Failure(f'"loss" must be one of {list(LOSSES)}, got {loss!r}')
    beta = number(request, "beta")
    if not beta > 0:
        raise Failure(f'"beta" must be > 0, got {beta}')
    p = {"loss": loss, "beta": beta, "simpo_gamma": number(request, "simpo_gamma", 0.5),
         "ftx": number(request, "ftx", 0.0)}
    if p["ftx"] < 0:
        raise Failure(f'"ftx" must be >= 0, got {p["ftx"]}')
    p["pc"] = column(request, "policy_chosen_logps")
    n = len(p["pc"])
    if n == 0:
        raise Failure("no pairs")
    p["pr"] = column(request, "policy_rejected_logps", n)
    if loss == "kto_pair":
        p["rc"] = column(request, "reference_chosen_logps", n)
        p["rr"] = column(request, "reference_rejected_logps", n)
    if loss != "kto_pair" or p["ftx"] > FTX_THRESHOLD:
        for key in ("chosen_lengths", "rejected_lengths"):
            p[key] = column(request, key, n, integers=True)
            if any(x < 1 for x in p[key]):
                raise Failure(f'"{key}": every response needs >= 1 token here (its per-token mean is 0/0 '
                              "otherwise)")
    return p, n


def make_trainer(cls, config):
    """A TRL trainer without __init__ (no model, no data): the attributes its loss reads, as __init__
    sets them from `config`, and a CPU accelerator (made after the config, whose TrainingArguments
    setup resets accelerate's state)."""
    from accelerate import Accelerator

    trainer = object.__new__(cls)
    trainer.args = config
    trainer.beta = config.beta
    trainer.accelerator = Accelerator(cpu=True)
    if trainer.accelerator.device.type != "cpu":
        raise Failure(f"accelerate chose {trainer.accelerator.device}, not the CPU")
    return trainer


def orpo(p, t, tmp):
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer

    trainer = make_trainer(ORPOTrainer, ORPOConfig(output_dir=tmp, beta=p["beta"], use_cpu=True,
                                                   report_to="none"))
    c, r = t["pc"] / t["lc"], t["pr"] / t["lr"]
    odds_ratio, chosen_rewards, rejected_rewards, _, _ = trainer.odds_ratio_loss(c, r)
    nll = -c
    losses = nll - odds_ratio  # float64: the float32 odds_ratio is promoted
    return losses, chosen_rewards, rejected_rewards, c, r, {"odds_ratio": odds_ratio, "nll": nll}


def simpo(p, t, tmp):
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    config = CPOConfig(output_dir=tmp, beta=p["beta"], loss_type="simpo", simpo_gamma=p["simpo_gamma"],
                       cpo_alpha=0.0, label_smoothing=0.0, use_cpu=True, report_to="none")
    trainer = make_trainer(CPOTrainer, config)
    # What CPOTrainer.__init__ sets and cpo_loss reads besides beta.
    trainer.label_smoothing = config.label_smoothing
    trainer.loss_type = config.loss_type
    trainer.cpo_alpha = config.cpo_alpha
    trainer.simpo_gamma = config.simpo_gamma
    trainer.alpha = config.alpha
    if trainer.alpha != 0.0:
        raise Failure(f"CPOConfig's default alpha is {trainer.alpha}, not 0 (AlphaPO): TRL changed")
    c, r = t["pc"] / t["lc"], t["pr"] / t["lr"]
    losses, chosen_rewards, rejected_rewards = trainer.cpo_loss(c, r)
    return losses, chosen_rewards, rejected_rewards, c, r, {}


def kto_pair_trl08(beta, policy_chosen_logps, policy_rejected_logps, reference_chosen_logps,
                   reference_rejected_logps):
    """TRL 0.8's DPOTrainer.dpo_loss for loss_type == "kto_pair" (trl/trainer/dpo_trainer.py, v0.8.6),
    transcribed: the losses and the rewards it returns."""
    import torch
    import torch.nn.functional as F

    # eqn (7) of the HALOs paper
    chosen_KL = (policy_chosen_logps - reference_chosen_logps).mean().clamp(min=0)
    rejected_KL = (policy_rejected_logps - reference_rejected_logps).mean().clamp(min=0)

    chosen_logratios = policy_chosen_logps - reference_chosen_logps
    rejected_logratios = policy_rejected_logps - reference_rejected_logps
    # As described in the KTO report, the KL term for chosen (rejected) is estimated using the rejected (chosen) half.
    losses = torch.cat(
        (
            1 - F.sigmoid(beta * (chosen_logratios - rejected_KL)),
            1 - F.sigmoid(beta * (chosen_KL - rejected_logratios)),
        ),
        0,
    )
    chosen_rewards = beta * (policy_chosen_logps - reference_chosen_logps).detach()
    rejected_rewards = beta * (policy_rejected_logps - reference_rejected_logps).detach()
    return losses, chosen_rewards, rejected_rewards


def kto_pair(p, t, tmp):
    halves, chosen_rewards, rejected_rewards = kto_pair_trl08(p["beta"], t["pc"], t["pr"], t["rc"], t["rr"])
    n = t["pc"].shape[0]
    losses = (halves[:n] + halves[n:]) / 2
    return losses, chosen_rewards, rejected_rewards, t["pc"], t["pr"], {
        "halves": halves, "loss": halves.mean()}


def answer(p, n):
    """The answer to one parsed request."""
    import torch
    import trl

    t = {"pc": torch.tensor(p["pc"], requires_grad=True), "pr": torch.tensor(p["pr"], requires_grad=True)}
    for key, name in (("rc", "rc"), ("rr", "rr"), ("chosen_lengths", "lc"), ("rejected_lengths", "lr")):
        if key in p:
            t[name] = torch.tensor(p[key], dtype=torch.float64)
    run = {"orpo": orpo, "simpo": simpo, "kto_pair": kto_pair}[p["loss"]]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        losses, chosen_rewards, rejected_rewards, c, r, extra = run(p, t, tmp)
    if p["ftx"] > FTX_THRESHOLD:  # LF's SFT term: the chosen log-prob per token
        losses = losses + p["ftx"] * -(t["pc"] / t["lc"])
    if losses.dtype != torch.float64 or losses.shape != (n,):
        raise Failure(f"the losses came back as {losses.dtype} {tuple(losses.shape)}: TRL changed")
    grad_chosen, grad_rejected = torch.autograd.grad(losses.mean(), (t["pc"], t["pr"]))

    def values(x):  # JSON has no NaN or inf: null
        x = x.detach()
        finite = [float(v) if math.isfinite(v) else None for v in x.reshape(-1).tolist()]
        return finite if x.dim() else finite[0]

    out = {"losses": values(losses), "chosen_rewards": values(chosen_rewards),
           "rejected_rewards": values(rejected_rewards), "chosen_logps": values(c), "rejected_logps": values(r),
           "grad_chosen": values(grad_chosen), "grad_rejected": values(grad_rejected)}
    for key, x in extra.items():
        out[key] = values(x)
    out["trl_version"] = trl.__version__
    for key, v in out.items():
        if v is None or (isinstance(v, list) and None in v):
            print(f"trl_pref_losses.py: note: {p['loss']}: non-finite {key} (null)", file=sys.stderr)
    return out


def main():
    parsed, as_array = read_requests(parse)
    torch, _, _ = require(["torch", "trl", "accelerate"],
                          "the Python packages torch, accelerate and trl are needed")
    torch.set_default_dtype(torch.float64)
    write_answers([answer(*p) for p in parsed], as_array)
    return 0


if __name__ == "__main__":
    run(main, "trl_pref_losses.py")
