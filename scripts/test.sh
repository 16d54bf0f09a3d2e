#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything, runs every test (and
# the fuzz targets' short runs, in their own clang build: scripts/fuzz.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${STUDIO_BUILD_DIR:-$root/build}
ctest --test-dir "$build" --output-on-failure -j "${STUDIO_JOBS:-$(nproc)}" "$@"
# The fuzz targets (clang, AddressSanitizer, UBSan): a short deterministic run of each.
"$root/scripts/fuzz.sh" --test
