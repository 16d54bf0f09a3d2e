#!/usr/bin/python3
"""The train-step benchmark's reference: the demo model and step in plain eager PyTorch.

A Qwen2-style decoder written as ordinary torch.nn modules, the way Hugging Face's "eager"
attention path computes it (embedding, RMSNorm, rotate-half RoPE, grouped-query attention with
q/k/v biases through matmul + causal mask + softmax, SwiGLU MLP, tied or untied LM head as
config.json says), trained by the same step bench_train_step times: full-vocabulary logits and
F.cross_entropy (sum over the valid targets / their count), backward, clip_grad_norm_ to 1.0,
torch.optim.AdamW with transformers' two parameter groups (no decay on norms and biases), on the
same deterministic token batches.

    eager_reference.py [--config CONFIG.json] [--weights DIR] [--case BxS]... [--warmup W]
                       [--steps N] [--threads T] [--seed N]

--weights loads a Hugging Face folder (bench_train_step --save-model writes the engine's initial
weights there), so the losses of the two implementations can be compared step by step; without
it the weights are drawn here (HF's init, torch.manual_seed). Prints one `RESULT key=value ...`
line per case, in bench_train_step's format.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The project's own safetensors reader (tests/reference), shared with the decoder tests.
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from decoder_reference import load_weights  # noqa: E402

# resources/demo/sft_demo.yaml's learning rate and decay; LLaMA-Factory's max_grad_norm.
LR, WEIGHT_DECAY, MAX_NORM = 3e-3, 0.01, 1.0
IGNORE = -100


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c["heads"], c["kv_heads"], c["head_dim"]
        h, q, kv = c["hidden_size"], self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.q_proj = nn.Linear(h, q, bias=c["qkv_bias"])
        self.k_proj = nn.Linear(h, kv, bias=c["qkv_bias"])
        self.v_proj = nn.Linear(h, kv, bias=c["qkv_bias"])
        self.o_proj = nn.Linear(q, h, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads  # query head h reads key/value head h // group
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim) + mask
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj((probs @ v).transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["eps"])

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["eps"])


class CausalLM(nn.Module):
    """Module names are Hugging Face's, so state_dict() is the checkpoint's."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Decoder(c)
        self.lm_head = None if c["tied"] else nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        d = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["theta"] ** (torch.arange(0, d, 2).float() / d)),
                             persistent=False)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, ids, positions):
        s = ids.shape[1]
        angles = positions[..., None].float() * self.inv_freq  # [B, S, D/2]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, S, D]
        mask = torch.full((s, s), float("-inf")).triu(1)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x) @ self.head_weight().t()

    def init_weights(self, std):
        """HF's _init_weights: linear and embedding weights ~ N(0, std), biases 0, norms 1."""
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.normal_(0.0, std)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    m.bias.zero_()


def read_config(path):
    with open(path) as f:
        cfg = json.load(f)
    if cfg["architectures"][0] != "Qwen2ForCausalLM" or cfg.get("rope_scaling"):
        raise SystemExit(f"{path}: the eager reference implements Qwen2 without rope_scaling")
    heads = cfg["num_attention_heads"]
    return {
        "hidden_size": cfg["hidden_size"], "intermediate_size": cfg["intermediate_size"],
        "layers": cfg["num_hidden_layers"], "heads": heads,
        "kv_heads": cfg.get("num_key_value_heads") or heads,
        "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // heads,
        "vocab_size": cfg["vocab_size"], "eps": cfg.get("rms_norm_eps", 1e-6),
        "theta": cfg.get("rope_theta", 10000.0), "tied": cfg.get("tie_word_embeddings", False),
        "qkv_bias": True, "std": cfg.get("initializer_range", 0.02),
    }


def loaded_blas():
    """The BLAS library this process loaded (what the matmuls run on), from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line[line.find("/"):].strip() if "/" in line else ""
                if "blas" in os.path.basename(path):
                    return path
    except OSError:
        pass
    return "unknown"


def token(k, r, p, vocab):
    """bench_train_step's token(): the same 32-bit multiplicative hash."""
    h = (k * 1000003 + r * 10007 + p) & 0xFFFFFFFF
    h = (h * 2654435761) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 2246822519) & 0xFFFFFFFF
    h ^= h >> 13
    return h % vocab


def make_batch(k, batch, seq, vocab):
    ids = torch.tensor([[token(k, r, p, vocab) for p in range(seq)] for r in range(batch)])
    targets = torch.full_like(ids, IGNORE)
    targets[:, :-1] = ids[:, 1:]
    positions = torch.arange(seq).expand(batch, seq)
    return ids, targets, positions


def make_optimizer(model):
    """transformers' Trainer: weight decay on everything but norm weights and biases."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith(".bias") or "norm" in name else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=LR, betas=(0.9, 0.999), eps=1e-8)


def train_step(model, opt, batch):
    ids, targets, positions = batch
    t0 = time.perf_counter()
    logits = model(ids, positions)
    valid = int((targets != IGNORE).sum())
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE, reduction="sum") / valid
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
    opt.step()
    opt.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, loss.item()


def run_case(args, c, batch, seq):
    model = CausalLM(c)
    if args.weights:
        model.load_state_dict(load_weights(args.weights), strict=True)
    else:
        torch.manual_seed(args.seed)
        model.init_weights(c["std"])
    opt = make_optimizer(model)
    batches = [make_batch(k, batch, seq, c["vocab_size"]) for k in range(args.warmup + args.steps)]
    step_ms, fwd, bwd, optim, losses = [], [], [], [], []
    cpu0 = 0.0
    for k, b in enumerate(batches):
        if k == args.warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        f, g, o, loss = train_step(model, opt, b)
        ms = (time.perf_counter() - t0) * 1e3
        losses.append(loss)
        if k >= args.warmup:
            step_ms.append(ms)
            fwd.append(f)
            bwd.append(g)
            optim.append(o)
    cpu = (time.process_time() - cpu0) / args.steps
    med = statistics.median(step_ms)
    print(f"RESULT impl=eager torch={torch.__version__} blas={loaded_blas()} case={batch}x{seq} threads={torch.get_num_threads()} "
          f"warmup={args.warmup} steps={args.steps} tokens_per_s={batch * seq / (med / 1e3):.1f} "
          f"step_ms={med:.2f} forward_ms={statistics.median(fwd):.2f} "
          f"backward_ms={statistics.median(bwd):.2f} optimizer_ms={statistics.median(optim):.2f} "
          f"cpu_s_per_step={cpu:.4f} loss_first={losses[0]:.6f} loss_last={losses[-1]:.6f}",
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
    parser.add_argument("--config", default=os.path.join(ROOT, "resources", "demo", "model", "config.json"))
    parser.add_argument("--weights", help="Hugging Face folder with the initial weights")
    parser.add_argument("--case", type=parse_case, action="append", help="BATCHxSEQ, repeatable")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.warmup < 0 or args.steps < 1:
        parser.error("--warmup >= 0 and --steps >= 1")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    c = read_config(args.config)
    print(f"# eager_reference: Qwen2ForCausalLM, {c['layers']} layers, hidden {c['hidden_size']}, "
          f"vocab {c['vocab_size']}, fp32, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for batch, seq in args.case or [(16, 96), (1, 1024)]:
        run_case(args, c, batch, seq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
