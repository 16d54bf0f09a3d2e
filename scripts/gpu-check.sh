#!/usr/bin/env bash
# Validates a lent GPU machine in one command (shared/device/README.md): builds the engine against
# that machine's PyTorch, runs the CUDA tests, CUDA training steps against the CPU fp32 path,
# multi-rank NCCL sequence parallelism against SP=1 (where the machine has the GPUs for it), and the
# GPU benchmarks; writes one report, $OUT/gpu-check.md, plus the logs beside it.
#
#   scripts/gpu-check.sh [--out DIR] [--build-dir DIR] [--jobs N] [--skip-bench] [--quick]
#                        [--perf [--rehearse]] [--budget SECONDS]
#   --quick     for a short lease (one 10-minute command): builds only the CUDA tests and the
#               benchmarks, skips the engine's whole test suite on the GPU and the fp32 twins of
#               the bf16 comparisons; every skipped step is a 'not run' row of the report
#   --perf      the speed and memory check (under 8 minutes from a cold machine, build included;
#               budget 420 s unless --budget says otherwise): bench/train_step against
#               transformers (SDPA, fused AdamW, its loss; and with Liger's kernels when
#               .device-wheels/ holds the liger-kernel wheel: `pip download --no-deps -d
#               .device-wheels liger-kernel` here, carry .device-wheels) in bf16 for the
#               Qwen2.5-0.5B and 1.5B shapes at 8x1024, 1x8192, 1x16384 and (checkpointed)
#               1x32768; fp32 and bf16 loss agreement over 20 steps; attention; the memory
#               estimate against the measured peak at 8k and 32k tokens. Leaves under OUT/profile/
#               a Kineto trace of two steps per case (Perfetto), its per-kernel table
#               (trace_table.py: top kernels, launches per step, host waits, idle gaps) and CUDA
#               allocator snapshots with their history, replayed to the peak (memory_table.py),
#               so the analysis continues without the GPU
#   --rehearse  with --perf, on a machine without a GPU: the same steps on the CPU with the
#               demo model's shape and short cases, so that everything but the CUDA calls is
#               exercised before a lease
#   --budget S  starts no step once S seconds have passed (a 'not run' row each), so that the
#               report is written before the lease's limit
#   scripts/gpu-check.sh --here      # on a machine without a GPU (CI): check that this script's
#                                    # targets exist in the normal build and that it parses; no run
#
# On the device (shared/device/README.md): once, here, `../shared/device/pack-debs.sh` with the
# packages listed in DEVICE_DEBS below; then run
#   source .device-debs/activate.sh; scripts/gpu-check.sh
# with `.device-debs` carried. The Python is the machine's (python3 with its PyTorch) unless
# STUDIO_PYTHON names another. Every step is timed and its outcome is a row of the report; a failed
# step does not stop the later ones (the exit status is 1 when any failed). Budget: the whole run
# fits in 25 minutes on a cold H100 (build ~8 min with 16 cores).
#
# Multi-rank NCCL on ONE GPU: NCCL refuses two ranks of a communicator on the same device
# ("Duplicate GPU detected"), so the 2- and 4-rank SP runs over NCCL need as many GPUs; with fewer
# the report says so and the SP equivalence is covered by the Gloo tests (tst_sp_equivalence).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The Debian packages the engine and its Qt Test suites need on a machine that has none of them
# (give them to ../shared/device/pack-debs.sh).
DEVICE_DEBS="libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libpcre2-dev libpcre2-8-0
 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libicu-dev libicu72 libgloo-dev libgloo0
 qt6-base-dev qt6-base-dev-tools qmake6 qmake6-bin libqt6core6 libqt6test6 libqt6gui6 libqt6widgets6 libqt6network6
 libqt6concurrent6 libqt6printsupport6 libqt6dbus6 libqt6sql6 libqt6opengl6 libqt6xml6
 libqt6openglwidgets6 libdouble-conversion3 libb2-1 libmd4c0 libproxy1v5 libxkbcommon0
 libglib2.0-0 libffi8 libmount1 libselinux1 libblkid1"

out=${OUT:-$root/out/gpu-check}
build=$root/build-gpu
jobs=$(nproc)
here=0
bench=1
quick=0
perf=0
rehearse=0
budget=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --skip-bench) bench=0 ;;
    --quick) quick=1 ;;
    --perf) perf=1 ;;
    --rehearse) rehearse=1 ;;
    --budget) budget=$2; shift ;;
    --here) here=1 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

