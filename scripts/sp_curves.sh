#!/usr/bin/env bash
# Trains the built-in demo (SFT and DPO) with SP=1 and with SP=4 in every mode, through the real
# launcher (`studio-train train --nproc 4`), and plots the loss curves into
# docs/images/sp_loss_curves.png (needs python3-matplotlib). The numbers behind
# docs/SEQUENCE_PARALLEL.md. Usage: scripts/sp_curves.sh [SFT_STEPS] [DPO_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
sft_steps=${1:-30}
dpo_steps=${2:-20}
bin=build/app/studio-train
[[ -x $bin ]] || { echo "build first: scripts/build.sh" >&2; exit 1; }
[[ -f build/demo/model/model.safetensors ]] ||
  "$bin" init-model --config resources/demo/model/config.json --out build/demo/model --seed 7 >/dev/null
out=build/sp-curves
mkdir -p "$out"

run() {  # name config nproc steps [--set ...]
  local name=$1 cfg=$2 nproc=$3 steps=$4
  shift 4
  echo "== $name"
  rm -rf "${out:?}/$name"  # events.jsonl appends across runs: start each curve afresh
  "$bin" train "$cfg" --nproc "$nproc" --set max_steps="$steps" --set logging_steps=1 \
    --set eval_strategy=no --set save_steps=100000 --set output_dir="$out/$name" "$@" \
    2>&1 | grep -v '^\[' | tail -2
}

sp4=(--set sequence_parallel_size=4)
for stage in sft dpo; do
  cfg=resources/demo/${stage}_demo.yaml
  steps=$sft_steps batch=8
  [[ $stage == dpo ]] && steps=$dpo_steps batch=8
  # DPO starts from the SFT demo's result (as resources/demo/dpo_demo.yaml does from build/demo/run).
  [[ $stage == dpo ]] && batch="$batch --set model_name_or_path=$out/sft-sp1"
  run "$stage-sp1" "$cfg" 1 "$steps" --set per_device_train_batch_size=$batch
  run "$stage-sp4-zigzag-ring" "$cfg" 4 "$steps" --set per_device_train_batch_size=$batch "${sp4[@]}" \
    --set sequence_parallel_mode=zigzag-ring
  run "$stage-sp4-ulysses" "$cfg" 4 "$steps" --set per_device_train_batch_size=$batch "${sp4[@]}" \
    --set sequence_parallel_mode=ulysses
  run "$stage-sp4-usp" "$cfg" 4 "$steps" --set per_device_train_batch_size=$batch "${sp4[@]}" \
    --set sequence_parallel_mode=usp --set sequence_parallel_ulysses_degree=2 \
    --set sequence_parallel_ring_degree=2
done

/usr/bin/python3 - "$out" docs/images/sp_loss_curves.png <<'PY'
import json, sys, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, png = sys.argv[1], sys.argv[2]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
styles = {"sp1": ("SP=1", "-", 3.5), "sp4-zigzag-ring": ("SP=4 zigzag-ring", "--", 2),
          "sp4-ulysses": ("SP=4 ulysses", ":", 2), "sp4-usp": ("SP=4 usp (2x2)", "-.", 1.5)}
report = []
for ax, stage in zip(axes, ["sft", "dpo"]):
    ref = None
    for key, (label, ls, lw) in styles.items():
        path = os.path.join(out, f"{stage}-{key}", "events.jsonl")
        steps, losses = [], []
        for line in open(path):
            e = json.loads(line)
            if e.get("event") == "step" and e.get("loss") is not None:
                steps.append(e["step"]); losses.append(e["loss"])
        ax.plot(steps, losses, ls, lw=lw, label=label)
        if ref is None:
            ref = losses
        else:
            worst = max(abs(a - b) / abs(a) for a, b in zip(ref, losses))
            report.append(f"{stage} {label}: {len(losses)} steps, max relative loss difference vs SP=1 {worst:.2e}")
    ax.set_title(f"demo {stage.upper()}: loss per step")
    ax.set_xlabel("step"); ax.set_ylabel("loss"); ax.grid(alpha=0.3); ax.legend()
fig.tight_layout()
fig.savefig(png, dpi=110)
print("\n".join(report))
print("wrote", png)
PY
