"""A model folder quantized ON DISK by bitsandbytes, the way users get one: transformers loads an
unquantized folder with BitsAndBytesConfig(load_in_4bit=True, ...) and save_pretrained writes it
(packed uint8 weights plus absmax / quant_map / nested_* / quant_state.bitsandbytes__* entries and
a quantization_config in config.json). Written against transformers 5.24 and bitsandbytes 0.50.2
(scripts/python-requirements.txt), on the CPU.

    python bnb_quantize_model.py --model DIR --out OUT_DIR --type nf4|fp4 [--double]
                                 [--storage uint8|bfloat16|float16|float32] [--skip NAME ...]
                                 [--batch BATCH.safetensors --logits-out LOGITS.safetensors]

The tokenizer files of DIR are copied beside the weights (a training run reads them). With
--batch, OUT_DIR is loaded again by transformers (fp32 compute, eager attention) and the logits of
BATCH's input_ids go to LOGITS (`logits` [B,S,V] float32): what the quantized folder computes in
transformers' own hands. Any failure exits 1 with the reason on stderr (reference_main's contract).
"""

import argparse
import glob
import os
import shutil

from reference_main import Failure, offline_cpu_environment, run

offline_cpu_environment()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--type", choices=["nf4", "fp4"], default="nf4")
    parser.add_argument("--double", action="store_true")
    parser.add_argument("--storage", default="uint8", choices=["uint8", "bfloat16", "float16", "float32"])
    parser.add_argument("--skip", nargs="*", default=None, help="llm_int8_skip_modules")
    parser.add_argument("--batch")
    parser.add_argument("--logits-out")
    args = parser.parse_args()
    if bool(args.batch) != bool(args.logits_out):
        raise Failure("--batch and --logits-out go together")
    try:
        import torch
        import transformers
        from safetensors.torch import load_file, save_file
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    except ImportError as e:
        raise Failure(f"{e}: run scripts/setup.sh (the project's Python environment)")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=args.type,
                               bnb_4bit_use_double_quant=args.double,
                               bnb_4bit_compute_dtype=torch.float32,
                               bnb_4bit_quant_storage=getattr(torch, args.storage),
                               llm_int8_skip_modules=args.skip)
    model = AutoModelForCausalLM.from_pretrained(args.model, quantization_config=quant, device_map="cpu",
                                                 dtype=torch.float32, local_files_only=True)
    quantized = [n for n, m in model.named_modules() if type(m).__name__ == "Linear4bit"]
    if not quantized:
        raise Failure(f"{args.model}: bitsandbytes quantized no linear layer")
    model.save_pretrained(args.out)
    for pattern in ("tokenizer*", "special_tokens_map.json", "vocab.json", "merges.txt", "*.jinja",
                    "chat_template*"):
        for f in glob.glob(os.path.join(args.model, pattern)):
            shutil.copy(f, args.out)
    if args.batch:
        again, info = AutoModelForCausalLM.from_pretrained(
            args.out, device_map="cpu", dtype=torch.float32, attn_implementation="eager",
            local_files_only=True, output_loading_info=True)
        bad = {k: sorted(map(str, v))[:8] for k, v in info.items() if v}
        if bad:
            raise Failure(f"{args.out}: incomplete load: {bad}")
        # bitsandbytes repacks a 4-bit weight for its CPU gemm on AVX512-BF16 machines in eval
        # mode, which asserts out_features % 32 == 0 (tiny test models fail it); the plain path
        # (dequantize, then matmul in the compute dtype) is the same arithmetic on every machine.
        for m in again.modules():
            if hasattr(m, "support_avx512bf16_for_cpu"):
                m.support_avx512bf16_for_cpu = False
        ids = load_file(args.batch)["input_ids"]
        with torch.no_grad():
            logits = again(input_ids=ids, use_cache=False).logits.float().contiguous()
        save_file({"logits": logits}, args.logits_out)
    return 0


if __name__ == "__main__":
    run(main, "bnb_quantize_model.py")
