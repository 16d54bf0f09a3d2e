"""The reference for studio_data's tokenizer: Hugging Face tokenizers (the Rust library through its
official Python bindings, pinned in scripts/python-requirements.txt).

    python hf_tokenize.py TOKENIZER_JSON [--add-special-tokens] < requests.json > answers.json
    python hf_tokenize.py TOKENIZER_JSON --info

stdin is a JSON array; each item is one of
    "text"                  encode this text
    {"text": "..."}         the same; objects may add "add_special_tokens": true/false, which
                            overrides the command line for that item
    {"base64": "..."}       encode these raw bytes, decoded as UTF-8 with U+FFFD for invalid
                            sequences (Python's errors="replace": the maximal-subpart rule, as
                            Rust's from_utf8_lossy)
    {"ids": [1, 2, 3]}      only decode these ids
stdout is a JSON array in the same order: {"ids": [...], "decoded": "...", "decoded_skip": "..."}
where "decoded" is decode(ids, skip_special_tokens=False) and "decoded_skip" the same with True.
--info prints {"vocab_size": N, "vocab_size_with_added": M} and ignores stdin.
Any failure (e.g. the tokenizer.json does not load) exits 1 with the error on stderr.
"""

import base64
import json
import sys


def text_of(item):
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        return item["text"]
    if isinstance(item, dict) and isinstance(item.get("base64"), str):
        return base64.b64decode(item["base64"]).decode("utf-8", errors="replace")
    raise ValueError(f"request item {json.dumps(item)[:80]} is neither a string, {{text}}, "
                     "{base64} nor {ids}")


def answer(tokenizer, item, add_special_tokens):
    if isinstance(item, dict) and isinstance(item.get("ids"), list):
        ids = item["ids"]
    else:
        special = add_special_tokens
        if isinstance(item, dict) and isinstance(item.get("add_special_tokens"), bool):
            special = item["add_special_tokens"]
        ids = tokenizer.encode(text_of(item), add_special_tokens=special).ids
    return {
        "ids": ids,
        "decoded": tokenizer.decode(ids, skip_special_tokens=False),
        "decoded_skip": tokenizer.decode(ids, skip_special_tokens=True),
    }


def main(argv):
    files = [a for a in argv if not a.startswith("--")]
    if not files:
        raise ValueError("usage: hf_tokenize.py TOKENIZER_JSON [--add-special-tokens|--info] "
                         "< requests.json")
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise RuntimeError(f"the Python package 'tokenizers' is missing ({e}): run "
                           "scripts/setup.sh and use its environment's python") from e
    tokenizer = Tokenizer.from_file(files[0])
    if "--info" in argv:
        print(json.dumps({
            "vocab_size": tokenizer.get_vocab_size(with_added_tokens=False),
            "vocab_size_with_added": tokenizer.get_vocab_size(with_added_tokens=True),
        }))
        return
    requests = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if not isinstance(requests, list):
        raise ValueError("stdin must be a JSON array")
    add = "--add-special-tokens" in argv
    answers = [answer(tokenizer, item, add) for item in requests]
    sys.stdout.write(json.dumps(answers, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # noqa: BLE001 - the caller reads the message
        sys.stderr.write(f"hf_tokenize.py: {e}\n")
        sys.exit(1)
