#!/usr/bin/env bash
# Train-step throughput on the CPU or a GPU (--device cuda, --dtype bf16): the engine (bench_train_step) against Hugging Face transformers' own
# model and training step (hf_reference.py, run by the project's Python environment: STUDIO_PYTHON,
# scripts/python-env.sh) on the demo model, in the same run. Builds the benchmark if needed, starts
# both from the same initial weights on the same batches, and prints a Markdown table; --record also
# appends it to docs/PERFORMANCE.md. See bench/README.md.
#
#   bench/train_step/run.sh [--record] [--build-dir DIR] [--threads T] [--warmup W] [--steps N]
#                           [--case BxS]... [--rounds R] [--adamw fused|for-loop] [--blas DIR]
#                           [--device cpu|cuda] [--dtype fp32|bf16] [--config CONFIG.json]
#                           [--gradient-checkpointing] [--liger] [--profile DIR]
#
# --gradient-checkpointing: on both sides (long cases). --liger: a third side, transformers with
# Liger Kernel's fused kernels (what LLaMA-Factory's enable_liger_kernel turns on), when the
# liger-kernel package imports. --profile DIR: the engine's Kineto trace and (CUDA) allocator
# snapshot of two more steps per case, into DIR (bench_train_step --profile).
#
# --config: another model shape than the demo's (e.g. resources/model-shapes/qwen2.5-0.5b/config.json,
# with its initial weights written once as a Hugging Face folder for the reference).
# --rounds R repeats every (engine, transformers) pair R times and keeps each side's fastest run:
# on a shared machine the best of a few runs is the one the other jobs disturbed least.
# --adamw picks torch.optim.AdamW's implementation on the transformers side: fused (the default, as
# the Trainer's default optimizer) or for-loop (the implementation the engine's LibTorch AdamW has).
# --blas DIR runs both sides with DIR first on LD_LIBRARY_PATH, with OPENBLAS_NUM_THREADS set to T:
# another libblas.so.3 for a torch built against the system's BLAS (the torch wheel's has MKL inside).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${STUDIO_BUILD_DIR:-$root/build}
# The project's Python environment (torch, transformers: scripts/setup.sh), unless the caller names
# another in STUDIO_PYTHON (scripts/gpu-check.sh: the GPU machine's own python3).
given_python=${STUDIO_PYTHON:-}
# shellcheck source=../../scripts/python-env.sh
. "$root/scripts/python-env.sh"
python=${given_python:-$STUDIO_PYTHON}
record=0
threads=$(nproc)
warmup=3
steps=10
rounds=1
cases=()
device=cpu
dtype=fp32
model_config=
blas_dir=
adamw=fused
checkpointing=()
liger=0
profile=()
command_line="bench/train_step/run.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --record) record=1 ;;
    --build-dir) build=$2; shift ;;
    --threads) threads=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --steps) steps=$2; shift ;;
    --case) cases+=("$2"); shift ;;
    --blas) blas_dir=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --adamw) adamw=$2; shift ;;
    --device) device=$2; shift ;;
    --config) model_config=$2; shift ;;
    --dtype) dtype=$2; shift ;;
    --gradient-checkpointing) checkpointing=(--gradient-checkpointing) ;;
    --liger) liger=1 ;;
    --profile) profile=(--profile "$2"); shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#cases[@]} -gt 0 ] || cases=(16x96 1x1024)
case "$device" in cpu|cuda) ;; *) echo "run.sh: --device cpu|cuda, got '$device'" >&2; exit 2 ;; esac
case "$dtype" in fp32|bf16) ;; *) echo "run.sh: --dtype fp32|bf16, got '$dtype'" >&2; exit 2 ;; esac

if ! "$python" -c "import torch, transformers" 2>/dev/null; then
  echo "run.sh: '$python' cannot import torch and transformers: run scripts/setup.sh, which" \
       "installs the project's Python environment" >&2
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTUDIO_BUILD_GUI=OFF >/dev/null
fi
cmake --build "$build" --target bench_train_step >/dev/null
bench="$build/bench/train_step/bench_train_step"
model="$build/bench/train_step/model"  # the engine's initial weights, loaded by the transformers side

if [ -n "$blas_dir" ]; then
  [ -e "$blas_dir/libblas.so.3" ] || { echo "run.sh: no libblas.so.3 in $blas_dir" >&2; exit 1; }
  export LD_LIBRARY_PATH="$blas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPENBLAS_NUM_THREADS="$threads"
fi

