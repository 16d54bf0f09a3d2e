"""The contract the reference scripts beside this file keep with the tests that run them: the
answer on stdout, or exit status 1 with the reason on stderr (a bad request or a missing package
as a Failure's message, the reference library's own refusals with their type, anything else with
its traceback too). The scripts run as `python tests/reference/NAME.py`, so this folder is on
their import path.
"""

import json
import sys


class Failure(Exception):
    """A request the script cannot answer, or an environment without what it needs."""


def require(modules, needed):
    """Imports `modules` (names), or fails saying that `needed` and that scripts/setup.sh installs
    them; returns the modules."""
    import importlib

    try:
        return [importlib.import_module(m) for m in modules]
    except ImportError as e:
        raise Failure(f"{needed} ({e}): run scripts/setup.sh (this is {sys.executable})") from e


def read_requests(parse):
    """The JSON on stdin: one request (an object), or an array of them, answered in one start of
    Python (the reference libraries take seconds to import). Every request is checked by `parse`
    before any runs: one bad request fails them all. Returns the parsed requests and whether an
    array was sent (write_answers answers alike)."""
    try:
        request = json.load(sys.stdin)
    except ValueError as e:
        raise Failure(f"stdin is not JSON: {e}") from e
    if isinstance(request, list):
        return [parse(r) for r in request], True
    return [parse(request)], False


def write_answers(answers, as_array):
    """The answers on stdout: an array, or the one answer when one request (no array) was sent."""
    json.dump(answers if as_array else answers[0], sys.stdout)
    sys.stdout.write("\n")


def run(main, script):
    """Runs main() and exits with its status, or with 1 and the reason under `script`'s name."""
    try:
        sys.exit(main())
    except Failure as e:
        print(f"{script}: {e}", file=sys.stderr)
    except (ValueError, NotImplementedError) as e:  # the library's own checks
        print(f"{script}: {type(e).__name__}: {e}", file=sys.stderr)
    except Exception as e:  # anything else: the traceback too
        import traceback

        traceback.print_exc()
        print(f"{script}: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)


def offline_cpu_environment():
    """Sets what LLaMA-Factory's, transformers' and datasets' code read before they are imported:
    no network, no GPU (torch on the CPU), no progress bars, no version check, no trackers."""
    import os

    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"),
                       ("HF_HUB_DISABLE_TELEMETRY", "1"), ("HF_DATASETS_DISABLE_PROGRESS_BARS", "1"),
                       ("DISABLE_VERSION_CHECK", "1"), ("WANDB_DISABLED", "true")):
        os.environ.setdefault(key, value)
