#!/usr/bin/env bash
# The README's main-job command: installs what is missing and builds; then, with a display, opens
# the studio on the demo project (demo model and dataset, the wizard filled in, one click on
# Launch trains it and the dashboard shows it live). Without a display (or with STUDIO_HEADLESS=1)
# it runs the demo headless instead: validates the bundled LLaMA-Factory examples, trains the
# built-in demo model on the demo data with a progress bar (loss falling from ~8 to ~2), then
# DPO on the result with one sequence split over 2 worker processes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
# Only what it runs: the studio and studio-train, not the tests and benchmarks (scripts/test.sh
# builds those): 246 build steps, 15.3 minutes the first time on a 2-core machine with ccache
# off (measured 2026-11-28); later builds take seconds.
echo "== building studio and studio-train (the first time: about 15 minutes on 2 cores)"
STUDIO_BUILD_TARGETS="studio studio-train" "$root/scripts/build.sh" >/dev/null
bin=${STUDIO_BUILD_DIR:-$root/build}/app

if { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; } && [ -x "$bin/studio" ] \
    && [ -z "${STUDIO_HEADLESS:-}" ]; then
  echo "== opening the studio on the demo project (press Launch on the wizard's last page)"
  exec "$bin/studio" --demo
fi
echo "== no display (or STUDIO_HEADLESS set): the headless demo run"
cd "$root/resources/examples"   # LLaMA-Factory paths are relative to the working directory

echo "== studio-train $("$bin/studio-train" --version | head -n1 | cut -d' ' -f2): validating the bundled LLaMA-Factory examples"
"$bin/studio-train" validate qwen2.5-7b-sft-sp8.yaml --nproc 8
"$bin/studio-train" validate qwen2.5-7b-dpo-ulysses4.yaml --nproc 8
"$bin/studio-train" validate llama-3.1-8b-sft-usp.yaml --nproc 8 --nnodes 2
echo
echo "== the same SP=8 file on a 4-GPU machine is refused, naming the key and its line:"
"$bin/studio-train" validate qwen2.5-7b-sft-sp8.yaml --nproc 4 || echo "(exit code $?)"
echo
echo "== the config as the engine runs it (print-config):"
"$bin/studio-train" print-config qwen2.5-7b-sft-sp8.yaml --nproc 8 2>/dev/null | sed -n '1,200p'

echo
echo "== the built-in demo: a ~1.4M-parameter Qwen2-style model learns four small text tasks"
cd "$root"
rm -rf build/demo
"$bin/studio-train" init-model --config resources/demo/model/config.json --out build/demo/model --seed 7 >/dev/null
"$bin/studio-train" train resources/demo/sft_demo.yaml
echo "== metrics: build/demo/run/events.jsonl; final model: build/demo/run"
echo
echo "== DPO on that model, one sequence split over 2 worker processes (zigzag-ring SP=2, Gloo)"
"$bin/studio-train" train resources/demo/dpo_demo.yaml --nproc 2 --set sequence_parallel_size=2
echo "== metrics (loss, rewards/accuracies, ...): build/demo/run-dpo/events.jsonl"
