"""The reference for studio_data's stage pt (load_pt_data): LLaMA-Factory's pre-training data
pipeline, its PretrainDatasetProcessor.preprocess_dataset copied verbatim (LLaMA-Factory 0.9.5,
src/llamafactory/data/processor/pretrain.py) and run the way LF's loader runs it: each dataset's
rows cut to max_samples, converted to `_prompt` messages by LF's alpaca and sharegpt rules,
concatenated, then Hugging Face datasets' own Dataset.map(batched=True,
batch_size=preprocessing_batch_size, num_proc=preprocessing_num_workers). The val_size split is
left out (studio_data draws its own seeded split).

    python lf_pretrain.py < request.json > answer.json

request: {"tokenizer": "FOLDER", "template": "" | "llama3" | "qwen" | ..., "dataset_dir": "...",
          "dataset": ["name", ...], "eval_dataset": [...], "cutoff_len": N,
          "packing": true | false | null (as the YAML writes it; null: not written),
          "preprocessing_batch_size": N, "preprocessing_num_workers": N | null,
          "max_samples": N | null}
answer:  {"train": [[ids], ...], "eval": [[ids], ...], "train_labels": [[labels], ...],
          "eval_labels": [...], "eos_text": "...", "pad_text": "...", "add_bos_token": bool}
(eos_text: what ends each text; labels: what LF's pt collator, transformers'
DataCollatorForLanguageModeling(mlm=False), makes of each sequence: its ids with every
occurrence of the pad token set to -100; pad_text: LF's pad token, the tokenizer's, else the eos
Template.fix_special_tokens leaves)

Two choices, both the tokenizer's and not the processor's:
- FOLDER is loaded as PreTrainedTokenizerFast, i.e. its tokenizer.json as written, which is what
  studio_data's Tokenizer reads (as tests/reference/lf_template.py does, for the same reason:
  transformers 5's LlamaTokenizer replaces the file's normalizer and pre-tokenizer with its own).
- `tokenizer.add_bos_token` is set from tokenizer_config.json's add_bos_token, as transformers 4's
  LlamaTokenizerFast reads it and studio_data's Tokenizer::add_bos_token() does. transformers 5
  drops that key whenever a tokenizer.json exists (tokenization_utils_base.py), so LF 0.9.5 on
  transformers 5 sees add_bos_token False for every such tokenizer and adds no bos in pt.
Any failure exits 1 with the error on stderr.
"""

import json
import os
import sys
from dataclasses import dataclass
from itertools import chain
from types import SimpleNamespace
from typing import Any

# LLaMA-Factory's template.py: the templates with replace_eos=True, their stop words. Only the
# names the tests use; any other name is taken to replace nothing (e.g. "default", "empty").
REPLACE_EOS_STOP_WORDS = {
    "qwen": ["<|im_end|>"],
    "llama3": ["<|eot_id|>", "<|eom_id|>"],
}


