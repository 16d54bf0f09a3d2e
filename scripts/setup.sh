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
  # tokenizers (PCRE2 with Unicode properties)
  libpcre2-dev
  # studio: Qt 6 Widgets + Test, QCustomPlot built for Qt 6, libssh
  qt6-base-dev qt6-base-dev-tools qt6-qpa-plugins libqcustomplot-dev libssh-dev
  # tests: a real OpenSSH server on 127.0.0.1, a real X server for windows and screenshots
  openssh-server openssh-client xvfb xauth fonts-dejavu-core
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
log=$(mktemp)
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
         --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "setup: apt-get failed; its last lines:" >&2
  tail -n 20 "$log" >&2
  echo "setup: check the network access to the Debian mirror and that the packages exist" \
       "(apt-cache policy PACKAGE), then run scripts/setup.sh again" >&2
  exit 1
fi
rm -f "$log"
echo "setup: done"
