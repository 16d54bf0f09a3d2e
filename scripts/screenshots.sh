#!/usr/bin/env bash
# Takes the README's screenshots in a real window under Xvfb (a real X server, the xcb platform,
# not offscreen rendering): the main window, every page of the new-run wizard on the demo project
# and every dialog (by tests/ui/tst_window_screenshots, from the screen), the dashboard of
# a demo run launched from the wizard while it trains, the dashboard with an SP=1 and an SP=2
# run of the demo overlaid, the Chat tab with an early checkpoint and the final model of a demo run
# answering the same prompt, and a remote run: the Hosts page testing a throwaway sshd on
# 127.0.0.1, and the dashboard of a run submitted to it with `studio submit` and attached in the
# studio, a run folder written by another tool whose odd fields the dashboard repairs and
# reports, a run of 16 ranks over 200,000 steps, a LLaMA-Factory run folder (trainer_log.jsonl),
# and a real LLaMA-Factory run followed live over studio-train's run of the same config. Writes
# docs/screenshots/*.png (or into the folder given).
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
  [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
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

echo "== the main window, every wizard page and every dialog, grabbed from a bare X server"
# tests/ui/tst_window_screenshots starts its own Xvfb (no window manager), checks that the screen
# shows each window as it renders itself and that nothing is clipped, and keeps the screenshots here.
STUDIO_SCREENSHOT_DIR="$out" "${STUDIO_BUILD_DIR:-$root/build}/tests/ui/tst_window_screenshots"

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
echo "== a 4-rank run (SP 4) of the demo, and it compared with an SP 1 run at another learning rate"
"$bin/studio-train" train resources/demo/sft_demo.yaml --set model_name_or_path="$model" \
  --set output_dir="$work/sp1-lr3e-3" --set logging_steps=1 >/dev/null 2>&1
"$bin/studio-train" train resources/demo/sft_demo.yaml --nproc 4 --set sequence_parallel_size=4 \
  --set learning_rate=2.0e-3 --set model_name_or_path="$model" --set output_dir="$work/sp4-lr2e-3" \
  --set logging_steps=1 >/dev/null 2>&1
"$bin/studio" "$work/sp4-lr2e-3" --runs-root "$runs" --screenshot "$out/dashboard-4-ranks.png" \
  --screenshot-delay 3000
# The comparison's own PNG export: the loss chart with both runs above the losses and the
# config keys that differ.
"$bin/studio" "$work/sp1-lr3e-3" --compare "$work/sp4-lr2e-3" --runs-root "$runs" \
  --screenshot "$out/comparison-lr-sp1-sp4.png"
echo "== the Chat tab: an early checkpoint and the final model of a longer demo run, one prompt"
# Real answers from studio-train chat (greedy), the final model on the left, checkpoint-250 on the
# right.
"$bin/studio-train" train resources/demo/sft_demo.yaml --set model_name_or_path="$model" \
  --set output_dir="$work/chat" --set max_steps="${STUDIO_SHOT_CHAT_STEPS:-2000}" \
  --set save_steps=250 --set save_total_limit=10 --set eval_steps=500 --set logging_steps=50 \
  >/dev/null 2>&1
"$bin/studio" "$work/chat" --runs-root "$runs" --screenshot "$out/chat-side-by-side.png" \
  --screenshot-chat $'Reverse the word.\nflag'
echo "== a run folder another tool wrote (every step's gpus[].device as \"cuda:N\"): drawn whole, the repair said"
other=$work/other-tool-run
mkdir -p "$other"
python3 - "$other/events.jsonl" <<'PY'
import json, math, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"event": "start", "stage": "sft", "world_size": 2, "time": 1.8e9}) + "\n")
    for s in range(1, 401):
        gpus = [{"rank": r, "device": f"cuda:{r}", "allocated_mib": 52000 + 900 * math.sin(s / 9 + r),
                 "reserved_mib": 61440, "total_mib": 81559} for r in range(2)]
        f.write(json.dumps({"event": "step", "step": s, "loss": 2.2 * math.exp(-s / 120) + 0.4,
                            "lr": 2e-5, "time": 1.8e9 + 3 * s, "tokens_per_sec": 9000, "gpus": gpus}) + "\n")
