"""The reference for studio-train's stage kto: LLaMA-Factory's own kto stage (the version
scripts/setup.sh installs, run with the interpreter of its environment, TRL 0.24 underneath),
evaluated on model folders.

    python lf_kto.py < request.json > answer.json

request: {"args": {...}, "reference": "FOLDER", "models": [{"folder": "FOLDER", "batches": [[i, ...], ...]}, ...]}
  args       a kto YAML as LLaMA-Factory reads it (template, dataset_dir, dataset, eval_dataset,
             cutoff_len, preprocessing_batch_size, pref_beta, pref_ftx, kto_chosen_weight,
             kto_rejected_weight, per_device_eval_batch_size, seed, ...); for each model
             model_name_or_path is set to its folder, ref_model to `reference`, and stage kto,
             finetuning_type full, do_train and do_eval true, output_dir a temporary folder,
             report_to none.
  reference  the frozen reference: the initial model folder of the run.
  models     the policies to evaluate, each with the micro-batches (indices into LF's train
             dataset, in any order) whose training loss is wanted at those weights.
answer: {"train": [EXAMPLE, ...], "eval": [EXAMPLE, ...],   the datasets as LF tokenized them
         "models": [MODEL, ...],                            one per request model, in order
         "trl_version": "...", "llamafactory_version": "..."}
  EXAMPLE = {"input_ids", "labels", "kl_input_ids", "kl_labels": [...], "kto_tags": bool}
  MODEL   = {"eval_loss": float,                LF's CustomKTOTrainer.evaluate() on eval_dataset
             "eval_metrics": {...},             all of evaluate()'s metrics as LF logs them
                                                (eval_rewards/chosen, ..., and "kl", unprefixed:
                                                the SUM of the batches' KL, CustomKTOTrainer.log's)
             "batches": [BATCH, ...]}           one per requested micro-batch
  BATCH   = {"loss": float,                     get_batch_loss_metrics' loss on that micro-batch,
                                                the policy in training mode: the loss LF trains on
                                                in a step made of that one micro-batch
             "kl": float,                       its KL estimate (TRL's kto_loss, clamped at 0)
             "rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected":
                                                LF's logged means (metrics' *_sum / count/*, as
                                                CustomKTOTrainer.log forms them); null where the
                                                micro-batch holds no example of that kind
             "count/chosen", "count/rejected": float}
Any failure exits 1 with the reason on stderr (reference_main's contract).

What runs is LLaMA-Factory 0.9.5's run_kto (src/llamafactory/train/kto/workflow.py) without its
training: get_train_args on `args`, load_tokenizer, get_template_and_fix_tokenizer,
get_dataset(stage="kto") (FeedbackDatasetProcessor through datasets' Dataset.map: each row's KL
sequence is its prompt with the previous row's response within a preprocessing batch, the
batch's first row taking its last row's), load_model(is_trainable=True) for the policy,
create_ref_model for the reference (its ref_model branch: load_model(is_trainable=False) of
`reference`, what run_kto loads from the initial model_name_or_path in a training run),
KTODataCollatorWithPadding(pad_to_multiple_of=8, label_pad_token_id IGNORE_INDEX) and
CustomKTOTrainer (its __init__ disables dropout in both models and prepares the reference). For
each requested micro-batch: the collator on those train examples, Trainer._prepare_inputs, then
CustomKTOTrainer.get_batch_loss_metrics (its concatenated_forward on the policy, the KL forward
without gradients, compute_reference_log_probs on the reference, TRL 0.24's
KTOTrainer.kto_loss, LF's pref_ftx rescaling), unmodified. Then trainer.evaluate() (TRL's
evaluation_loop over transformers' Trainer.evaluation_loop: sequential batches of
per_device_eval_batch_size, each batch's loss weighted by its examples).
Everything runs on the CPU in fp32 (CUDA_VISIBLE_DEVICES is emptied before torch loads).
"""

import json
import math
import os
import sys
import tempfile

from reference_main import Failure, offline_cpu_environment, run

offline_cpu_environment()

KEYS = ("input_ids", "labels", "kl_input_ids", "kl_labels", "kto_tags")


def examples(dataset):
    return [{key: row[key] for key in KEYS} for row in dataset]


def finite(x):
    x = float(x)
    return x if math.isfinite(x) else None


def batch_answer(loss, metrics):
    out = {"loss": finite(loss), "kl": finite(metrics["kl"])}
    for split in ("chosen", "rejected"):
        count = metrics.get(f"count/{split}", 0.0)
        out[f"count/{split}"] = float(count)
        for key in ("rewards", "logps"):
            out[f"{key}/{split}"] = (finite(metrics[f"{key}/{split}_sum"] / count) if count > 0
                                     else None)
    return out