[ $rehearse -eq 1 ] && [ $perf -eq 0 ] && { echo "gpu-check.sh: --rehearse goes with --perf" >&2; exit 2; }
[ $perf -eq 1 ] && [ "$budget" -eq 0 ] && budget=420

# The build targets the run needs; --here checks that the normal build defines every one of them.
TARGETS=(studio-train bench_train_step bench_attention tst_rmsnorm_cuda tst_fused_linear_ce_cuda tst_quant4_cuda tst_rmsnorm_torch
         tst_communicator tst_sp_equivalence tst_train_loop tst_attention tst_decoder tst_zero
         tst_checkpointing tst_preference_loss tst_sp_attention tst_sp_layout tst_reference_logits
         tst_hf_checkpoint tst_safetensors tst_runtime_info tst_rmsnorm_reference tst_generate)

if [ $here -eq 1 ]; then
  b=${STUDIO_BUILD_DIR:-$root/build}
  [ -f "$b/build.ninja" ] || { echo "gpu-check.sh --here: no build in $b (run scripts/build.sh)" >&2; exit 1; }
  bash -n "$0" || exit 1
  have=$(ninja -C "$b" -t targets all 2>/dev/null | sed 's/:.*//')
  missing=0
  for t in "${TARGETS[@]}"; do
    grep -qx "$t" <<<"$have" || grep -q "/$t\$" <<<"$have" || { echo "gpu-check.sh: target $t is not in $b" >&2; missing=1; }
  done
  [ $missing -eq 0 ] || exit 1
  echo "gpu-check.sh --here: ${#TARGETS[@]} targets present in $b; run it on a GPU machine to execute them"
  exit 0
fi

mkdir -p "$out"
report=$out/gpu-check.md
python=${STUDIO_PYTHON:-python3}
failed=0
rows=()

# The steps --quick runs (the others are 'not run' rows).
QUICK_STEPS=" configure build_engine build_tests cuda_tests sft_fp32_cuda_vs_cpu sft_bf16_cuda_vs_cpu
 dpo_bf16_cuda_vs_cpu sp4_usp_gloo_shared_gpu sp4_usp_nccl sp2_zigzag-ring_gloo_bf16
 sp2_ulysses_gloo_bf16 sp2_zigzag-ring_nccl_bf16 sp2_ulysses_nccl_bf16 zero_gloo_bf16
 zero_nccl_bf16 long_options_bf16 longest_sequence_1gpu bench_train_step_bf16 bench_attention "

# step NAME COMMAND...: runs it with its output in $out/NAME.log; a row of the report.
step() {
  local name=$1; shift
  if [ $quick -eq 1 ] && [[ " ${QUICK_STEPS//$'\n'/ } " != *" $name "* ]]; then
    rows+=("| $name | not run | - | --quick |")
    return 1
  fi
  if [ "$budget" -gt 0 ] && [ $SECONDS -ge "$budget" ]; then
    rows+=("| $name | not run | - | the time budget (--budget $budget s) was spent |")
    echo "== $name: not run, the time budget was spent" >&2
    return 1
  fi
  local t0=$SECONDS
  echo "== $name" >&2
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local dt=$((SECONDS - t0))
  local verdict=pass
  if [ $rc -ne 0 ]; then verdict="FAIL (exit $rc)"; failed=1; fi
  rows+=("| $name | $verdict | ${dt} s | \`$name.log\`: $(tail -n 1 "$out/$name.log" | tr '|' '/' | cut -c1-160) |")
  echo "   $verdict in ${dt} s" >&2
  return $rc
}