PY
"$bin/studio" "$other" --runs-root "$runs" --screenshot "$out/dashboard-repaired-fields.png" \
  --screenshot-delay 2500

echo "== 16 ranks over 200,000 steps: each rank its own colour, the legend in rows, the rows merged"
big=$work/sixteen-ranks
mkdir -p "$big"
python3 - "$big/events.jsonl" <<'PY'
import json, math, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"event": "start", "stage": "sft", "world_size": 16, "sequence_parallel_size": 16,
                        "sequence_parallel_mode": "usp", "time": 1.8e9}) + "\n")
    for s in range(1, 200001):
        gpus = [{"rank": r, "device": r % 8, "allocated_mib": 60000 + 4000 * math.sin(s / 20000 + r / 2.5) + 300 * r,
                 "reserved_mib": 70000 + 250 * r, "total_mib": 81559} for r in range(16)]
        f.write(json.dumps({"event": "step", "step": s, "loss": 2.2 * math.exp(-s / 40000) + 0.5 + 0.05 * math.sin(s),
                            "lr": 1e-5, "time": 1.8e9 + 2 * s, "tokens_per_sec": 250000 + 5000 * math.sin(s / 500),
                            "grad_norm": 0.6 + 0.1 * math.sin(s / 300), "gpus": gpus}, separators=(",", ":")) + "\n")
PY
"$bin/studio" "$big" --runs-root "$runs" --screenshot "$out/dashboard-16-ranks.png" --screenshot-chart memory \
  --screenshot-delay "${STUDIO_SHOT_BIG_MS:-30000}"

echo "== a LLaMA-Factory run folder (trainer_log.jsonl only) on the dashboard"
lf=$work/llamafactory-run
mkdir -p "$lf"
python3 - "$lf/trainer_log.jsonl" <<'PY'
import json, math, sys, datetime
with open(sys.argv[1], "w") as f:
    total = 300
    for s in range(1, total + 1):
        t = str(datetime.timedelta(seconds=4 * s))
        f.write(json.dumps({"current_steps": s, "total_steps": total, "loss": round(1.9 * math.exp(-s / 90) + 0.6 + 0.04 * math.sin(s), 4),
                            "lr": 2e-5 * 0.5 * (1 + math.cos(math.pi * s / total)), "epoch": round(3 * s / total, 2),
                            "percentage": round(100 * s / total, 2), "elapsed_time": t, "remaining_time": "0:00:00",
                            "throughput": 5200.0 + 100 * math.sin(s / 7), "vram_allocated": 41.5 + math.sin(s / 40),
                            "vram_reserved": 47.0}) + "\n")
        if s % 50 == 0:
            f.write(json.dumps({"current_steps": s, "total_steps": total, "eval_loss": round(1.6 * math.exp(-s / 110) + 0.7, 4),
                                "epoch": round(3 * s / total, 2), "percentage": round(100 * s / total, 2),
                                "elapsed_time": t, "remaining_time": "0:00:00"}) + "\n")
    f.write(json.dumps({"current_steps": total, "total_steps": total, "epoch": 3.0, "percentage": 100.0,
                        "elapsed_time": str(datetime.timedelta(seconds=4 * total)), "remaining_time": "0:00:00"}) + "\n")
PY
"$bin/studio" "$lf" --runs-root "$runs" --screenshot "$out/dashboard-llamafactory-log.png" \
  --screenshot-delay 3000

echo "== a real LLaMA-Factory run followed live, overlaid on studio-train's run of the same config"
# LLaMA-Factory 0.9.5 from scripts/setup.sh's environment, on 2 CPU processes (FORCE_TORCHRUN)
# under studio-train supervise, as the studio launches it; studio-train's run of the same YAML
# (same model, data, seed) finished first. The screenshot is taken while LLaMA-Factory trains.
. "$root/scripts/python-env.sh"
lf_steps=${STUDIO_SHOT_LF_STEPS:-300}
lf_yaml=$work/lf-demo.yaml
sed -e "s#^model_name_or_path: .*#model_name_or_path: $model#" \
    -e "s#^dataset_dir: .*#dataset_dir: $root/resources/demo/data#" \
    -e "s#^output_dir: .*#output_dir: $work/lf-live#" \
    -e "s#^max_steps: .*#max_steps: $lf_steps#" -e "s#^logging_steps: .*#logging_steps: 2#" \
    -e "s#^save_steps: .*#save_steps: 100000#" -e "s#^eval_steps: .*#eval_steps: 100#" \
    resources/demo/sft_demo.yaml >"$lf_yaml"
