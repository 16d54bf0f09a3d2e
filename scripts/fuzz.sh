#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and UBSan into build-fuzz/
# (or $STUDIO_FUZZ_BUILD_DIR), then either runs their short deterministic CTest runs
# (`scripts/fuzz.sh --test`, what scripts/test.sh does) or fuzzes for longer:
#
#   scripts/fuzz.sh [TARGET ...] [--seconds N]   default: every target, 60 s each
#
# A long run keeps what it found in build-fuzz/corpus/TARGET (reused by the next run) and any
# crashing input in build-fuzz/crashes/TARGET/ (crash-*, timeout-*, oom-*); the seed corpus of
# each target (the repository's own files) is build-fuzz/fuzz/seeds/TARGET. Reproduce a crash with
# build-fuzz/fuzz/TARGET build-fuzz/crashes/TARGET/crash-...
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STUDIO_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${STUDIO_JOBS:-$(nproc)}
seconds=60
test_mode=0
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --test) test_mode=1 ;;
    --seconds) seconds=$2; shift ;;
    --seconds=*) seconds=${1#--seconds=} ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing: run scripts/setup.sh" >&2; exit 1; }
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DSTUDIO_FUZZ=ON -DSTUDIO_SANITIZE=address,undefined \
    -DSTUDIO_BUILD_ENGINE=OFF -DSTUDIO_BUILD_GUI=OFF -DSTUDIO_BUILD_TESTS=OFF -DSTUDIO_CUDA=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; echo "fuzz.sh: cmake configure failed" >&2; exit 1; }
fi
cmake --build "$build" -j "$jobs"

if [ "$test_mode" = 1 ]; then
  exec ctest --test-dir "$build" --output-on-failure -j "$jobs" -L fuzz
fi

[ ${#targets[@]} -gt 0 ] || targets=(fuzz_run_config fuzz_safetensors_header fuzz_tokenizer fuzz_dataset_rows fuzz_events)
status=0
for t in "${targets[@]}"; do
  exe=$build/fuzz/$t
  [ -x "$exe" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  echo "== $t: $seconds s"
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$exe" -max_total_time="$seconds" \
       -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
       -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" "$build/fuzz/seeds/$t"; then
    echo "fuzz.sh: $t found a problem: see $build/crashes/$t/" >&2
    status=1
  fi
done
exit $status