write_report() {
{
  cat "$report.head"
  echo
  echo "| step | result | time | last line of its log |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  # MFU and peak memory of the train-step runs (run.sh's table has tokens/s and the ratio): the
  # engine's model FLOPs (bench_train_step's model_tflops_per_s) over the GPU's dense bf16 peak.
  "$python" - "$out" "$gpu_name" <<'EOF3' || true
import glob, os, re, sys
out, gpu = sys.argv[1], sys.argv[2]
peak = 989.4 if ("H100" in gpu or "H200" in gpu) else None  # dense bf16 TFLOP/s, SXM
rows = []
for path in sorted(glob.glob(os.path.join(out, "bench_train_step_*.log")) +
                   glob.glob(os.path.join(out, "perf_train_step_*.log"))):
    for line in open(path):
        if not line.startswith("RESULT"):
            continue
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        rows.append(f)
if rows:
    print("\n## train step: peak memory and MFU\n")
    print("| impl | case | dtype | tokens/s | peak MiB | model TFLOP/s | MFU (bf16 dense peak) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for f in rows:
        tf = f.get("model_tflops_per_s")
        mfu = f"{100 * float(tf) / peak:.1f}%" if tf and peak else "-"
        print(f"| {f.get('impl')} | {f.get('case')} | {f.get('dtype')} | {f.get('tokens_per_s')} | "
              f"{f.get('peak_mib')} | {tf or '-'} | {mfu} |")
EOF3
  for f in "$out"/bench_*.log "$out"/perf_*.log; do
    [ -f "$f" ] || continue
    echo
    echo "## $(basename "$f" .log)"
    echo
    grep -v '^==' "$f"
  done
} >"$report"
rm -f "$report.head"
}

gpu_count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n1)
{
  echo "# gpu-check $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- GPUs: ${gpu_count:-0} x ${gpu_name:-none found}"
  echo "- CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1), $(nproc) cores"
  echo "- PyTorch: $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
  echo "- nvcc: $(nvcc --version 2>/dev/null | tail -n 1)"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
} >"$report.head"

# RelWithDebInfo, as scripts/build.sh: the same compiler flags as the development build, so ccache
# serves a rehearsal of this script on a development machine from that build's objects.
configure() {
  if [ $rehearse -eq 1 ] && [ -f "$build/build.ninja" ]; then
    echo "rehearsal: the existing build in $build"
    return 0
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTUDIO_BUILD_GUI=OFF \
    -DSTUDIO_PYTHON="$(command -v "$python")" -DSTUDIO_CUDA=ON -DSTUDIO_CUDA_ARCHITECTURES=90a
}
# The engine first (needs only LibTorch, yaml-cpp, PCRE2, ICU, Gloo's headers), then the tests and
# benchmarks (they also need Qt 6 Test: without it they are not configured and the step says so).
compile_engine() { cmake --build "$build" -j "$jobs" --target studio-train; }
compile_tests() {
  local targets
  targets=$(ninja -C "$build" -t targets all 2>/dev/null)  # not piped into grep -q: pipefail
  if ! grep -q '^tst_rmsnorm_cuda:' <<<"$targets"; then
    echo "the tests and benchmarks are not configured: Qt 6 Test was not found (pack DEVICE_DEBS)"
    return 1
  fi
  if [ $perf -eq 1 ]; then
    cmake --build "$build" -j "$jobs" --target bench_train_step bench_attention
  elif [ $quick -eq 1 ]; then
    cmake --build "$build" -j "$jobs" --target tst_rmsnorm_cuda tst_fused_linear_ce_cuda tst_quant4_cuda \
      tst_rmsnorm_torch tst_fused_linear_ce_torch bench_train_step bench_attention
  else
    cmake --build "$build" -j "$jobs"
  fi
}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
step configure configure && step build_engine compile_engine
step build_tests compile_tests
bin=$build/app/studio-train

