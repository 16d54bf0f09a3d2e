"""The reference for studio-train's 4-bit weight format (kernels/quant4.h): bitsandbytes itself
(pinned in scripts/python-requirements.txt), on the CPU.

    python bnb_quant.py IN.safetensors OUT.safetensors --blocksize 64 --type nf4|fp4 [--double]

IN holds an fp32 tensor `x` (any shape). OUT gets what bitsandbytes.functional.quantize_4bit(x,
blocksize, quant_type, compress_statistics=--double) returns and what dequantize_4bit makes of it:
    packed      uint8 [(n + 1) / 2]: two 4-bit indices per byte, the first in the high nibble
    absmax      fp32 [blocks] (without --double), or
    qabsmax     uint8 [blocks], absmax2 fp32 [ceil(blocks / 256)], offset fp32 [1] (--double)
    code        fp32 [16]: the 4-bit code (quant_state.code)
    dynamic     fp32 [256]: double quantization's map (quant_state.state2.code, --double only)
    dequantized fp32 [n]: dequantize_4bit of the above, flattened
Any failure exits 1 with the reason on stderr (reference_main's contract).
"""

import argparse

from reference_main import Failure, offline_cpu_environment, run

offline_cpu_environment()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--blocksize", type=int, default=64)
    parser.add_argument("--type", choices=["nf4", "fp4"], default="nf4")
    parser.add_argument("--double", action="store_true")
    args = parser.parse_args()
    try:
        import torch
        from bitsandbytes import functional as F
        from safetensors.torch import load_file, save_file
    except ImportError as e:
        raise Failure(f"{e}: run scripts/setup.sh (the project's Python environment)")
    x = load_file(args.input)["x"].float()
    packed, state = F.quantize_4bit(x, blocksize=args.blocksize, quant_type=args.type,
                                    compress_statistics=args.double)
    out = {
        "packed": packed.reshape(-1).contiguous(),
        "code": state.code.float().contiguous(),
        "dequantized": F.dequantize_4bit(packed, state).float().reshape(-1).contiguous(),
    }
    if args.double:
        out["qabsmax"] = state.absmax.reshape(-1).contiguous()
        out["absmax2"] = state.state2.absmax.float().reshape(-1).contiguous()
        out["offset"] = state.offset.float().reshape(1).contiguous()
        out["dynamic"] = state.state2.code.float().contiguous()
    else:
        out["absmax"] = state.absmax.float().reshape(-1).contiguous()
    if packed.dtype != torch.uint8:
        raise Failure(f"bitsandbytes packed into {packed.dtype}, expected uint8")
    save_file(out, args.output)
    return 0


if __name__ == "__main__":
    run(main, "bnb_quant.py")
