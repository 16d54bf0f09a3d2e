#!/usr/bin/env python3
"""The engine's losses against transformers' from the same weights on the same batches, step by
step: what `scripts/gpu-check.sh --perf` (perf_loss_agreement) checks. Plain Python, no torch.

    agreement.py DIR

DIR holds the RESULT lines of one case (bench_train_step and hf_reference.py, the same --case and
--steps) in files named SIDE.DTYPE: engine.fp32, engine.bf16, transformers.fp32, transformers.bf16
(the Trainer's bf16=True: autocast over fp32 weights) and transformers.bf16-master (DeepSpeed's
bf16, which is the engine's scheme: bf16 weights, clipping and AdamW on fp32 masters). Every pair
gets its worst relative step difference |a - b| / max(1, |b|); then two checks, exit status 1 when
either fails:

- fp32: the engine within 1e-5 of transformers at the first step and within 1e-3 at every step.
  Both compute the same thing in the same precision, so only the order of summations differs: at
  the first step (identical weights) that is rounding of the loss itself; each update then carries
  the difference into the weights and training amplifies it (on the CPU, 2026-12-06, the
  Qwen2.5-0.5B shape at 2x128 went from 1e-7 at step 1 to 1.3e-4 at step 16, both sides in fp32).
- bf16: the engine's bf16 run is no farther from the fp32 trajectory than 1.5 times the farther of
  transformers' two bf16 schemes is from it. bf16 rounds every weight to 8 significant bits, so two
  correct bf16 implementations need not agree with each other more closely than each agrees with
  the exact (fp32) run; what a correct one must not do is lose more to rounding than the reference
  does. 1.5 leaves room for one run's rounding noise being larger by chance than another's (on the
  CPU the engine's drift was 0.91-1.06 of the masters scheme's, 2026-12-06). The fp32 trajectory
  is the engine's (within 1e-4 of transformers' by the first check).
"""

import itertools
import os
import sys

FP32_FIRST_BOUND = 1e-5
FP32_BOUND = 1e-3
BF16_FACTOR = 1.5
ORDER = ["engine.fp32", "transformers.fp32", "engine.bf16", "transformers.bf16",
         "transformers.bf16-master"]


def losses(path):
    """The `losses=` list of a file's RESULT line; None when the file is missing or the run failed."""
    try:
        text = open(path).read()
    except OSError:
        return None
    fields = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
    if "error" in fields or "losses" not in fields:
        return None
    return [float(x) for x in fields["losses"].split(",")]


def relative(a, b):
    return [abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b)]


def worst(a, b):
    r = relative(a, b)
    w = max(r)
    return w, r.index(w) + 1


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    folder = argv[1]
    runs = {}
    for name in ORDER:
        got = losses(os.path.join(folder, name))
        if got is not None:
            runs[name] = got
    lengths = {len(v) for v in runs.values()}
    if len(lengths) > 1:
        print(f"agreement.py: the runs in {folder} have different step counts: "
              + ", ".join(f"{k} {len(v)}" for k, v in runs.items()), file=sys.stderr)
        return 2
    status = 0
    if "engine.fp32" not in runs or "transformers.fp32" not in runs:
        print(f"agreement.py: {folder} lacks engine.fp32 or transformers.fp32 (or a run failed)",
              file=sys.stderr)
        return 2
    steps = lengths.pop()
    e32, t32 = runs["engine.fp32"], runs["transformers.fp32"]
    print(f"{steps} steps; step 1 engine {e32[0]:.6f} / transformers {t32[0]:.6f}; "
          f"step {steps} engine {e32[-1]:.6f} / transformers {t32[-1]:.6f}")
    print("| a | b | worst relative step difference | at step |")
    print("|---|---|---:|---:|")
    for a, b in itertools.combinations([n for n in ORDER if n in runs], 2):
        w, at = worst(runs[a], runs[b])
        print(f"| {a} | {b} | {w:.2e} | {at} |")
    for name, values in runs.items():
        print(f"  {name}: " + " ".join(f"{x:.6f}" for x in values))

    w, at = worst(e32, t32)
    first = relative(e32[:1], t32[:1])[0]
    ok = w <= FP32_BOUND and first <= FP32_FIRST_BOUND
    print(f"fp32: engine against transformers, first step {first:.2e}, worst {w:.2e} at step {at}: "
          f"{'within' if ok else 'OUTSIDE'} {FP32_FIRST_BOUND:.0e} (first step) and {FP32_BOUND:.0e}")
    if not ok:
        status = 1
    if "engine.bf16" in runs:
        references = [n for n in ("transformers.bf16", "transformers.bf16-master") if n in runs]
        if not references:
            print("bf16: no transformers bf16 run to compare with", file=sys.stderr)
            return 2
        drift = {n: worst(runs[n], e32)[0] for n in ["engine.bf16"] + references}
        bound = BF16_FACTOR * max(drift[n] for n in references)
        print("bf16: farthest step from the fp32 trajectory: " +
              ", ".join(f"{n} {d:.2e}" for n, d in drift.items()))
        ok = drift["engine.bf16"] <= bound
        print(f"bf16: the engine's drift {drift['engine.bf16']:.2e} is "
              f"{'within' if ok else 'OUTSIDE'} {BF16_FACTOR} x transformers' larger drift = {bound:.2e}")
        if not ok:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
