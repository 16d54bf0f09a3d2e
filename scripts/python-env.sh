# Sourced by the scripts: where the project's Python environment lives (outside the clone, shared by
# every clone and every later run on this machine) and how to find LibTorch in it.
#   STUDIO_VENV    the virtual environment (default: ~/.cache/seqstudio/venv-torch2.11.0-cu130-pyX.Y)
#   STUDIO_PYTHON  its interpreter
# The name carries the pinned torch version and its CUDA, so a change of pin makes a new one.
_studio_base_python=${STUDIO_BASE_PYTHON:-$(command -v python3 || echo /usr/bin/python3)}
_studio_pyver=$("$_studio_base_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
STUDIO_VENV=${STUDIO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/seqstudio/venv-torch2.11.0-cu130-py$_studio_pyver}
STUDIO_PYTHON=$STUDIO_VENV/bin/python
# LLaMA-Factory's own environment (scripts/llamafactory-requirements.txt): its llamafactory-cli.
STUDIO_LF_VENV=${STUDIO_LF_VENV:-${STUDIO_VENV}-llamafactory-0.9.5}
STUDIO_LLAMAFACTORY_CLI=$STUDIO_LF_VENV/bin/llamafactory-cli
export STUDIO_VENV STUDIO_PYTHON STUDIO_LF_VENV STUDIO_LLAMAFACTORY_CLI
