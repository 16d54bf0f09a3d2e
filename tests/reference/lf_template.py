"""The reference for studio_data's chat templates: LLaMA-Factory's own template code (the version
scripts/setup.sh installs), run with the interpreter of LLaMA-Factory's environment.

    python lf_template.py < requests.json > answers.json

stdin is a JSON array; each item is
    {"template": "gemma", "tokenizer": "FOLDER", "system": "...",
     "messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...],
     "enable_thinking": true, "mask_history": false}
(the last two optional). FOLDER holds tokenizer.json and tokenizer_config.json. It is loaded as
PreTrainedTokenizerFast, i.e. the tokenizer.json as written, which is what studio_data's Tokenizer
reads, and not through AutoTokenizer: transformers 5's LlamaTokenizer replaces the file's
normalizer and pre-tokenizer with its own (Metaspace, prepend_scheme "first"), which changes the
ids of text after a special token. That is a difference of tokenizers, not of chat templates, and
would hide the template comparison. Each item is answered with
    {"turns": [{"prompt": [ids], "response": [ids]}, ...], "added_tokens": ["..."]}
where the turns are Template.encode_multiturn's pairs after get_template_and_fix_tokenizer, and
added_tokens lists what fix_special_tokens added to the tokenizer (stop words or an eos it lacked):
ids of such tokens are new rows of the embedding matrix, which studio_data refuses to produce.
Any failure exits 1 with the error on stderr.
"""

import json
import sys


def answer(item):
    from transformers import PreTrainedTokenizerFast

    from llamafactory.data.template import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments

    tokenizer = PreTrainedTokenizerFast.from_pretrained(item["tokenizer"])
    before = set(tokenizer.get_vocab())
    data_args = DataArguments(template=item["template"],
                              enable_thinking=item.get("enable_thinking", True))
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    added = sorted(set(tokenizer.get_vocab()) - before)
    # As LF's supervised processor calls it: mask_history discards the history thoughts.
    discard = item.get("mask_history", False) and not template.preserve_thinking
    pairs = template.encode_multiturn(tokenizer, item["messages"], item.get("system") or None,
                                      None, discard)
    return {"turns": [{"prompt": p, "response": r} for p, r in pairs], "added_tokens": added}


def main():
    requests = json.load(sys.stdin)
    if not isinstance(requests, list):
        raise ValueError("stdin must be a JSON array of requests")
    out = sys.stdout
    sys.stdout = sys.stderr  # LLaMA-Factory logs to stdout; only the answers go there
    answers = [answer(item) for item in requests]
    json.dump(answers, out)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the caller shows the message
        print(f"lf_template.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
