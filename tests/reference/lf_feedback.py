"""The reference for studio_data's stage kto (load_feedback_data): LLaMA-Factory's own kto data
pipeline (the version scripts/setup.sh installs, run with the interpreter of its environment).

    python lf_feedback.py < requests.json > answers.json

stdin is a JSON array; each request is
    {"tokenizer": "FOLDER", "template": "qwen", "dataset_dir": "...", "dataset": ["name", ...],
     "eval_dataset": [...], "cutoff_len": N, "preprocessing_batch_size": N,
     "preprocessing_num_workers": N | null, "max_samples": N | null, "enable_thinking": bool}
and is answered, in order, with
    {"train": [EXAMPLE, ...], "eval": [EXAMPLE, ...]}
    EXAMPLE = {"input_ids": [...], "labels": [...], "kl_input_ids": [...], "kl_labels": [...],
               "kto_tags": bool}
or, where LLaMA-Factory itself refuses or fails on the request, with {"error": "TYPE: message"}
(that is LF's answer, not a failure of this script).

What runs is LLaMA-Factory 0.9.5's get_dataset(stage="kto") as its kto workflow calls it
(src/llamafactory/train/kto/workflow.py): its dataset_info.json parser, datasets' load_dataset of
each file, max_samples, its alpaca / sharegpt converters (align_dataset), the merge, and
FeedbackDatasetProcessor.preprocess_dataset through datasets' own Dataset.map(batched=True,
batch_size=preprocessing_batch_size, num_proc=preprocessing_num_workers), after
get_template_and_fix_tokenizer. val_size is left out (studio_data draws its own split).
The tokenizer is FOLDER's tokenizer.json as written (PreTrainedTokenizerFast), as
tests/reference/lf_template.py loads it and for the same reason.
Any failure of the script exits 1 with the reason on stderr (reference_main's contract).
"""

import contextlib
import json
import os
import sys
import tempfile
from types import SimpleNamespace

from reference_main import Failure, run

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("DISABLE_VERSION_CHECK", "1")

KEYS = ("input_ids", "labels", "kl_input_ids", "kl_labels", "kto_tags")


def examples(dataset):
    if dataset is None:
        return []
    return [{key: row[key] for key in KEYS} for row in dataset]


def answer(request, cache_dir):
    from transformers import PreTrainedTokenizerFast

    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments

    for key in ("tokenizer", "template", "dataset_dir", "dataset", "cutoff_len",
                "preprocessing_batch_size"):
        if key not in request:
            raise Failure(f"the request has no '{key}'")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(request["tokenizer"])
    data_args = DataArguments(
        template=request["template"],
        dataset_dir=request["dataset_dir"],
        dataset=",".join(request["dataset"]),
        eval_dataset=",".join(request.get("eval_dataset") or []) or None,
        cutoff_len=request["cutoff_len"],
        preprocessing_batch_size=request["preprocessing_batch_size"],
        preprocessing_num_workers=request.get("preprocessing_num_workers"),
        max_samples=request.get("max_samples"),
        enable_thinking=request.get("enable_thinking", True),
        overwrite_cache=True,
    )
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    # What get_dataset reads of the model and training arguments, for one local process.
    model_args = SimpleNamespace(cache_dir=cache_dir, hf_hub_token=None, ms_hub_token=None,
                                 om_hub_token=None)
    training_args = SimpleNamespace(
        seed=42, local_process_index=0, should_log=True, should_save=False,
        predict_with_generate=False, dataloader_num_workers=0,
        main_process_first=lambda desc="", local=True: contextlib.nullcontext())
    try:
        module = get_dataset(template, model_args, data_args, training_args, stage="kto",
                             tokenizer=tokenizer, processor=None)
    except Exception as e:  # noqa: BLE001 - LF's own refusal or failure is its answer
        cause = e.__cause__ or e.__context__
        text = f"{type(e).__name__}: {e}"
        if cause is not None:
            text += f" (from {type(cause).__name__}: {cause})"
        return {"error": text}
    return {"train": examples(module.get("train_dataset")),
            "eval": examples(module.get("eval_dataset"))}


def main():
    try:
        import datasets
        import llamafactory  # noqa: F401
    except ImportError as e:
        raise Failure(f"{e}: run with LLaMA-Factory's environment (scripts/setup.sh)")
    datasets.disable_progress_bars()
    datasets.disable_caching()
    requests = json.load(sys.stdin)
    if not isinstance(requests, list):
        raise Failure("stdin must be a JSON array of requests")
    out = sys.stdout
    sys.stdout = sys.stderr  # LLaMA-Factory logs to stdout; only the answers go there
    with tempfile.TemporaryDirectory() as cache_dir:
        answers = [answer(r, os.path.join(cache_dir, str(i))) for i, r in enumerate(requests)]
    json.dump(answers, out)
    return 0


if __name__ == "__main__":
    run(main, "lf_feedback.py")