# Share of the run's wall time in which some runnable task waited for a CPU (Linux PSI): on a
# machine shared with other jobs it says how much the wall-clock numbers are worth.
pressure_total() { sed -n 's/^some .*total=\([0-9]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || true; }
stall0=$(pressure_total)
wall0=$(date +%s%N)

common=(--threads "$threads" --warmup "$warmup" --steps "$steps" --device "$device" --dtype "$dtype"
        "${checkpointing[@]}")
results=()
saved=0
for ((round = 0; round < rounds; ++round)); do
  for c in "${cases[@]}"; do
    # One case at a time, engine then transformers, so that both see the same load on a shared
    # machine.
    save=()
    [ $saved -eq 1 ] || save=(--save-model "$model")
    engine_config=()
    [ -z "$model_config" ] || engine_config=(--config "$model_config")
    results+=("$("$bench" "${common[@]}" "${engine_config[@]}" --case "$c" "${save[@]}" "${profile[@]}" | grep '^RESULT')")
    saved=1
    results+=("$("$python" "$root/bench/train_step/hf_reference.py" "${common[@]}" --case "$c" \
                   --weights "$model" --adamw "$adamw" | grep '^RESULT')")
    if [ $liger -eq 1 ]; then
      results+=("$("$python" "$root/bench/train_step/hf_reference.py" "${common[@]}" --case "$c" \
                     --weights "$model" --adamw "$adamw" --liger | grep '^RESULT')")
    fi
  done
done

stall1=$(pressure_total)
pressure=unknown
if [ -n "$stall0" ] && [ -n "$stall1" ]; then
  pressure="$(( (stall1 - stall0) * 100 / (($(date +%s%N) - wall0) / 1000) ))%"
fi

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)
cores=$(nproc)
hypervisor=$(lscpu | sed -n 's/^Hypervisor vendor:[[:space:]]*//p' | head -n1)
machine="$cpu, $cores cores${hypervisor:+ ($hypervisor guest)}"
table=$(printf '%s\n' "${results[@]}" | awk -v date="$(date -u '+%Y-%m-%d %H:%M UTC')" \
  -v machine="$machine" -v threads="$threads" -v cmd="$command_line" -v pressure="$pressure" -v rounds="$rounds" '
  function field(line, key,   n, i, parts, kv) {
    n = split(line, parts, " ")
    for (i = 1; i <= n; ++i) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
    return ""
  }
  {
    c = field($0, "case"); impl = field($0, "impl"); version[impl] = field($0, "torch"); blas[impl] = field($0, "blas")
    if (impl == "transformers") { hf = field($0, "transformers"); adamw = field($0, "adamw") }
    if (field($0, "error") != "") err[c, impl] = field($0, "error")
    if (impl == "transformers+liger") has_liger = 1
    if (!(c in seen)) { seen[c] = 1; order[++n] = c }
    if ((c, impl) in tps && field($0, "tokens_per_s") + 0 <= tps[c, impl] + 0) next  # keep the best
    tps[c, impl] = field($0, "tokens_per_s")
    phases[c, impl] = field($0, "forward_ms") " / " field($0, "backward_ms") " / " field($0, "optimizer_ms")
    cpus[c, impl] = field($0, "cpu_s_per_step")
    peak[c, impl] = field($0, "peak_mib")
    first[c, impl] = field($0, "loss_first"); last[c, impl] = field($0, "loss_last")
  }
  END {
    printf "### %s: %s, %d thread%s\n\n", date, machine, threads, (threads == 1 ? "" : "s")
    printf "Command: `%s`%s; engine: LibTorch %s; reference: transformers %s on torch %s (AdamW %s); BLAS (engine / transformers): `%s` / `%s`; CPU pressure (PSI some) during the run: %s.\n\n", cmd, (rounds > 1 ? " (each side: its best of " rounds " rounds)" : ""), version["engine"], hf, version["transformers"], adamw, blas["engine"], blas["transformers"], pressure
    print "| case (BxS) | engine tok/s | transformers tok/s | engine / transformers | engine fwd / bwd / optim ms | transformers fwd / bwd / optim ms | CPU s per step (engine / transformers) | loss at first, last step (engine / transformers) | peak MiB (engine / transformers) |" (has_liger ? " transformers+liger tok/s | engine / liger |" : "")
    print "|---|---:|---:|---:|---|---|---|---|---|" (has_liger ? "---:|---:|" : "")
    for (i = 1; i <= n; ++i) {
      c = order[i]; e = tps[c, "engine"]; r = tps[c, "transformers"]; l = tps[c, "transformers+liger"]
      es = ((c, "engine") in err) ? err[c, "engine"] : sprintf("%.0f", e)
      rs = ((c, "transformers") in err) ? err[c, "transformers"] : sprintf("%.0f", r)
      ls = ((c, "transformers+liger") in err) ? err[c, "transformers+liger"] : sprintf("%.0f", l)
      printf "| %s | %s | %s | %s | %s | %s | %s / %s | %s, %s / %s, %s | %s / %s |%s\n", c, es, rs,
             (r > 0 && e > 0 ? sprintf("%.2f", e / r) : "-"), phases[c, "engine"], phases[c, "transformers"], cpus[c, "engine"],
             cpus[c, "transformers"], first[c, "engine"], last[c, "engine"], first[c, "transformers"], last[c, "transformers"],
             peak[c, "engine"], peak[c, "transformers"],
             (has_liger ? sprintf(" %s | %s |", ls, (l > 0 && e > 0 ? sprintf("%.2f", e / l) : "-")) : "")
      if (((c, "engine") in err) || ((c, "transformers") in err)) continue
      d = first[c, "engine"] - first[c, "transformers"]; if (d < 0) d = -d
      if (d > 1e-3 * (first[c, "transformers"] < 0 ? -first[c, "transformers"] : first[c, "transformers"]))
        warn = warn "\nWARNING: " c ": the first-step losses differ: the two models are not the same."
    }
    if (warn != "") print warn
  }')

echo "$table"
if [ $record -eq 1 ]; then
  "$python" - "$root/docs/PERFORMANCE.md" "$table" <<'EOF'
import sys
# Inserts the table at the end of the "CPU: train step, demo model" section (before the next
# "## " heading), creating the section when the file has none.
path, table = sys.argv[1], sys.argv[2]
heading = "## CPU: train step, demo model"
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = ["# Performance", ""]
if heading not in lines:
    lines += ["", heading, ""]
start = lines.index(heading) + 1
end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
while end > start and lines[end - 1] == "":
    end -= 1
lines[end:end] = [""] + table.splitlines() + [""]
open(path, "w").write("\n".join(lines).rstrip("\n") + "\n")
EOF
  echo "(appended to docs/PERFORMANCE.md)"
fi