# long_run_setup DIR SHAPE_CONFIG [bf16]: a random-weight model of that shape in DIR/model (the demo's
# tokenizer), a one-sample dataset writer (long_run_data DIR TOKENS) and DIR/run.yaml: SFT with
# every long-sequence option on (checkpointing, offloaded activations, the tiled MLP, ZeRO-3 with
# optimizer and parameter offload), 2 steps.
long_run_setup() {
  local d=$1 shape=$2 bf16=${3:-true}
  rm -rf "$d"
  mkdir -p "$d/shape" "$d/data"
  cp "$shape" "$d/shape/config.json"
  cp "$root/resources/demo/model/tokenizer.json" "$root/resources/demo/model/tokenizer_config.json" "$d/shape/"
  "$bin" init-model --config "$d/shape/config.json" --out "$d/model" --dtype bfloat16 >/dev/null || return 1
  cat >"$d/run.yaml" <<EOF2
model_name_or_path: $d/model
stage: sft
do_train: true
finetuning_type: full
dataset: longest
dataset_dir: $d/data
template: qwen
cutoff_len: 1024
output_dir: $d/run
overwrite_output_dir: true
per_device_train_batch_size: 1
learning_rate: 1.0e-5
max_steps: 2
logging_steps: 1
save_steps: 1000000
bf16: $bf16
gradient_checkpointing: true
offload_activations: true
tiled_mlp: true
zero_stage: 3
offload_optimizer: true
offload_param: true
EOF2
  echo '{"longest": {"file_name": "longest.json"}}' >"$d/data/dataset_info.json"
}
long_run_data() {
  "$python" - "$1/data/longest.json" "$2" <<'EOF2'
import json, random, sys
words = "alpha beta gamma delta river stone cloud paper seven green table light".split()
rng = random.Random(1)
json.dump([{"instruction": "Continue the list.", "input": "",
            "output": " ".join(rng.choice(words) for _ in range(int(sys.argv[2])))}],
          open(sys.argv[1], "w"))
EOF2
}
# measured_vs_estimate ESTIMATE.json EVENTS.jsonl: the run's peak allocated memory against the estimate.
measured_vs_estimate() {
  "$python" - "$1" "$2" <<'EOF2'
import json, sys
est = json.load(open(sys.argv[1]))
peaks = [g.get("peak_mib") or 0 for l in open(sys.argv[2]) if '"event":"step"' in l
         for g in json.loads(l).get("gpus", [])]
if not peaks:
    print(f"no GPU peak in the events (a CPU run); estimated {est['total'] / 2**20:.0f} MiB")
    sys.exit(0)
peak = max(peaks)
print(f"measured peak {peak:.0f} MiB; estimated {est['total'] / 2**20:.0f} MiB "
      f"(ratio {peak / (est['total'] / 2**20):.3f})")
EOF2
}
# The report: the steps' rows, the train-step MFU table and every benchmark's log (write_report
# is defined at the end of this file; --perf calls it early).
if [ $perf -eq 1 ]; then
  # shellcheck source=gpu-check-perf.sh
  . "$root/scripts/gpu-check-perf.sh"
  perf_main
  write_report
  exit $failed
fi

step cuda_tests ctest --test-dir "$build" --output-on-failure -L cuda
# The engine's own test suites, which train on cuda:0 wherever a GPU is visible (Trainer picks it):
# the train loop (bf16, accumulation, resume, checkpoints), attention, DPO, SP over Gloo.
# Tests labelled hf need TRL in the Python, which the GPU machine lacks.
step trainer_tests_on_gpu ctest --test-dir "$build" --output-on-failure -L "trainer|sp" -LE hf -j 4

# compare_losses REF_EVENTS GOT_EVENTS TOLERANCE LABEL: the two runs' per-step losses, the worst
# relative difference; exit 1 when the step counts differ or it is above the tolerance.
compare_losses() {
  "$python" - "$@" <<'EOF'
import json, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, open(p)) if e.get("event") == "step"]
a, b, tol, label = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
print(f"{len(a)} steps, {label}: {a[0]:.5f} -> {a[-1]:.5f} vs {b[0]:.5f} -> {b[-1]:.5f}, "
      f"worst relative step difference {worst:.2e} (tolerance {tol})")
sys.exit(0 if len(a) == len(b) and worst <= tol else 1)
EOF
}

# CUDA training steps against the CPU fp32 path: the demo model, SFT then DPO, same data and seed;
# per-step losses compared (fp32 on both sides: 1e-3 relative; bf16 on CUDA: 3e-2).
demo=$out/demo
train_compare() {
  local stage=$1 dtype=$2
  rm -rf "$demo/$stage-$dtype"
  mkdir -p "$demo/$stage-$dtype"
  local set=(--set max_steps=12 --set logging_steps=1 --set save_steps=100000)
  [ "$dtype" = bf16 ] && set+=(--set bf16=true)
  local cfg=$root/resources/demo/${stage}_demo.yaml
  (cd "$root" &&
   CUDA_VISIBLE_DEVICES= "$bin" train "$cfg" "${set[@]}" --set model_name_or_path="$demo/model" \
     --set output_dir="$demo/$stage-$dtype/cpu" --set bf16=false &&
   "$bin" train "$cfg" "${set[@]}" --set model_name_or_path="$demo/model" \
     --set output_dir="$demo/$stage-$dtype/cuda") || return 1
  local tol=1e-3
  [ "$dtype" = bf16 ] && tol=3e-2
  compare_losses "$demo/$stage-$dtype/cpu/events.jsonl" "$demo/$stage-$dtype/cuda/events.jsonl" \
    "$tol" "CPU fp32 vs CUDA $dtype"
}
if [ -x "$bin" ]; then
  mkdir -p "$demo"
  CUDA_VISIBLE_DEVICES= "$bin" init-model --config "$root/resources/demo/model/config.json" \
    --out "$demo/model" --seed 7 >"$out/init-model.log" 2>&1
  step sft_fp32_cuda_vs_cpu train_compare sft fp32
  step sft_bf16_cuda_vs_cpu train_compare sft bf16
  step dpo_fp32_cuda_vs_cpu train_compare dpo fp32
  step dpo_bf16_cuda_vs_cpu train_compare dpo bf16
