#!/usr/bin/env bash
# Takes the README's screenshots in a real window under Xvfb (a real X server, the xcb platform,
# not offscreen rendering): every page of the new-run wizard on the demo project, the dashboard of
# a demo run launched from the wizard while it trains, and the dashboard with an SP=1 and an SP=2
# run of the demo overlaid. Writes docs/screenshots/*.png (or into the folder given).
#   usage: scripts/screenshots.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${STUDIO_BUILD_DIR:-$root/build}/app
out=$(realpath -m "${1:-$root/docs/screenshots}")
for exe in studio studio-train; do
  [ -x "$bin/$exe" ] || { echo "screenshots: $bin/$exe is missing: run scripts/build.sh" >&2; exit 2; }
done
command -v Xvfb >/dev/null || { echo "screenshots: Xvfb is missing: run scripts/setup.sh" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
display=
cleanup() {
  [ -n "${xvfb_pid:-}" ] && kill "$xvfb_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for n in $(seq 90 130); do
  [ -e "/tmp/.X$n-lock" ] && continue
  Xvfb ":$n" -screen 0 1600x1000x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
  xvfb_pid=$!
  sleep 1
  if kill -0 "$xvfb_pid" 2>/dev/null; then display=":$n"; break; fi
done
[ -n "$display" ] || { echo "screenshots: no Xvfb display could start" >&2; exit 1; }
export DISPLAY=$display QT_QPA_PLATFORM=xcb
# A fresh studio: its own settings, data (the demo model is created there) and runs.
export XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data
runs=$work/runs

echo "== the wizard's pages on the demo project"
"$bin/studio" --demo --runs-root "$runs" --screenshot-wizard "$out" --screenshot-delay 2500

echo "== a demo run launched from the wizard, its dashboard while it trains"
"$bin/studio" --demo --launch --runs-root "$runs" --screenshot "$out/dashboard-live.png" \
  --screenshot-delay "${STUDIO_SHOT_LIVE_MS:-14000}"
# The run goes on without the studio (it was started detached): let it finish.
for _ in $(seq 1 120); do
  grep -qs '"state": *"running"' "$runs"/*/status.json || break
  sleep 1
done

echo "== SP=1 and SP=2 runs of the demo on one chart"
model=$work/data/SeqStudio/studio/demo/model
cd "$root"
"$bin/studio-train" train resources/demo/sft_demo.yaml --set model_name_or_path="$model" \
  --set output_dir="$work/sp1" --set max_steps=40 --set logging_steps=1 >/dev/null 2>&1
"$bin/studio-train" train resources/demo/sft_demo.yaml --nproc 2 --set sequence_parallel_size=2 \
  --set model_name_or_path="$model" --set output_dir="$work/sp2" --set max_steps=40 \
  --set logging_steps=1 >/dev/null 2>&1
"$bin/studio" "$work/sp1" --overlay "$work/sp2" --runs-root "$runs" \
  --screenshot "$out/dashboard-overlay-sp1-sp2.png" --screenshot-delay 3000
ls -l "$out"
