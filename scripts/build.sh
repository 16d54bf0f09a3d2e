#!/usr/bin/env bash
# Configures and builds SeqStudio into build/ (or $STUDIO_BUILD_DIR) with Ninja and ccache.
# STUDIO_BUILD_TARGETS="a b" builds only those targets (the ones this configuration has; the
# studio is not there when the GUI is off), e.g. the two executables scripts/demo.sh runs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STUDIO_BUILD_DIR:-$root/build}
jobs=${STUDIO_JOBS:-$(nproc)}
# ccache: paths under the clone are hashed relative to it (and the working directory not at all),
# so another clone of the same sources on this machine, e.g. CI's, reuses the compiled objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$build.configure.log" 2>&1 \
    || { cat "$build.configure.log" >&2; echo "build: cmake configure failed" >&2; exit 1; }
  grep -E "^-- SeqStudio" "$build.configure.log" || true
fi
targets=()
for t in ${STUDIO_BUILD_TARGETS:-}; do
  if ninja -C "$build" -t query "$t" >/dev/null 2>&1; then targets+=(--target "$t"); fi
done
if [ -n "${STUDIO_BUILD_TARGETS:-}" ] && [ ${#targets[@]} -eq 0 ]; then
  echo "build: none of STUDIO_BUILD_TARGETS ($STUDIO_BUILD_TARGETS) is a target here" >&2
  exit 1
fi
cmake --build "$build" -j "$jobs" "${targets[@]}"
