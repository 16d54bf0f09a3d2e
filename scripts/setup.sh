#!/usr/bin/env bash
# Installs every Debian package SeqStudio needs to build, test and run, then the Python environment
# with LibTorch (the CUDA 13 build of the torch wheel) and the Hugging Face references the tests use
# (scripts/python-requirements.txt, into $STUDIO_VENV outside the clone: scripts/python-env.sh).
# Idempotent and quiet: when everything is installed it only checks and returns.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ ccache pkg-config git
  # studio_config
  libyaml-cpp-dev nlohmann-json3-dev
  # studio_trainer / studio-train: LibTorch comes from the torch wheel (the Python environment below)
  # an optimised BLAS behind libblas.so.3 (Debian's default reference BLAS makes CPU training ~15x slower)
  libopenblas0-pthread
  # multi-process training on CPU: the Gloo headers c10d's ProcessGroupGloo.hpp includes (the torch
  # wheel carries Gloo's code inside libtorch_cpu.so but not its headers)
  libgloo-dev
  # tokenizers (studio_data): PCRE2 with Unicode properties, ICU for normalization forms
  libpcre2-dev libicu-dev
  # the Python environment (python3 -m venv)
  python3 python3-venv
  # studio: Qt 6 Widgets + Test, QCustomPlot built for Qt 6, libssh, libxcb (the windows' colormap
  # on X11: ui/shell/include/studio/ui/shell/screen_colormap.h)
  qt6-base-dev qt6-base-dev-tools qt6-qpa-plugins libqcustomplot-dev libssh-dev libxcb1-dev
  # tests: a real OpenSSH server on 127.0.0.1, a real X server for windows and screenshots, read
  # with xwd (x11-apps), bare and under a window manager (openbox; xprop from x11-utils says when
  # it manages the screen)
  openssh-server openssh-client xvfb xauth fonts-dejavu-core x11-apps x11-utils openbox
  # tests: a private D-Bus session bus for the desktop portal's colour-scheme setting (tst_app_theme)
  dbus-daemon
  # fuzzing (scripts/fuzz.sh, run by the tests too): clang with libFuzzer and the sanitizers
  clang libclang-rt-14-dev
  # tests: a single-node Slurm (slurmctld, slurmd, munged in a temp dir on loopback) for tst_slurm_live
  slurmctld slurmd slurm-client munge
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

# The Python environment: torch (LibTorch for the engine), transformers, tokenizers, TRL, ... pinned by
# scripts/python-requirements.txt. Created once in $STUDIO_VENV; later runs only compare the stamp
# of the requirements it was made from.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=python-env.sh
. "$root/scripts/python-env.sh"
requirements="$root/scripts/python-requirements.txt"
stamp="$STUDIO_VENV/.seqstudio-requirements"
if ! cmp -s "$requirements" "$stamp" 2>/dev/null || [ ! -x "$STUDIO_PYTHON" ]; then
  echo "setup: installing the Python environment (torch 2.11.0 for CUDA 13, transformers, tokenizers," \
       "TRL, TensorBoard) into $STUDIO_VENV; the first time this downloads ~4 GB"
  mkdir -p "$(dirname "$STUDIO_VENV")"
  log=$(mktemp)
  if ! { [ -x "$STUDIO_PYTHON" ] || "$_studio_base_python" -m venv "$STUDIO_VENV"; } >"$log" 2>&1 ||
     ! "$STUDIO_PYTHON" -m pip install --disable-pip-version-check --no-input -q \
         -r "$requirements" >>"$log" 2>&1; then
    echo "setup: installing the Python environment failed; its last lines:" >&2
    tail -n 20 "$log" >&2
    echo "setup: check the network access to the Python package registry and the free disk space" \
         "(df -h $(dirname "$STUDIO_VENV")), then run scripts/setup.sh again;" \
         "STUDIO_VENV=DIR puts the environment elsewhere" >&2
    exit 1
  fi
  rm -f "$log"
  cp "$requirements" "$stamp"
  echo "setup: Python environment ready: $("$STUDIO_PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
fi

# LLaMA-Factory in an environment of its own (scripts/llamafactory-requirements.txt says why),
# sharing the main environment's torch: the tests train with it and follow its runs.
lf_requirements="$root/scripts/llamafactory-requirements.txt"
lf_stamp="$STUDIO_LF_VENV/.seqstudio-requirements"
if ! cmp -s "$lf_requirements" "$lf_stamp" 2>/dev/null || [ ! -x "$STUDIO_LLAMAFACTORY_CLI" ]; then
  echo "setup: installing LLaMA-Factory 0.9.5 into $STUDIO_LF_VENV (about 1 GB, torch shared)"
  log=$(mktemp)
  main_site=$("$STUDIO_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if ! "$_studio_base_python" -m venv "$STUDIO_LF_VENV" >"$log" 2>&1 ||
     ! lf_site=$("$STUDIO_LF_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') ||
     ! echo "$main_site" >"$lf_site/zz-seqstudio-main-venv.pth" ||
     ! "$STUDIO_LF_VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q \
         -r "$lf_requirements" >>"$log" 2>&1; then
    echo "setup: installing LLaMA-Factory failed; its last lines:" >&2
    tail -n 20 "$log" >&2
    echo "setup: check the network access to the Python package registry and the free disk space," \
         "then run scripts/setup.sh again; STUDIO_LF_VENV=DIR puts the environment elsewhere" >&2
    exit 1
  fi
  rm -f "$log"
  # torchrun, which llamafactory-cli runs from PATH (FORCE_TORCHRUN), for the shared torch.
  printf '#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' "$STUDIO_LF_VENV/bin/python" \
    >"$STUDIO_LF_VENV/bin/torchrun"
  chmod +x "$STUDIO_LF_VENV/bin/torchrun"
  cp "$lf_requirements" "$lf_stamp"
  echo "setup: LLaMA-Factory ready: $("$STUDIO_LF_VENV/bin/python" -c 'import llamafactory, transformers; print("llamafactory", llamafactory.__version__, "transformers", transformers.__version__)' 2>/dev/null)"
fi
