# The steps of `scripts/gpu-check.sh --perf` (sourced by it after the build; uses its step, root,
# build, bin, out, python, rehearse and rows). On the GPU: bf16 on cuda with the Qwen2.5 shapes;
# with --rehearse: the same steps on the CPU in fp32 with the demo model's shape and short cases.
# Every step leaves its log in OUT; traces, snapshots and their tables go to OUT/profile.

perf_main() {
  local prof=$out/profile
  mkdir -p "$prof"
  local device=cuda dtype=bf16 warm=2 steps=5
  local small=$root/resources/model-shapes/qwen2.5-0.5b/config.json
  local large=$root/resources/model-shapes/qwen2.5-1.5b/config.json
  local short=(--case 8x1024 --case 1x8192) longer=(--case 8x1024 --case 1x8192 --case 1x16384)
  # agree: the case whose 13th-step bf16 loss differed by 2.3% on the H100 (2026-11-26)
  local long=(--case 1x32768) agree=(--case 8x1024) mem_cutoffs=(8192 32768)
  if [ $rehearse -eq 1 ]; then
    device=cpu
    dtype=fp32
    small=$root/resources/demo/model/config.json
    large=$small
    # One shape for both: the second train-step step runs only the case the first did not, and
    # the long step runs once (the same shape twice would exercise nothing new, for ~2 minutes).
    short=(--case 2x64) longer=(--case 1x256) long=(--case 1x512) agree=(--case 2x32)
    mem_cutoffs=(256 512)
  fi
  # Liger Kernel for the third column: a pure-Python wheel brought in .device-wheels (the GPU
  # machine reaches no registry), unpacked beside the build and put on the Python path.
  local liger=()
  local wheel
  for wheel in "$root"/.device-wheels/liger_kernel-*.whl; do
    [ -f "$wheel" ] || continue
    "$python" -m zipfile -e "$wheel" "$build/pywheels" && liger=(--liger)
    export PYTHONPATH="$build/pywheels${PYTHONPATH:+:$PYTHONPATH}"
  done
  [ $rehearse -eq 1 ] && liger=(--liger)  # the row then says error=unavailable: the path is exercised

  run_sh() {
    env STUDIO_BUILD_DIR="$build" STUDIO_PYTHON="$python" "$root/bench/train_step/run.sh" \
      --build-dir "$build" --device "$device" --dtype "$dtype" --warmup "$warm" --steps "$steps" "$@"
  }
  step "perf_train_step_0.5b_$dtype" run_sh --config "$small" "${short[@]}" "${liger[@]}" \
    --profile "$prof/0.5b"
  step "perf_train_step_1.5b_$dtype" run_sh --config "$large" "${longer[@]}" "${liger[@]}" \
    --profile "$prof/1.5b"
  step perf_memory_vs_estimate perf_memory "$large" "${mem_cutoffs[@]}"
  step perf_loss_agreement perf_agreement "$small" "${agree[@]}"
  step "perf_train_step_32k_$dtype" perf_long "$small" "$large" "${long[@]}"
  if [ $rehearse -eq 0 ]; then
    step perf_attention "$build/bench/attention/bench_attention" --device cuda --dtype bf16 \
      --case 1x32x8x4096x128 --case 1x12x2x16384x128 --case 1x14x2x32768x64
  fi
  # The tables are what the lease is for: made whatever the budget says.
  local saved_budget=$budget
  budget=0
  step perf_tables perf_tables "$prof"
  budget=$saved_budget
}

# Both shapes at the long case with gradient checkpointing on both sides.
perf_long() {
  local small=$1 large=$2
  shift 2
  run_sh --config "$small" "$@" --gradient-checkpointing --profile "$out/profile/0.5b-ckpt" || return 1
  [ "$large" = "$small" ] && return 0  # the rehearsal: one shape
  run_sh --config "$large" "$@" --gradient-checkpointing --profile "$out/profile/1.5b-ckpt"
}

# The losses of 20 steps, engine against transformers from the same weights on the same batches
# (bench/train_step/agreement.py checks them): fp32 on both sides, which must agree to 1e-5 at
# the first step and 1e-3 at every step; the engine's bf16 (bf16 weights, fp32 masters) against
# transformers' two bf16 schemes, the Trainer's bf16=True (autocast over fp32 weights) and
# DeepSpeed's bf16 (the engine's scheme): the engine must not drift farther from the fp32
# trajectory than they do.
perf_agreement() {
  local config=$1
  shift
  local d=$out/agreement
  rm -rf "$d"
  mkdir -p "$d"
  local dt common=(--device "$device" "$@" --warmup 0 --steps 20)
  "$build/bench/train_step/bench_train_step" --config "$config" "${common[@]}" --dtype fp32 \
    --save-model "$d/model" | grep '^RESULT' >"$d/engine.fp32" || return 1
  "$build/bench/train_step/bench_train_step" --config "$config" "${common[@]}" --dtype bf16 |
    grep '^RESULT' >"$d/engine.bf16" || return 1
  for dt in fp32 bf16 bf16-master; do
    "$python" "$root/bench/train_step/hf_reference.py" --weights "$d/model" "${common[@]}" --dtype "$dt" |
      grep '^RESULT' >"$d/transformers.$dt" || return 1
  done
  "$python" "$root/bench/train_step/agreement.py" "$d"
}

# The engine's peak allocated memory against `studio-train estimate` at each cutoff, with the
# CUDA allocator's snapshot of the first two steps (STUDIO_CUDA_MEMORY_SNAPSHOT).
perf_memory() {
  local shape=$1
  shift
  local d=$out/memory
  local bf16=true
  [ $rehearse -eq 1 ] && bf16=false
  long_run_setup "$d" "$shape" "$bf16" || return 1
  local cutoff
  for cutoff in "$@"; do
    long_run_data "$d" "$cutoff"
    "$bin" estimate "$d/run.yaml" --set cutoff_len="$cutoff" --json >"$d/estimate-$cutoff.json" || return 1
    rm -rf "$d/run"
    STUDIO_CUDA_MEMORY_SNAPSHOT="$out/profile/memory-train-$cutoff.pickle" \
      "$bin" train "$d/run.yaml" --set cutoff_len="$cutoff" >"$d/train-$cutoff.log" 2>&1 ||
      { tail -n 20 "$d/train-$cutoff.log"; return 1; }
    echo "cutoff_len $cutoff: $(measured_vs_estimate "$d/estimate-$cutoff.json" "$d/run/events.jsonl")"
  done
}

# Tables from every trace and snapshot: OUT/profile/NAME.md beside each, all printed here.
perf_tables() {
  local prof=$1 f any=0
  while IFS= read -r f; do
    any=1
    "$python" "$root/bench/profile/trace_table.py" "$f" >"${f%.json}.md" || return 1
    cat "${f%.json}.md"
  done < <(find "$prof" -name 'trace-*.json' | sort)
  while IFS= read -r f; do
    "$python" "$root/bench/profile/memory_table.py" "$f" >"${f%.pickle}.md" || return 1
    cat "${f%.pickle}.md"
  done < <(find "$prof" -name 'memory-*.pickle' | sort)
  [ $any -eq 1 ] || { echo "no traces under $prof"; return 1; }
}