fi

# SP on CUDA: 2 and 4 ranks in every mode against SP=1 on the same batches. Over NCCL where there is
# one GPU per rank; on fewer GPUs over Gloo with host-staged collectives (STUDIO_DIST_BACKEND=gloo,
# ranks sharing the GPU): the same CUDA compute (ring attention with the CUDA flash kernel and the
# merged log-sum-exp, Ulysses' all-to-all layout), slower communication.
sp_compare() {
  local n=$1 mode=$2 backend=$3 dtype=${4:-fp32}
  local d=$demo/sp$n-$mode-$backend-$dtype
  rm -rf "$d"
  local set=(--set max_steps=8 --set logging_steps=1 --set save_steps=100000
             --set model_name_or_path="$demo/model")
  # bf16 runs CUDA's flash kernel inside the ring (fp32 takes the math path on CUDA).
  [ "$dtype" = bf16 ] && set+=(--set bf16=true)
  local extra=()
  [ "$mode" = usp ] && extra=(--set sequence_parallel_ulysses_degree=2 --set sequence_parallel_ring_degree=$((n / 2)))
  # SP ranks share one sequence (world = SP size, DP = 1): the same batches as the SP=1 run.
  (cd "$root" &&
   "$bin" train resources/demo/sft_demo.yaml "${set[@]}" --set output_dir="$d/sp1" &&
   STUDIO_DIST_BACKEND=$backend "$bin" train resources/demo/sft_demo.yaml "${set[@]}" --nproc "$n" \
     --set output_dir="$d/sp$n" --set sequence_parallel_size="$n" \
     --set sequence_parallel_mode="$mode" "${extra[@]}") || return 1
  local tol=2e-3
  [ "$dtype" = bf16 ] && tol=2e-2
  compare_losses "$d/sp1/events.jsonl" "$d/sp$n/events.jsonl" "$tol" "SP=1 vs SP=$n $mode $dtype"
}
if [ -x "$bin" ]; then
  for n in 2 4; do
    for mode in zigzag-ring ulysses usp; do
      [ "$mode" = usp ] && [ "$n" -lt 4 ] && continue
      if [ "${gpu_count:-0}" -ge "$n" ]; then
        step "sp${n}_${mode}_nccl" sp_compare "$n" "$mode" nccl
      else
        rows+=("| sp${n}_${mode}_nccl | not run | - | $n ranks need $n GPUs: NCCL refuses two ranks on one device |")
        step "sp${n}_${mode}_gloo_shared_gpu" sp_compare "$n" "$mode" gloo
      fi
    done
  done
  backend=nccl
  [ "${gpu_count:-0}" -ge 2 ] || backend=gloo
  step "sp2_zigzag-ring_${backend}_bf16" sp_compare 2 zigzag-ring "$backend" bf16
  step "sp2_ulysses_${backend}_bf16" sp_compare 2 ulysses "$backend" bf16
fi

