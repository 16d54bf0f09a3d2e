"""The train-step benchmark's reference: Hugging Face transformers' own model and training step.

The model is transformers' class for the folder's config.json (Qwen2ForCausalLM for the demo model)
loaded with from_pretrained (local files only, fp32, attn_implementation="sdpa"), in train mode.
Each step is what transformers' Trainer does for it, on the same deterministic token batches
bench_train_step times: forward with labels= (transformers' ForCausalLMLoss: labels shifted by
one, the sum of the token losses divided by num_items_in_batch, the number of target tokens, as the
Trainer passes it), backward, clip_grad_norm_ to 1.0, torch.optim.AdamW with the Trainer's two
parameter groups (Trainer.get_decay_parameter_names: no decay on norms and biases) and the demo's
lr 3e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, then zero_grad.

    $STUDIO_PYTHON hf_reference.py [--weights DIR | --config CONFIG.json --seed N] [--case BxS]...
                                   [--warmup W] [--steps N] [--threads T] [--adamw fused|for-loop]
                                   [--device cpu|cuda] [--dtype fp32|bf16|bf16-master|bf16-pure]
                                   [--gradient-checkpointing] [--liger]

--weights is a Hugging Face folder (config.json + model.safetensors; bench_train_step --save-model
writes the engine's initial weights there), so the losses of the two implementations can be
compared step by step. Without it the model is built from --config and initialised by transformers
(torch.manual_seed(--seed)): the timings still compare, the losses do not. --adamw picks
torch.optim.AdamW's implementation: "fused" (the default; what the Trainer's default optimizer,
adamw_torch_fused, uses with torch >= 2.8) or "for-loop" (what the engine's LibTorch AdamW does).
--dtype bf16 is the Trainer's bf16=True (autocast over fp32 weights); bf16-master is DeepSpeed's
bf16 mode, the engine's (bf16 weights, clipping and AdamW on fp32 masters: Bf16Masters);
bf16-pure keeps weights, gradients and AdamW's states in bf16 (LLaMA-Factory's pure_bf16), the
scheme that loses the most to rounding.
--gradient-checkpointing: the Trainer's gradient_checkpointing=True (non-reentrant, as
LLaMA-Factory sets it). --liger: Liger Kernel's fused kernels applied to the model as the
Trainer's use_liger_kernel (LLaMA-Factory's enable_liger_kernel) does: RMSNorm, SwiGLU, RoPE and
the fused linear cross-entropy; the row is impl=transformers+liger, or error=unavailable when the
liger-kernel package does not import.
Prints one `RESULT key=value ...` line per case, in bench_train_step's format; a case that runs
out of memory prints error=oom and tokens_per_s=0.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, Trainer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# bench_train_step's step_config(): resources/demo/sft_demo.yaml's learning rate and decay,
# LLaMA-Factory's max_grad_norm, RunConfig's (and the Trainer's) default betas and epsilon.
LR, WEIGHT_DECAY, MAX_NORM = 3e-3, 0.01, 1.0
BETAS, EPS = (0.9, 0.999), 1e-8


def loaded_blas():
    """The BLAS torch's matmuls run on: a libblas* this process loaded (from /proc/self/maps),
    else the one built into libtorch_cpu (the wheel's MKL: torch.__config__'s BLAS_INFO).

    numpy's bundled OpenBLAS and CUDA's cuBLAS are loaded too but do not run torch's CPU matmuls.
    """
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line[line.find("/"):].strip() if "/" in line else ""
                name = os.path.basename(path)
                if "blas" in name and "cublas" not in name and "numpy" not in path:
                    return path
    except OSError:
        pass
    for setting in torch.__config__.show().replace(",", " ").split():
        if setting.startswith("BLAS_INFO="):
            return setting.split("=", 1)[1] + "(in-libtorch_cpu)"
    return "unknown"


def token(k, r, p, vocab):
    """bench_train_step's token(): the same 32-bit multiplicative hash of step, row and position."""
    h = (k * 1000003 + r * 10007 + p) & 0xFFFFFFFF
    h = (h * 2654435761) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 2246822519) & 0xFFFFFFFF
    h ^= h >> 13
    return h % vocab


def make_batch(k, batch, seq, vocab):
    """Step k's input_ids and position ids (bench_train_step's make_step_batch). The labels are the
    input_ids themselves: transformers shifts them, so position p predicts token p + 1 and the last
    position predicts nothing, which are the engine's targets. num_items_in_batch is the engine's
    valid_tokens, B x (S - 1)."""
    ids = torch.tensor([[token(k, r, p, vocab) for p in range(seq)] for r in range(batch)])
    positions = torch.arange(seq).expand(batch, seq).contiguous()
    return ids, positions, torch.tensor(batch * (seq - 1))


