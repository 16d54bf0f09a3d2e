#!/usr/bin/env bash
# Installs every Debian package SeqStudio needs to build, test and run. Idempotent and quiet:
# when everything is installed it only checks and returns.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ ccache pkg-config git
  # studio_config
  libyaml-cpp-dev nlohmann-json3-dev
  # studio_trainer / studio-train (Debian's LibTorch is CPU-only)
  libtorch-dev
  # an optimised BLAS behind libblas.so.3 (Debian's default reference BLAS makes CPU training ~15x slower)
  libopenblas0-pthread
  # multi-process training on CPU: the Gloo headers c10d's ProcessGroupGloo needs
  libgloo-dev
  # tokenizers (studio_data): PCRE2 with Unicode properties, ICU for normalization forms
  libpcre2-dev libicu-dev
  # tests: node runs the Hugging Face tokenizers reference (npm, see the end of this script)
  nodejs
  # studio: Qt 6 Widgets + Test, QCustomPlot built for Qt 6, libssh
  qt6-base-dev qt6-base-dev-tools qt6-qpa-plugins libqcustomplot-dev libssh-dev
  # tests: a real OpenSSH server on 127.0.0.1, a real X server for windows and screenshots
  openssh-server openssh-client xvfb xauth fonts-dejavu-core
  # tests: a single-node Slurm (slurmctld, slurmd, munged in a temp dir on loopback) for tst_slurm_live
  slurmctld slurmd slurm-client munge
  # tests: an independent Python reader of the saved safetensors files (tst_hf_checkpoint)
  python3-torch python3-numpy
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

# Installs the given Debian packages, as root or through sudo.
install_packages() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "setup: these packages are missing and installing them needs root: $*" >&2
      exit 1
    fi
  fi
  echo "setup: installing $# Debian packages: $*"
  local log
  log=$(mktemp)
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
           --no-install-recommends "$@"; } >"$log" 2>&1; then
    echo "setup: apt-get failed; its last lines:" >&2
    tail -n 20 "$log" >&2
    echo "setup: check the network access to the Debian mirror and that the packages exist" \
         "(apt-cache policy PACKAGE), then run scripts/setup.sh again" >&2
    exit 1
  fi
  rm -f "$log"
  echo "setup: done"
}

[ ${#missing[@]} -eq 0 ] || install_packages "${missing[@]}"

# The tokenizer tests' reference: Hugging Face tokenizers from npm, pinned by
# tests/reference/package-lock.json. Installed once; later runs only look for it.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$root/tests/reference/node_modules/tokenizers/package.json" ]; then
  # Debian's nodejs comes without npm; NodeSource's nodejs carries its own.
  command -v npm >/dev/null || install_packages npm
  echo "setup: installing the Hugging Face tokenizers reference (npm ci in tests/reference)"
  log=$(mktemp)
  if ! npm ci --prefix "$root/tests/reference" --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    echo "setup: npm ci failed; its last lines:" >&2
    tail -n 20 "$log" >&2
    echo "setup: check the network access to the npm registry, then run scripts/setup.sh again" >&2
    exit 1
  fi
  rm -f "$log"
fi
