"""The reference for studio-train's stage rm: LLaMA-Factory's own rm stage (the version
scripts/setup.sh installs, run with the interpreter of its environment), evaluated on model folders.

    python lf_rm.py < request.json > answer.json

request: {"args": {...}, "models": ["FOLDER", ...]}
  args    an rm YAML as LLaMA-Factory reads it (stage rm, template, dataset_dir, eval_dataset,
          cutoff_len, per_device_eval_batch_size, ...); model_name_or_path is set to each FOLDER
          in turn, and do_train false, do_eval true, output_dir a temporary folder, report_to none.
  models  the folders to evaluate: a model as transformers loads it, with or without
          value_head.safetensors beside it.
answer: one object per folder, in order:
  {"eval_loss": float, "eval_accuracy": float,         LF's PairwiseTrainer.evaluate() metrics
   "chosen_scores": [...], "rejected_scores": [...],   trainer.predict()'s predictions, per pair
   "train_loss": float,                                PairwiseTrainer.compute_loss on ONE batch
                                                       of every eval pair with the model in
                                                       training mode: LF's loss for a training step
                                                       over that batch (dropout included, if any)
   "chosen_ids": [[...]], "rejected_ids": [[...]],     the pairs as LF's PairwiseDatasetProcessor
                                                       tokenized them
   "value_head_loaded": bool,                          LF's load_valuehead_params found the file
   "dropout": "Identity" | "Dropout(p=...)"}           TRL's ValueHead.dropout as built
Any failure exits 1 with the reason on stderr (reference_main's contract).

What runs is LLaMA-Factory 0.9.5's run_rm (src/llamafactory/train/rm/workflow.py) without its
training: get_train_args on `args`, load_tokenizer, get_template_and_fix_tokenizer,
get_dataset(stage="rm"), load_model(add_valuehead=True) (TRL's AutoModelForCausalLMWithValueHead,
then the folder's value_head.safetensors by load_valuehead_params when there is one, else TRL's
random head from torch's global generator, seeded by get_train_args' set_seed),
PairwiseDataCollatorWithPadding(pad_to_multiple_of=8) and PairwiseTrainer with ComputeAccuracy.
Everything runs on the CPU in fp32 (CUDA_VISIBLE_DEVICES is emptied before torch loads).
"""

import json
import os
import sys
import tempfile

from reference_main import Failure, offline_cpu_environment, run

offline_cpu_environment()


def evaluate(args, folder, out_dir):
    import torch
    from llamafactory.data import (PairwiseDataCollatorWithPadding, get_dataset,
                                   get_template_and_fix_tokenizer)
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_model, load_tokenizer
    from llamafactory.model.model_utils.valuehead import load_valuehead_params
    from llamafactory.train.rm.metric import ComputeAccuracy
    from llamafactory.train.rm.trainer import PairwiseTrainer

    args = dict(args, model_name_or_path=folder, stage="rm", do_train=False, do_eval=True,
                output_dir=out_dir, report_to="none")
    model_args, data_args, training_args, finetuning_args, _ = get_train_args(args)
    if training_args.device.type != "cpu":
        raise Failure(f"expected the CPU, LLaMA-Factory runs on {training_args.device}")
    # As run_rm.
    tokenizer_module = load_tokenizer(model_args)
    tokenizer = tokenizer_module["tokenizer"]
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    dataset_module = get_dataset(template, model_args, data_args, training_args, stage="rm",
                                 **tokenizer_module)
    model = load_model(tokenizer, model_args, finetuning_args, training_args.do_train,
                       add_valuehead=True)
    data_collator = PairwiseDataCollatorWithPadding(
        template=template, model=model, pad_to_multiple_of=8, **tokenizer_module
    )
    trainer = PairwiseTrainer(
        model=model,
        args=training_args,
        finetuning_args=finetuning_args,
        data_collator=data_collator,
        callbacks=None,
        compute_metrics=ComputeAccuracy(),
        **dataset_module,
        **tokenizer_module,
    )
    eval_dataset = dataset_module["eval_dataset"]
    metrics = trainer.evaluate(metric_key_prefix="eval")
    predicted = trainer.predict(eval_dataset, metric_key_prefix="predict")
    chosen, rejected = predicted.predictions

    # One training step's loss over the whole eval set as one batch (what LF's first step logs
    # when its batch holds every pair): compute_loss with the model in training mode.
    features = [eval_dataset[i] for i in range(len(eval_dataset))]
    batch = data_collator(features)
    model.train()
    with torch.no_grad():
        train_loss = trainer.compute_loss(model, batch)
    model.eval()

    weights = next(model.parameters())
    if weights.dtype != torch.float32:
        raise Failure(f"expected fp32 weights, LLaMA-Factory loaded {weights.dtype}")
    return {
        "eval_loss": metrics["eval_loss"],
        "eval_accuracy": metrics["eval_accuracy"],
        "chosen_scores": [float(x) for x in chosen.reshape(-1)],
        "rejected_scores": [float(x) for x in rejected.reshape(-1)],
        "train_loss": float(train_loss),
        "chosen_ids": [list(map(int, ids)) for ids in eval_dataset["chosen_input_ids"]],
        "rejected_ids": [list(map(int, ids)) for ids in eval_dataset["rejected_input_ids"]],
        "value_head_loaded": load_valuehead_params(folder, model_args) is not None,
        "dropout": repr(model.v_head.dropout),
    }


def main():
    request = json.load(sys.stdin)
    if (not isinstance(request, dict) or not isinstance(request.get("args"), dict)
            or not request.get("models")):
        raise Failure('stdin must be {"args": {...}, "models": ["FOLDER", ...]}')
    out = sys.stdout
    sys.stdout = sys.stderr  # LLaMA-Factory prints (a data example, logs) to stdout
    answers = []
    with tempfile.TemporaryDirectory(prefix="lf_rm_") as tmp:
        # datasets' json builder writes its cache there, not under ~/.cache/huggingface.
        os.environ["HF_DATASETS_CACHE"] = os.path.join(tmp, "datasets")
        import datasets

        datasets.disable_progress_bars()
        datasets.disable_caching()
        for i, folder in enumerate(request["models"]):
            answers.append(evaluate(request["args"], folder, os.path.join(tmp, str(i))))
    json.dump(answers, out)
    return 0


if __name__ == "__main__":
    run(main, "lf_rm.py")