def load_model(args):
    """A fresh model in train mode: the --weights folder, or --config initialised by transformers."""
    common = {"dtype": torch.float32, "attn_implementation": "sdpa"}
    if args.weights:
        model, info = AutoModelForCausalLM.from_pretrained(
            args.weights, local_files_only=True, output_loading_info=True, **common)
        # A parameter left at its random initialisation would make the losses differ for no reason.
        problems = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched keys
        if problems:
            raise SystemExit(f"hf_reference.py: {args.weights} does not load cleanly: {problems}")
    else:
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.config), **common)
    if model.config.tie_word_embeddings and model.get_output_embeddings().weight is not \
            model.get_input_embeddings().weight:
        raise SystemExit("hf_reference.py: tie_word_embeddings is set but lm_head is not tied")
    model = model.to(args.device).train()
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.liger:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
        _apply_liger_kernel_to_instance(model=model)
    return model


def make_optimizer(model, adamw, masters=None):
    """transformers' Trainer.create_optimizer: weight decay on everything but norms and biases.
    With masters (a name -> fp32 tensor map, --dtype bf16-master) AdamW updates those instead."""
    decay = set(Trainer.get_decay_parameter_names(None, model))  # uses no Trainer state
    trained = [(n, masters[n] if masters else p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in trained if n in decay], "weight_decay": WEIGHT_DECAY},
        {"params": [p for n, p in trained if n not in decay], "weight_decay": 0.0},
    ]
    kind = {"fused": {"fused": True}, "for-loop": {"foreach": False, "fused": False}}[adamw]
    return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, **kind)


class Bf16Masters:
    """--dtype bf16-master: DeepSpeed's bf16 mode, which is the engine's. The model holds bf16
    weights and computes in bf16 (no autocast); an fp32 copy of each trained weight, made from the
    bf16 weight, takes the gradient (converted to fp32), the clipping and AdamW, and after each step
    is rounded back into the bf16 weight. The Trainer's bf16=True (--dtype bf16) instead keeps fp32
    weights and rounds them to bf16 inside every autocast matmul."""

    def __init__(self, model):
        model.to(torch.bfloat16)
        self.pairs = [(n, p, p.detach().float().clone()) for n, p in model.named_parameters()
                      if p.requires_grad]
        self.masters = {n: m for n, _, m in self.pairs}

    def gradients_to_masters(self):
        for _, p, m in self.pairs:
            m.grad = None if p.grad is None else p.grad.float()

    def masters_to_weights(self):
        with torch.no_grad():
            for _, p, m in self.pairs:
                p.copy_(m)  # round to nearest even, as the engine's copy_ into its bf16 weights
                m.grad = None


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def train_step(model, opt, batch, device, dtype, masters=None):
    """One step as the Trainer runs it: with --dtype bf16 its bf16=True mixed precision (autocast
    around the forward, fp32 weights, gradients and AdamW); with bf16-master (masters given) bf16
    weights and compute, clipping and AdamW on the fp32 masters (Bf16Masters)."""
    ids, positions, num_items = batch
    t0 = time.perf_counter()
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=dtype == "bf16"):
        loss = model(input_ids=ids, position_ids=positions, labels=ids, use_cache=False,
                     num_items_in_batch=num_items).loss
    sync(device)
    t1 = time.perf_counter()
    loss.backward()
    sync(device)
    t2 = time.perf_counter()
    if masters:
        masters.gradients_to_masters()
        torch.nn.utils.clip_grad_norm_(list(masters.masters.values()), MAX_NORM)
        opt.step()
        masters.masters_to_weights()
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        opt.step()
    model.zero_grad(set_to_none=True)
    sync(device)
    t3 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, loss.item()


def impl_name(args):
    return "transformers+liger" if args.liger else "transformers"


def failed_case(args, batch, seq, error):
    print(f"RESULT impl={impl_name(args)} torch={torch.__version__} transformers={transformers.__version__} "
          f"adamw={args.adamw} case={batch}x{seq} device={args.device} dtype={args.dtype} error={error} "
          f"tokens_per_s=0 step_ms=0 forward_ms=0 backward_ms=0 optimizer_ms=0 cpu_s_per_step=0 "
          f"peak_mib=0 loss_first=nan loss_last=nan", flush=True)


def run_case(args, batch, seq):
    try:
        timed_case(args, batch, seq)
    except torch.OutOfMemoryError as e:
        print(f"hf_reference.py: {batch}x{seq}: out of memory: {str(e)[:300]}", file=sys.stderr)
        failed_case(args, batch, seq, "oom")
        torch.cuda.empty_cache()


