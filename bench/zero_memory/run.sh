#!/usr/bin/env bash
# Host memory of a sharded CPU run against the unsharded one: the same short SFT run of a model
# (default: bench/train_step/shapes/qwen2-47m, freshly initialised) on P processes (default 4,
# ulysses SP 2 x dp 2) at ZeRO stages 0 and 3, each measured from outside (the largest resident
# set of any process of the run, the kernel's own count: getrusage of the launcher's tree) and
# from its events (each rank's model states, its allocator peak over the steps, its RSS at the
# last step), beside what `studio-train estimate --cpu` says a rank holds. One markdown row per
# stage.
#
#   bench/zero_memory/run.sh [--config CONFIG.json] [--nproc P] [--sp S] [--mode M]
#                            [--cutoff T] [--batch B] [--steps N] [--stages "0 3"]
#                            [--all-targets]   (train_on_prompt: every token a target, as the
#                                               estimate takes it)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exe="${STUDIO_BUILD_DIR:-$root/build}/app/studio-train"
config="$root/bench/train_step/shapes/qwen2-47m/config.json"
nproc=4 sp=2 mode=ulysses cutoff=1024 batch=2 steps=4 stages="0 3" on_prompt=false
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --sp) sp="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --cutoff) cutoff="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --stages) stages="$2"; shift 2 ;;
    --all-targets) on_prompt=true; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$exe" ] || { echo "build studio-train first (ninja -C build studio-train)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
. "$root/bench/shape_model.sh"
make_shape_model "$exe" "$config" "$work/model" "$root"
echo "| ZeRO | largest process RSS MiB (kernel) | per rank: model states MiB | allocator peak MiB | estimate MiB (--cpu) | RSS at the end MiB | mean step s (after the first) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for stage in $stages; do
  cat > "$work/run-$stage.yaml" <<YAML
model_name_or_path: $work/model
stage: sft
do_train: true
finetuning_type: full
dataset: demo_sft
dataset_dir: $root/resources/demo/data
template: qwen
cutoff_len: $cutoff
packing: true
train_on_prompt: $on_prompt
max_samples: 512
output_dir: $work/out-$stage
overwrite_output_dir: true
logging_steps: 1
save_strategy: 'no'
per_device_train_batch_size: $batch
learning_rate: 1.0e-4
max_steps: $steps
eval_strategy: 'no'
seed: 1
sequence_parallel_size: $sp
sequence_parallel_mode: $mode
zero_stage: $stage
YAML
  estimate=$("$exe" estimate "$work/run-$stage.yaml" --cpu --json --nproc "$nproc" 2>/dev/null || true)
  python3 - "$exe" "$work/run-$stage.yaml" "$nproc" "$work/out-$stage" "$stage" "$estimate" <<'PY'
import json, os, resource, subprocess, sys
exe, yaml, nproc, out, stage, estimate = sys.argv[1:7]
subprocess.run([exe, "train", yaml, "--nproc", nproc], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
states, peak, rss, times = {}, {}, {}, {}
for line in open(os.path.join(out, "events.jsonl")):
    e = json.loads(line)
    if e.get("event") == "step":
        times[e["step"]] = e["time"]
    for g in e.get("gpus") or []:
        r = g["rank"]
        if "model_states_mib" in g:
            states[r] = g["model_states_mib"]
        if g.get("peak_mib") is not None:
            peak[r] = max(peak.get(r, 0), g["peak_mib"])
        if g.get("reserved_mib") is not None:
            rss[r] = g["reserved_mib"]
try:
    est = json.loads(estimate)
    total = est.get("total_bytes", est.get("total"))
    est_mib = f"{total / 2**20:.0f}" if isinstance(total, (int, float)) else "?"
except Exception:
    est_mib = "?"
fmt = lambda d: " / ".join(f"{d[r]:.0f}" for r in sorted(d)) or "-"
gaps = [times[s] - times[s - 1] for s in sorted(times) if s - 1 in times]
step = f"{sum(gaps) / len(gaps):.2f}" if gaps else "-"
print(f"| {stage} | {largest:.0f} | {fmt(states)} | {fmt(peak)} | {est_mib} | {fmt(rss)} | {step} |")
PY
done