# Where each rank's time goes, on CUDA (trainer/parallel/step_clock.h): the SP 2 runs above
# measured compute, SP communication, gradient communication, data and waiting with CUDA events
# on the current stream. Every step with logging_steps 1 carries both ranks' parts: compute and
# SP communication must be > 0, none negative, and their sum at most the wall time between two
# step events (the parts are the mean per step over the window, the window is one step here).
rank_times_check() {
  "$python" - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    steps = [json.loads(l) for l in open(path) if '"event":"step"' in l]
    assert steps, f"{path}: no step events"
    prev = 0.0
    for e in steps:
        rt = e.get("rank_times")
        assert rt and len(rt) == 2, f"{path}: step {e['step']}: rank_times {rt}"
        between = e["elapsed"] - prev
        prev = e["elapsed"]
        for r in rt:
            parts = [r[k] for k in ("compute_s", "sp_comm_s", "grad_comm_s", "data_s", "wait_s")]
            assert min(parts) >= 0, f"{path}: step {e['step']} rank {r['rank']}: {r}"
            assert r["compute_s"] > 0 and r["sp_comm_s"] > 0, f"{path}: step {e['step']}: {r}"
            if e["step"] > 1:  # the first includes start-up outside the clock
                assert sum(parts) <= between * 1.05 + 2e-3, f"{path}: step {e['step']}: {sum(parts):.4f} s of parts in {between:.4f} s: {r}"
    last = steps[-1]["rank_times"]
    print(path.split("/demo/")[-1], "last step:",
          "; ".join(f"rank {r['rank']}: compute {r['compute_s']*1e3:.2f} ms, sp {r['sp_comm_s']*1e3:.2f} ms, "
                    f"grad {r['grad_comm_s']*1e3:.2f} ms, data {r['data_s']*1e3:.2f} ms, wait {r['wait_s']*1e3:.2f} ms"
                    for r in last))
PY
}
if [ -x "$bin" ]; then
  rt=()
  for f in "$demo"/sp2-zigzag-ring-*-fp32/sp2/events.jsonl "$demo"/sp2-ulysses-*-fp32/sp2/events.jsonl; do
    [ -f "$f" ] && rt+=("$f")
  done
  if [ ${#rt[@]} -gt 0 ]; then
    step rank_times_cuda rank_times_check "${rt[@]}"
  else
    rows+=("| rank_times_cuda | not run | - | the SP 2 runs it reads did not run |")
  fi
fi

# ZeRO on CUDA (docs/SHARDING.md): 2 ranks, SP 2, stage 3 with offload (pinned host masters and
# AdamW states, the CPU update, per-layer gathers to the device) and stage 2 against the unsharded
# run; the log gets each rank's measured model states (device side and offloaded).
zero_compare() {
  local backend=$1 dtype=$2
  local d=$demo/zero-$backend-$dtype
  rm -rf "$d"
  local set=(--set max_steps=6 --set logging_steps=1 --set save_steps=100000
             --set model_name_or_path="$demo/model" --set sequence_parallel_size=2)
  [ "$dtype" = bf16 ] && set+=(--set bf16=true)
  (cd "$root" &&
   for z in 0 2 3; do
     local more=()
     [ $z -eq 3 ] && more=(--set offload_optimizer=true --set offload_param=true)
     STUDIO_DIST_BACKEND=$backend "$bin" train resources/demo/sft_demo.yaml "${set[@]}" --nproc 2 \
       --set zero_stage=$z "${more[@]}" --set output_dir="$d/z$z" || exit 1
     grep -o '"model_states_mib":[0-9.e+-]*,"offloaded_mib":[0-9.e+-]*' "$d/z$z/events.jsonl" |
       head -2 | sed "s/^/stage $z: /"
   done) || return 1
  local tol=1e-5
  [ "$dtype" = bf16 ] && tol=2e-2
  compare_losses "$d/z0/events.jsonl" "$d/z2/events.jsonl" "$tol" "ZeRO-2 vs unsharded $dtype" &&
    compare_losses "$d/z0/events.jsonl" "$d/z3/events.jsonl" "$tol" "ZeRO-3 offload vs unsharded $dtype"
}
if [ -x "$bin" ]; then
  backend=nccl
  [ "${gpu_count:-0}" -ge 2 ] || backend=gloo
  step "zero_${backend}_fp32" zero_compare "$backend" fp32
  step "zero_${backend}_bf16" zero_compare "$backend" bf16
fi

# Long sequences on CUDA (docs/LONG_CONTEXT.md). First every long-sequence option against the
# plain run on the same batches: the fused loss (its CUDA kernel through the LibTorch adapter),
# checkpointed inputs offloaded over the copy stream, the tiled MLP (1 MiB tiles, so that the
# demo's short rows are really cut). Then one run at the longest cutoff_len the estimate says
# fits this GPU (less 2 GiB for the CUDA context and workspaces, which the estimate leaves out):
# a Qwen2.5-1.5B-shaped model (random weights) with every option on, its measured peak beside
# the estimate, or the error it met.
long_compare() {
  local dtype=$1
  local d=$demo/long-$dtype
  rm -rf "$d"
  local set=(--set max_steps=8 --set logging_steps=1 --set save_steps=100000
             --set model_name_or_path="$demo/model" --set gradient_checkpointing=true)
  [ "$dtype" = bf16 ] && set+=(--set bf16=true)
  (cd "$root" &&
   "$bin" train resources/demo/sft_demo.yaml "${set[@]}" --set output_dir="$d/plain" &&
   "$bin" train resources/demo/sft_demo.yaml "${set[@]}" --set offload_activations=true \
     --set tiled_mlp=true --set tiled_mlp_budget_mib=1 --set output_dir="$d/long") || return 1
  local tol=1e-4
  [ "$dtype" = bf16 ] && tol=2e-2
  compare_losses "$d/plain/events.jsonl" "$d/long/events.jsonl" "$tol" "long-sequence options vs plain $dtype"
}
longest_run() {
  local d=$demo/longest
  long_run_setup "$d" "$root/resources/model-shapes/qwen2.5-1.5b/config.json" || return 1
  local total_mib
  total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n1)
  local gib=$(( total_mib / 1024 - 2 ))
  "$bin" estimate "$d/run.yaml" --gpu-memory "$gib" --json >"$d/estimate.json" || return 1
  local cutoff
  cutoff=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["longest_cutoff_len"] or 0)' "$d/estimate.json")
  echo "longest cutoff_len the estimate fits in $gib GiB: $cutoff"
  [ "$cutoff" -gt 0 ] || return 1
  # Capped (GPU_CHECK_MAX_CUTOFF; 131072, 32768 with --quick; 0: no cap): at the longest fit (2.2M
  # tokens on an H100) one step of the 1.5B model's attention alone takes over an hour.
  local cap=${GPU_CHECK_MAX_CUTOFF:-131072}
  [ $quick -eq 1 ] && cap=${GPU_CHECK_MAX_CUTOFF:-32768}
  if [ "$cap" -gt 0 ] && [ "$cutoff" -gt "$cap" ]; then
    echo "capped at $cap tokens (GPU_CHECK_MAX_CUTOFF): measured against the estimate there"
    cutoff=$cap
  fi
  long_run_data "$d" "$cutoff"
  "$bin" estimate "$d/run.yaml" --gpu-memory "$gib" --set cutoff_len="$cutoff" | sed -n '/^Memory per GPU/,/host memory/p'
  "$bin" estimate "$d/run.yaml" --gpu-memory "$gib" --set cutoff_len="$cutoff" --json >"$d/estimate-at.json"
  "$bin" train "$d/run.yaml" --set cutoff_len="$cutoff" || return 1
  measured_vs_estimate "$d/estimate-at.json" "$d/run/events.jsonl"
}
if [ -x "$bin" ]; then
  step long_options_fp32 long_compare fp32
  step long_options_bf16 long_compare bf16
  step longest_sequence_1gpu longest_run
fi

# Benchmarks, each against its PyTorch reference on the same GPU in the same run: the engine's train
# step against transformers' (Qwen2ForCausalLM, SDPA, AdamW), fp32 and bf16; attention forward +
# backward (the kernel the engine dispatches to, the math path, at::scaled_dot_product_attention).
if [ $bench -eq 1 ] && [ -x "$build/bench/train_step/bench_train_step" ]; then
  for dtype in bf16 fp32; do
    step "bench_train_step_$dtype" env STUDIO_BUILD_DIR="$build" STUDIO_PYTHON="$python" \
      "$root/bench/train_step/run.sh" --build-dir "$build" --device cuda --dtype "$dtype" \
      --config "$root/resources/model-shapes/qwen2.5-0.5b/config.json" \
      --case 8x1024 --case 1x8192 --warmup 3 --steps 10
  done
fi
if [ $bench -eq 1 ] && [ -x "$build/bench/attention/bench_attention" ]; then
  step bench_attention "$build/bench/attention/bench_attention" --device cuda --dtype bf16 \
    --case 1x32x8x4096x128 --case 1x32x8x16384x128 --case 4x16x16x2048x64
fi

write_report
echo "gpu-check: report in $report" >&2
cat "$report"
exit $failed
