"""The Hugging Face side of bench_tokenizer: encodes the same documents with HF tokenizers (the Rust
library through its Python bindings, the `tokenizers` package in the project's Python environment,
scripts/python-env.sh) and times it inside Python, so the interpreter's start-up, the imports and
the loading do not count.

    $STUDIO_PYTHON hf_bench.py TOKENIZER_JSON DOCUMENTS_FILE

DOCUMENTS_FILE holds UTF-8 documents separated by U+001E (record separator). Prints one JSON line:
{"sequential_s", "sequential_cpu_s", "batch_s", "batch_cpu_s", "tokens", "batch_tokens"}: one
encode() after another (HF on one thread at a time), then encode_batch() over all documents (HF's
own thread pool). CPU seconds are the whole process's (all of HF's threads included).
"""

import json
import sys
import time


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: hf_bench.py TOKENIZER_JSON DOCUMENTS_FILE")
    file, documents_file = sys.argv[1:]
    from tokenizers import Tokenizer

    # Read as bytes: text mode would turn the documents' "\r\n" and "\r" into "\n".
    with open(documents_file, "rb") as f:
        documents = f.read().decode("utf-8").split("\x1e")

    # Each measurement starts from a freshly loaded tokenizer (a cold word cache), warmed up on a
    # few documents, as bench_tokenizer does for its own rows.
    def fresh():
        tokenizer = Tokenizer.from_file(file)
        for d in documents[:8]:
            tokenizer.encode(d, add_special_tokens=False)
        return tokenizer

    tokenizer = fresh()
    tokens = 0
    start, cpu = time.perf_counter(), time.process_time()
    for d in documents:
        tokens += len(tokenizer.encode(d, add_special_tokens=False))
    sequential = time.perf_counter() - start
    sequential_cpu = time.process_time() - cpu

    tokenizer = fresh()
    start, cpu = time.perf_counter(), time.process_time()
    batch = tokenizer.encode_batch(documents, add_special_tokens=False)
    batch_seconds = time.perf_counter() - start
    batch_cpu = time.process_time() - cpu
    batch_tokens = sum(len(e) for e in batch)
    print(json.dumps({"sequential_s": sequential, "sequential_cpu_s": sequential_cpu,
                      "batch_s": batch_seconds, "batch_cpu_s": batch_cpu, "tokens": tokens,
                      "batch_tokens": batch_tokens}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line on stderr and a non-zero status, as bench_tokenizer expects
        print(f"hf_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