@dataclass
class PretrainDatasetProcessor:
    tokenizer: Any
    data_args: Any

    # LLaMA-Factory 0.9.5, verbatim.
    def preprocess_dataset(self, examples: dict[str, list[Any]]) -> dict[str, list[Any]]:
        # build grouped texts with format `X1 X2 X3 ...` if packing is enabled
        eos_token = "<|end_of_text|>" if self.data_args.template == "llama3" else self.tokenizer.eos_token
        text_examples = [messages[0]["content"] + eos_token for messages in examples["_prompt"]]

        if not self.data_args.packing:
            if getattr(self.tokenizer, "add_bos_token", False):
                text_examples = [self.tokenizer.bos_token + example for example in text_examples]

            result = self.tokenizer(
                text_examples, add_special_tokens=False, truncation=True, max_length=self.data_args.cutoff_len
            )
        else:
            tokenized_examples = self.tokenizer(text_examples, add_special_tokens=False)
            concatenated_examples = {k: list(chain(*tokenized_examples[k])) for k in tokenized_examples.keys()}
            total_length = len(concatenated_examples[list(concatenated_examples.keys())[0]])
            block_size = self.data_args.cutoff_len
            total_length = (total_length // block_size) * block_size
            result = {
                k: [t[i : i + block_size] for i in range(0, total_length, block_size)]
                for k, t in concatenated_examples.items()
            }
            if getattr(self.tokenizer, "add_bos_token", False):
                for i in range(len(result["input_ids"])):
                    result["input_ids"][i][0] = self.tokenizer.bos_token_id

        return result


def load_tokenizer(folder, template):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
    config_file = os.path.join(folder, "tokenizer_config.json")
    config = json.load(open(config_file, encoding="utf-8")) if os.path.exists(config_file) else {}
    tokenizer.add_bos_token = config.get("add_bos_token") is True and tokenizer.bos_token is not None
    # LF's Template.fix_special_tokens: a replace_eos template's first stop word becomes the eos;
    # a tokenizer without an eos gets <|endoftext|>.
    stop_words = REPLACE_EOS_STOP_WORDS.get(template or "")
    if stop_words and tokenizer.eos_token != stop_words[0]:
        tokenizer.add_special_tokens({"eos_token": stop_words[0]})
    if tokenizer.eos_token_id is None:
        tokenizer.add_special_tokens({"eos_token": "<|endoftext|>"})
    if tokenizer.pad_token_id is None:  # fix_special_tokens, after the eos
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def read_rows(path):
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def column(attr, role, default):
    # LF's DatasetAttr.join: with "columns" given, the roles it does not name are None.
    if "columns" in attr:
        return attr["columns"].get(role)
    return default


# LF's AlpacaDatasetConverter and SharegptDatasetConverter, as far as `_prompt` goes.
def prompt_of(attr, example):
    if attr.get("formatting", "alpaca") == "sharegpt":
        messages = example[column(attr, "messages", "conversations")]
        tags = attr.get("tags", {})
        role_tag, content_tag = tags.get("role_tag", "from"), tags.get("content_tag", "value")
        if messages and messages[0][role_tag] == tags.get("system_tag", "system"):
            messages = messages[1:]
        return [{"role": "user", "content": messages[0][content_tag]}]
    prompt = []
    history = column(attr, "history", None)
    if history and isinstance(example.get(history), list):
        for old_prompt, old_response in example[history]:
            prompt.append({"role": "user", "content": old_prompt})
            prompt.append({"role": "assistant", "content": old_response})
    query = []
    for role, default in (("prompt", "instruction"), ("query", "input")):
        name = column(attr, role, default)
        if name and example.get(name):
            query.append(example[name])
    prompt.append({"role": "user", "content": "\n".join(query)})
    return prompt


def merged_dataset(request, names):
    from datasets import Dataset, concatenate_datasets

    if not names:
        return None
    info = json.load(open(os.path.join(request["dataset_dir"], "dataset_info.json"), encoding="utf-8"))
    parts = []
    for name in names:
        attr = info[name]
        rows = read_rows(os.path.join(request["dataset_dir"], attr["file_name"]))
        if request.get("max_samples") is not None:
            rows = rows[: request["max_samples"]]
        parts.append(Dataset.from_list([{"_prompt": prompt_of(attr, row)} for row in rows]))
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def main():
    import datasets

    datasets.disable_progress_bars()
    datasets.disable_caching()
    request = json.load(sys.stdin)
    tokenizer = load_tokenizer(request["tokenizer"], request.get("template") or "")
    # LF's DataArguments.__post_init__ takes one off cutoff_len when packing is written as true;
    # then its argument parser (get_train_args) turns packing on for stage pt when not written.
    packing, cutoff_len = request["packing"], request["cutoff_len"]
    if packing:
        cutoff_len -= 1
    if packing is None:
        packing = True
    data_args = SimpleNamespace(template=request.get("template") or None, packing=packing,
                                cutoff_len=cutoff_len)
    processor = PretrainDatasetProcessor(tokenizer=tokenizer, data_args=data_args)
    eos_text = "<|end_of_text|>" if data_args.template == "llama3" else tokenizer.eos_token  # as LF
    answer = {"eos_text": eos_text, "pad_text": tokenizer.pad_token,
              "add_bos_token": bool(tokenizer.add_bos_token)}
    # LF's pt workflow trains with this collator (train/pt/workflow.py); each sequence on its own,
    # so that nothing is padded.
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)
    for key, names in (("train", request["dataset"]), ("eval", request.get("eval_dataset") or [])):
        dataset = merged_dataset(request, names)
        if dataset is None:
            answer[key] = []
            answer[key + "_labels"] = []
            continue
        dataset = dataset.map(processor.preprocess_dataset, batched=True,
                              batch_size=request["preprocessing_batch_size"],
                              num_proc=request.get("preprocessing_num_workers"),
                              remove_columns=dataset.column_names)
        answer[key] = [list(ids) for ids in dataset["input_ids"]]
        answer[key + "_labels"] = [collator([{"input_ids": ids}])["labels"][0].tolist()
                                   for ids in answer[key]]
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the test prints it
        import traceback

        traceback.print_exc()
        print(f"lf_pretrain.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