def evaluate(args, reference, request_model, out_dir):
    import torch
    from llamafactory.data import (KTODataCollatorWithPadding, get_dataset,
                                   get_template_and_fix_tokenizer)
    from llamafactory.extras.constants import IGNORE_INDEX
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_model, load_tokenizer
    from llamafactory.train.kto.trainer import CustomKTOTrainer
    from llamafactory.train.trainer_utils import create_ref_model

    folder = request_model.get("folder")
    batches = request_model.get("batches", [])
    if not isinstance(folder, str) or not isinstance(batches, list):
        raise Failure('each model must be {"folder": "FOLDER", "batches": [[i, ...], ...]}')
    args = dict(args, model_name_or_path=folder, ref_model=reference, stage="kto",
                finetuning_type="full", do_train=True, do_eval=True, output_dir=out_dir,
                overwrite_output_dir=True, report_to="none")
    model_args, data_args, training_args, finetuning_args, _ = get_train_args(args)
    if training_args.device.type != "cpu":
        raise Failure(f"expected the CPU, LLaMA-Factory runs on {training_args.device}")
    # As run_kto.
    tokenizer_module = load_tokenizer(model_args)
    tokenizer = tokenizer_module["tokenizer"]
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    dataset_module = get_dataset(template, model_args, data_args, training_args, stage="kto",
                                 **tokenizer_module)
    model = load_model(tokenizer, model_args, finetuning_args, training_args.do_train)
    data_collator = KTODataCollatorWithPadding(
        template=template,
        model=model,
        pad_to_multiple_of=8,
        label_pad_token_id=IGNORE_INDEX if data_args.ignore_pad_token_for_loss else tokenizer.pad_token_id,
        **tokenizer_module,
    )
    ref_model = create_ref_model(model_args, finetuning_args)
    trainer = CustomKTOTrainer(
        model=model,
        ref_model=ref_model,
        args=training_args,
        finetuning_args=finetuning_args,
        data_collator=data_collator,
        callbacks=None,
        **dataset_module,
        **tokenizer_module,
    )
    for name, m in (("policy", model), ("reference", ref_model)):
        dtype = next(m.parameters()).dtype
        if dtype != torch.float32:
            raise Failure(f"expected fp32 weights, LLaMA-Factory loaded the {name} in {dtype}")

    train_dataset = dataset_module["train_dataset"]
    eval_dataset = dataset_module["eval_dataset"]
    answers = []
    # Each micro-batch as a training step sees it: the policy in training mode, the batch
    # collated and moved as Trainer.training_step does, then the loss KTOTrainer.compute_loss
    # takes from get_batch_loss_metrics (gradients are not needed for the values).
    model.train()
    for idx in batches:
        if (not isinstance(idx, list) or not idx or not all(
                isinstance(i, int) and 0 <= i < len(train_dataset) for i in idx)):
            raise Failure(f"a batch must list train example indices below {len(train_dataset)}")
        batch = trainer._prepare_inputs(data_collator([train_dataset[i] for i in idx]))
        with torch.no_grad():
            loss, metrics = trainer.get_batch_loss_metrics(model, batch)
        answers.append(batch_answer(loss, metrics))
    metrics = trainer.evaluate(metric_key_prefix="eval")
    eval_metrics = {k: finite(v) for k, v in metrics.items() if isinstance(v, (int, float))}
    return {"eval_loss": metrics["eval_loss"], "eval_metrics": eval_metrics, "batches": answers}, \
        examples(train_dataset), examples(eval_dataset)


def main():
    request = json.load(sys.stdin)
    if (not isinstance(request, dict) or not isinstance(request.get("args"), dict)
            or not isinstance(request.get("reference"), str) or not request.get("models")):
        raise Failure('stdin must be {"args": {...}, "reference": "FOLDER", "models": [...]}')
    out = sys.stdout
    # LLaMA-Factory prints (a data example, logs) to stdout, its log handler bound to the
    # sys.stdout of its first use: only the answer goes to the real one.
    sys.stdout = sys.stderr
    try:
        import datasets
        import llamafactory
        import trl
    except ImportError as e:
        raise Failure(f"LLaMA-Factory 0.9.5's venv is needed ({e}): run scripts/setup.sh (this is "
                      f"{sys.executable})") from e
    if not trl.__version__.startswith("0.24") or llamafactory.__version__ != "0.9.5":
        raise Failure(f"TRL {trl.__version__}, LLaMA-Factory {llamafactory.__version__} here; "
                      "expected LLaMA-Factory 0.9.5 with TRL 0.24")
    answer = {"models": [], "trl_version": trl.__version__,
              "llamafactory_version": llamafactory.__version__}
    with tempfile.TemporaryDirectory(prefix="lf_kto_") as tmp:
        # datasets' json builder writes its cache there, not under ~/.cache/huggingface.
        os.environ["HF_DATASETS_CACHE"] = os.path.join(tmp, "datasets")
        datasets.disable_progress_bars()
        datasets.disable_caching()
        for i, model in enumerate(request["models"]):
            if not isinstance(model, dict):
                raise Failure('each model must be {"folder": "FOLDER", "batches": [...]}')
            got, train, evals = evaluate(request["args"], request["reference"], model,
                                         os.path.join(tmp, str(i)))
            if i == 0:
                answer["train"], answer["eval"] = train, evals
            elif (train, evals) != (answer["train"], answer["eval"]):
                raise Failure(f"{model['folder']}: LF tokenized the data differently than for "
                              f"{request['models'][0]['folder']}")
            answer["models"].append(got)
    json.dump(answer, out)
    return 0


if __name__ == "__main__":
    run(main, "lf_kto.py")