"$bin/studio-train" train "$lf_yaml" --set output_dir="$work/studio-train-same-config" >/dev/null 2>&1
"$bin/studio-train" supervise --output-dir "$work/lf-live" --env FORCE_TORCHRUN=1 \
  --env NPROC_PER_NODE=2 -- "$STUDIO_LLAMAFACTORY_CLI" train "$lf_yaml" >"$work/lf-live.log" 2>&1 &
lf_pid=$!
for _ in $(seq 1 600); do  # until a third of the steps are logged (at most 5 minutes)
  [ "$(grep -c loss "$work/lf-live/trainer_log.jsonl" 2>/dev/null || echo 0)" -ge $((lf_steps / 6)) ] && break
  sleep 0.5
done
"$bin/studio" "$work/lf-live" --overlay "$work/studio-train-same-config" --runs-root "$runs" \
  --screenshot "$out/dashboard-llamafactory-live.png" --screenshot-delay 4000
wait "$lf_pid" || echo "(the LLaMA-Factory run failed: see $work/lf-live.log)"

echo "== a run on an SSH host: the Hosts page, then a run from studio submit attached in the studio"
ssh_dir=$work/ssh
mkdir -p "$ssh_dir"
ssh-keygen -q -t ed25519 -N "" -f "$ssh_dir/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$ssh_dir/user_key"
cp "$ssh_dir/user_key.pub" "$ssh_dir/authorized_keys"
[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
port=$((20000 + RANDOM % 20000))
printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $ssh_dir/host_key" \
  "AuthorizedKeysFile $ssh_dir/authorized_keys" "PidFile $ssh_dir/sshd.pid" "StrictModes no" \
  "UsePAM no" "PermitRootLogin yes" "PasswordAuthentication no" \
  "KbdInteractiveAuthentication no" "Subsystem sftp internal-sftp" >"$ssh_dir/sshd_config"
/usr/sbin/sshd -D -e -f "$ssh_dir/sshd_config" 2>"$ssh_dir/sshd.log" &
sshd_pid=$!
sleep 1
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$ssh_dir/host_key.pub")" >"$ssh_dir/known_hosts"
target="$(id -un)@127.0.0.1:$port"
remote_root="$work/remote runs"
ssh_opts=(--host "$target" --identity "$ssh_dir/user_key" --known-hosts "$ssh_dir/known_hosts"
          --remote-root "$remote_root" --batch)
# The saved host, as File > Hosts... writes it (QSettings' array format).
mkdir -p "$XDG_CONFIG_HOME/SeqStudio"
printf '%s\n' "[hosts]" "1\\name=local-sshd" "1\\target=$target" \
  "1\\identityFile=$ssh_dir/user_key" "1\\knownHostsFile=$ssh_dir/known_hosts" \
  "1\\engine=$bin/studio-train" "1\\remoteRoot=$remote_root" "size=1" \
  >>"$XDG_CONFIG_HOME/SeqStudio/studio.conf"
"$bin/studio" --runs-root "$runs" --screenshot-hosts "$out/hosts-inventory.png" --screenshot-delay 1500
id=$("$bin/studio" submit "${ssh_opts[@]}" --engine "$bin/studio-train" --upload-model \
  --set model_name_or_path="$model" resources/demo/sft_demo.yaml | tail -1)
"$bin/studio" --runs-root "$runs" --remote-run "local-sshd/$id" \
  --screenshot "$out/remote-run-live.png" --screenshot-delay "${STUDIO_SHOT_LIVE_MS:-14000}"
# The run goes on without the studio; wait for its end before the folder is removed.
"$bin/studio" attach "${ssh_opts[@]}" "$id" >/dev/null
ls -l "$out"
