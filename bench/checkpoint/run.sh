#!/usr/bin/env bash
# Checkpoints written in the background against the foreground: the same short SFT run of a
# model (default: bench/train_step/shapes/qwen2-47m, freshly initialised) with a checkpoint every
# SAVE_STEPS steps, once with STUDIO_CHECKPOINT_WRITES=foreground and once as the engine does by
# default, each timed as the whole process (wall clock) and per step from events.jsonl (the mean
# time of a step that follows a save against the others'). Prints one markdown row per mode.
#
#   bench/checkpoint/run.sh [--config CONFIG.json] [--steps N] [--save-steps K] [--nproc P]
#                           [--cutoff T] [--batch B]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exe="$root/build/app/studio-train"
config="$root/bench/train_step/shapes/qwen2-47m/config.json"
steps=12 save_steps=2 nproc=1 cutoff=256 batch=2
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --save-steps) save_steps="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --cutoff) cutoff="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$exe" ] || { echo "build studio-train first (ninja -C build studio-train)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
. "$root/bench/shape_model.sh"
make_shape_model "$exe" "$config" "$work/model" "$root"
cat > "$work/run.yaml" <<YAML
model_name_or_path: $work/model
stage: sft
do_train: true
finetuning_type: full
dataset: demo_sft
dataset_dir: $root/resources/demo/data
template: qwen
cutoff_len: $cutoff
max_samples: 256
output_dir: $work/out
overwrite_output_dir: true
logging_steps: 1
save_steps: $save_steps
per_device_train_batch_size: $batch
learning_rate: 1.0e-4
max_steps: $steps
eval_strategy: 'no'
seed: 1
YAML
echo "| mode | whole run s | mean step s after a save | mean step s otherwise | checkpoint MiB (rank 0's files) |"
echo "|---|---:|---:|---:|---:|"
for mode in foreground background; do
  rm -rf "$work/out"
  start=$(date +%s.%N)
  if [ "$mode" = foreground ]; then
    STUDIO_CHECKPOINT_WRITES=foreground "$exe" train "$work/run.yaml" --nproc "$nproc" 2>/dev/null
  else
    env -u STUDIO_CHECKPOINT_WRITES "$exe" train "$work/run.yaml" --nproc "$nproc" 2>/dev/null
  fi
  end=$(date +%s.%N)
  python3 - "$work/out" "$mode" "$start" "$end" "$save_steps" <<'PY'
import json, os, sys
out, mode, start, end, k = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
times = {}
for line in open(os.path.join(out, "events.jsonl")):
    e = json.loads(line)
    if e.get("event") == "step":
        times[e["step"]] = e["time"]
after, other = [], []
for s in sorted(times):
    if s - 1 in times:
        (after if (s - 1) % k == 0 else other).append(times[s] - times[s - 1])
ck = [d for d in os.listdir(out) if d.startswith("checkpoint-")]
size = sum(os.path.getsize(os.path.join(out, ck[0], f)) for f in os.listdir(os.path.join(out, ck[0]))) if ck else 0
mean = lambda v: sum(v) / len(v) if v else float("nan")
print(f"| {mode} | {end - start:.2f} | {mean(after):.3f} | {mean(other):.3f} | {size / 2**20:.0f} |")
PY
done
