#!/usr/bin/env bash
# Configures and builds SeqStudio into build/ (or $STUDIO_BUILD_DIR) with Ninja and ccache.
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
cmake --build "$build" -j "$jobs"