def timed_case(args, batch, seq):
    model = load_model(args)
    masters = Bf16Masters(model) if args.dtype == "bf16-master" else None
    if args.dtype == "bf16-pure":
        model.to(torch.bfloat16)  # weights, gradients and AdamW's states all bf16
    opt = make_optimizer(model, args.adamw, masters.masters if masters else None)
    vocab = model.config.vocab_size
    batches = [tuple(t.to(args.device) for t in make_batch(k, batch, seq, vocab))
               for k in range(args.warmup + args.steps)]
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step_ms, fwd, bwd, optim, losses = [], [], [], [], []
    cpu0 = 0.0
    for k, b in enumerate(batches):
        if k == args.warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        f, g, o, loss = train_step(model, opt, b, args.device, args.dtype, masters)
        ms = (time.perf_counter() - t0) * 1e3
        losses.append(loss)
        if k >= args.warmup:
            step_ms.append(ms)
            fwd.append(f)
            bwd.append(g)
            optim.append(o)
    cpu = (time.process_time() - cpu0) / args.steps
    med = statistics.median(step_ms)
    peak = torch.cuda.max_memory_allocated() / 2**20 if args.device == "cuda" else 0.0
    blas = "cuda" if args.device == "cuda" else loaded_blas()
    print(f"RESULT impl={impl_name(args)} torch={torch.__version__} transformers={transformers.__version__} "
          f"adamw={args.adamw} blas={blas} case={batch}x{seq} device={args.device} dtype={args.dtype} "
          f"peak_mib={peak:.1f} threads={torch.get_num_threads()} "
          f"warmup={args.warmup} steps={args.steps} tokens_per_s={batch * seq / (med / 1e3):.1f} "
          f"step_ms={med:.2f} forward_ms={statistics.median(fwd):.2f} "
          f"backward_ms={statistics.median(bwd):.2f} optimizer_ms={statistics.median(optim):.2f} "
          f"cpu_s_per_step={cpu:.4f} loss_first={losses[0]:.6f} loss_last={losses[-1]:.6f} "
          f"losses={','.join(f'{x:.6f}' for x in losses)}",
          flush=True)


def parse_case(text):
    try:
        b, s = (int(v) for v in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"BATCHxSEQ (e.g. 16x96), got '{text}'")
    if b < 1 or s < 2:
        raise argparse.ArgumentTypeError(f"batch >= 1 and seq >= 2, got '{text}'")
    return b, s


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", help="Hugging Face folder with the initial weights (and config.json)")
    parser.add_argument("--config", default=os.path.join(ROOT, "resources", "demo", "model", "config.json"),
                        help="without --weights: the config.json to build the model from")
    parser.add_argument("--seed", type=int, default=7, help="without --weights: torch.manual_seed")
    parser.add_argument("--case", type=parse_case, action="append", help="BATCHxSEQ, repeatable")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--adamw", choices=("fused", "for-loop"), default="fused",
                        help="torch.optim.AdamW's implementation (default: fused, as the Trainer's)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "bf16-master", "bf16-pure"), default="fp32",
                        help="bf16: the Trainer's bf16=True (autocast over fp32 weights); "
                             "bf16-master: bf16 weights with fp32 masters (DeepSpeed's bf16, the engine's); "
                             "bf16-pure: everything bf16 (LLaMA-Factory's pure_bf16)")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="the Trainer's gradient_checkpointing=True (non-reentrant)")
    parser.add_argument("--liger", action="store_true",
                        help="Liger Kernel's fused kernels on the model (use_liger_kernel)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no usable CUDA device")
    if args.warmup < 0 or args.steps < 1:
        parser.error("--warmup >= 0 and --steps >= 1")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()  # "Loading weights" bars on every case
    if args.liger:
        try:
            import liger_kernel.transformers  # noqa: F401
        except Exception as e:  # not installed, or no Triton for this device
            print(f"hf_reference.py: --liger: liger-kernel does not import here: {e}", file=sys.stderr)
            for batch, seq in args.case or [(16, 96), (1, 1024)]:
                failed_case(args, batch, seq, "unavailable")
            return 0
    config = AutoConfig.from_pretrained(args.weights or args.config, local_files_only=True)
    print(f"# hf_reference: transformers {transformers.__version__} {config.architectures[0]} "
          f"(sdpa), {config.num_hidden_layers} layers, hidden {config.hidden_size}, vocab "
          f"{config.vocab_size}, {args.dtype}, {'weights from ' + args.weights if args.weights else 'seed ' + str(args.seed)}, "
          f"AdamW {args.adamw}, torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    for batch, seq in args.case or [(16, 96), (1, 1024)]:
        run_case(args, batch, seq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
