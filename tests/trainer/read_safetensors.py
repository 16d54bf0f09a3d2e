#!/usr/bin/env python3
"""An independent reader of .safetensors files and transformers model folders, written from the
published format spec (https://huggingface.co/docs/safetensors) with the standard library and
torch only, so that tst_hf_checkpoint can check that what the C++ writer produces is what the
Hugging Face libraries read.

Usage: read_safetensors.py FILE.safetensors | MODEL_DIR
Prints {"tensors": [{"name", "file", "dtype", "shape", "sum", "wsum"}, ...]} as JSON, where sum is
the float64 sum of the elements and wsum the float64 sum of element * flat index (which also
catches permuted data). Exits 1 with a message on stderr when the input breaks the format rules
the Rust safetensors library enforces.
"""
import json
import os
import struct
import sys

import torch

DTYPES = {
    "BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32,
    "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
}
MAX_HEADER = 100_000_000


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def read_file(path):
    with open(path, "rb") as f:
        blob = bytearray(f.read())  # writable, so torch.frombuffer does not warn
    if len(blob) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER or 8 + n > len(blob):
        fail(f"{path}: bad header length {n}")
    if n % 8 != 0:
        fail(f"{path}: header length {n} is not a multiple of 8 (writers pad it)")
    header_bytes = blob[8:8 + n]
    if not header_bytes.startswith(b"{"):
        fail(f"{path}: header does not start with '{{'")
    header = json.loads(header_bytes.decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not all(isinstance(v, str) for v in metadata.values()):
        fail(f"{path}: __metadata__ values must be strings")
    data = memoryview(blob)[8 + n:]
    # The Rust library requires the data section to be covered exactly, without gaps.
    position = 0
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"])
    out = []
    for name, info in entries:
        begin, end = info["data_offsets"]
        if begin != position:
            fail(f"{path}: tensor {name!r} starts at {begin}, expected {position}")
        position = end
        dtype = DTYPES[info["dtype"]]
        shape = info["shape"]
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - begin != numel * itemsize:
            fail(f"{path}: tensor {name!r} has {end - begin} bytes for shape {shape}")
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
        flat = t.reshape(-1).to(torch.float64)
        out.append({
            "name": name, "file": os.path.basename(path), "dtype": info["dtype"],
            "shape": shape, "sum": flat.sum().item(),
            "wsum": (flat * torch.arange(numel, dtype=torch.float64)).sum().item(),
        })
    if position != len(data):
        fail(f"{path}: data section has {len(data)} bytes, tensors cover {position}")
    return out


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
        total += numel * torch.empty((), dtype=DTYPES[t["dtype"]]).element_size()
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
