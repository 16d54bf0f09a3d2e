"""What Hugging Face's own safetensors library (the Rust reader, through its Python bindings, as
transformers uses it) sees in .safetensors files and transformers model folders, so that
tst_hf_checkpoint can check that what the C++ writer produces is what the Hugging Face libraries
read. Run with the project's Python environment (scripts/setup.sh; STUDIO_PYTHON).

Usage: read_safetensors.py FILE.safetensors | MODEL_DIR
Prints {"tensors": [{"name", "file", "dtype", "shape", "sum", "wsum"}, ...]} as JSON, where sum is
the float64 sum of the elements and wsum the float64 sum of element * flat index (which also
catches permuted data). Exits 1 with a message on stderr when the library refuses the file (it
enforces the format's rules: header size and JSON, offsets covering the data exactly, dtypes).
"""
import json
import os
import sys

import torch
from safetensors import safe_open

DTYPES = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32",
    torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
}


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def read_file(path):
    try:
        f = safe_open(path, framework="pt", device="cpu")
    except Exception as e:  # noqa: BLE001 - the library's message is the answer
        fail(f"{path}: safetensors refuses it: {e}")
    out = []
    with f:
        for name in f.keys():
            t = f.get_tensor(name)
            flat = t.reshape(-1).to(torch.float64)
            out.append({
                "name": name, "file": os.path.basename(path), "dtype": DTYPES[t.dtype],
                "shape": list(t.shape), "sum": flat.sum().item(),
                "wsum": (flat * torch.arange(flat.numel(), dtype=torch.float64)).sum().item(),
            })
    return out


def element_size(dtype_name):
    return {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4}[dtype_name]


def read_folder(folder):
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_file(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    tensors = []
    for shard in sorted(set(weight_map.values())):
        tensors += read_file(os.path.join(folder, shard))
    found = {t["name"]: t["file"] for t in tensors}
    if found != weight_map:
        fail(f"{folder}: weight_map does not match the shards' contents")
    total = 0
    for t in tensors:
        numel = 1
        for d in t["shape"]:
            numel *= d
        total += numel * element_size(t["dtype"])
    if index["metadata"]["total_size"] != total:
        fail(f"{folder}: total_size {index['metadata']['total_size']} != {total}")
    return tensors


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    target = sys.argv[1]
    tensors = read_folder(target) if os.path.isdir(target) else read_file(target)
    print(json.dumps({"tensors": tensors}))


if __name__ == "__main__":
    main()
