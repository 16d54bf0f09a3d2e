"""The contract the reference scripts beside this file keep with the tests that run them: the
answer on stdout, or exit status 1 with the reason on stderr (a bad request or a missing package
as a Failure's message, the reference library's own refusals with their type, anything else with
its traceback too). The scripts run as `python tests/reference/NAME.py`, so this folder is on
their import path.
"""

import sys


class Failure(Exception):
    """A request the script cannot answer, or an environment without what it needs."""


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
