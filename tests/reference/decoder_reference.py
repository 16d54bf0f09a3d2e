#!/usr/bin/python3
"""Independent reference forward pass of the decoders studio-train implements.

LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM, written from the
Hugging Face transformers semantics with nothing but torch (Debian's python3-torch), json and
struct: config.json is read directly and .safetensors files are parsed by hand (one file, a
sharded index, or every *.safetensors in the folder).

    decoder_reference.py MODEL_DIR 1,2,3[,...] [--dtype float32|float64]
        prints {"logits": [[...], ...]}: one row per input id (positions 0..S-1), fp32 values
    decoder_reference.py --selftest
        builds tiny random models of each architecture with a throwaway writer, and checks the
        reader and the forward pass against properties that must hold; exit status 0 = pass
"""

import argparse
import json
import math
import os
import struct
import sys
import tempfile

import torch

# --------------------------------------------------------------------------- safetensors

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def read_safetensors(path):
    """{name: tensor}: an 8-byte little-endian header length, a JSON header, the raw data."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = _DTYPES[entry["dtype"]]
        raw = bytearray(data[base + begin:base + end])  # writable copy: frombuffer warns otherwise
        if len(raw) == 0:
            t = torch.empty(0, dtype=dtype)
        elif dtype == torch.bfloat16:  # frombuffer of bf16 is not in every torch: go via int16
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(entry["shape"])
    return out


def load_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = sorted(p for p in os.listdir(model_dir) if p.endswith(".safetensors"))
    if not files:
        raise SystemExit(f"{model_dir}: no .safetensors file")
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(model_dir, name)))
    return weights


# --------------------------------------------------------------------------- config

class Config:
    def __init__(self, cfg):
        self.arch = cfg["architectures"][0]
        if self.arch not in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                             "Qwen3ForCausalLM"):
            raise SystemExit(f"unsupported architecture {self.arch}")
        if cfg.get("hidden_act", "silu") != "silu":
            raise SystemExit(f"unsupported hidden_act {cfg['hidden_act']}")
        self.hidden = cfg["hidden_size"]
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or self.hidden // self.heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.max_pos = cfg.get("max_position_embeddings", 2048)
        self.tied = cfg.get("tie_word_embeddings", False)
        rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        self.theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
        self.rope = rope
        self.rope_type = rope.get("rope_type", rope.get("type", "default")) or "default"


# --------------------------------------------------------------------------- RoPE

def rope_inv_freq(c, seq_len):
    """(inverse frequencies [head_dim/2] in float64, cos/sin multiplier), per rope type."""
    d = c.head_dim
    exponents = torch.arange(0, d, 2, dtype=torch.float64) / d
    base_freq = 1.0 / (c.theta ** exponents)
    r, kind = c.rope, c.rope_type
    if kind == "default":
        return base_freq, 1.0
    if kind == "linear":  # positions divided by the factor
        return base_freq / r["factor"], 1.0
    if kind == "dynamic":  # NTK: the base grows once the sequence exceeds the trained length
        length = max(seq_len, c.max_pos)
        theta = c.theta * ((r["factor"] * length / c.max_pos) - (r["factor"] - 1)) ** (d / (d - 2))
        return 1.0 / (theta ** exponents), 1.0
    if kind == "llama3":
        return _llama3(base_freq, r), 1.0
    if kind == "yarn":
        return _yarn(base_freq, c)
    raise SystemExit(f"unsupported rope type {kind}")


def _llama3(freq, r):
    factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
    old = r["original_max_position_embeddings"]
    out = []
    for f in freq.tolist():
        wavelength = 2 * math.pi / f
        if wavelength < old / high:  # high frequencies: unchanged
            out.append(f)
        elif wavelength > old / low:  # low frequencies: interpolated by the factor
            out.append(f / factor)
        else:  # in between: a linear blend in old / wavelength
            s = (old / wavelength - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float64)


def _yarn(freq, c):
    r, d = c.rope, c.head_dim
    factor = r["factor"]
    context = r.get("original_max_position_embeddings") or c.max_pos

    def dim_for(rotations):  # the dimension whose frequency turns `rotations` times in context
        return d * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(c.theta))

    lo, hi = dim_for(r.get("beta_fast") or 32), dim_for(r.get("beta_slow") or 1)
    if r.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    if lo == hi:
        hi += 0.001
    out = []
    for i, f in enumerate(freq.tolist()):
        interpolate = min(max((i - lo) / (hi - lo), 0.0), 1.0)  # 0: keep, 1: divide by factor
        out.append(f / factor * interpolate + f * (1 - interpolate))

    def mscale(s, m=1.0):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    attn = r.get("attention_factor")
    if attn is None:
        if r.get("mscale") and r.get("mscale_all_dim"):
            attn = mscale(factor, r["mscale"]) / mscale(factor, r["mscale_all_dim"])
        else:
            attn = mscale(factor)
    return torch.tensor(out, dtype=torch.float64), attn


def rotate(x, positions, inv_freq, scale):
    """Rotates dimension i together with i + d/2 by angle position * inv_freq[i] (the
    "rotate_half" pairing), multiplying by `scale`; x is [heads, seq, d]."""
    half = x.shape[-1] // 2
    inv = inv_freq.to(torch.float32)  # HF keeps inv_freq and the angles in fp32
    angle = positions.to(torch.float32)[:, None] * inv[None, :]
    cos = (torch.cos(angle) * scale).to(x.dtype)
    sin = (torch.sin(angle) * scale).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


# --------------------------------------------------------------------------- the model

def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def linear(w, x, name):
    y = x @ w[name + ".weight"].t()
    bias = w.get(name + ".bias")
    return y if bias is None else y + bias


def attention(c, w, p, x, positions, inv_freq, scale):
    s = x.shape[0]
    q = linear(w, x, p + "q_proj").view(s, c.heads, c.head_dim).transpose(0, 1)
    k = linear(w, x, p + "k_proj").view(s, c.kv_heads, c.head_dim).transpose(0, 1)
    v = linear(w, x, p + "v_proj").view(s, c.kv_heads, c.head_dim).transpose(0, 1)
    if c.arch == "Qwen3ForCausalLM":  # per-head norms, before the rotation
        q = rms_norm(q, w[p + "q_norm.weight"], c.eps)
        k = rms_norm(k, w[p + "k_norm.weight"], c.eps)
    q, k = rotate(q, positions, inv_freq, scale), rotate(k, positions, inv_freq, scale)
    group = c.heads // c.kv_heads  # query head h reads key/value head h // group
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    scores = q @ k.transpose(1, 2) / math.sqrt(c.head_dim)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    out = (probs @ v).transpose(0, 1).reshape(s, c.heads * c.head_dim)
    return linear(w, out, p + "o_proj")


def forward(c, w, ids, dtype=torch.float32, positions=None):
    """Logits [S, vocab] for one sequence (at positions 0..S-1 unless given), in `dtype`."""
    w = {name: t.to(dtype) for name, t in w.items()}
    positions = torch.arange(len(ids)) if positions is None else torch.tensor(positions)
    inv_freq, scale = rope_inv_freq(c, int(positions.max()) + 1)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(c.layers):
        p = f"model.layers.{i}."
        x = x + attention(c, w, p + "self_attn.", rms_norm(x, w[p + "input_layernorm.weight"], c.eps),
                          positions, inv_freq, scale)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], c.eps)
        gate, up = linear(w, h, p + "mlp.gate_proj"), linear(w, h, p + "mlp.up_proj")
        x = x + linear(w, torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], c.eps)
    head = w["model.embed_tokens.weight"] if c.tied else w["lm_head.weight"]
    return x @ head.t()


def run(model_dir, ids, dtype):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = Config(json.load(f))
    return forward(c, load_weights(model_dir), ids, dtype)


# --------------------------------------------------------------------------- self-test

_NAMES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16", torch.float16: "F16"}


def write_safetensors(path, tensors):
    """A throwaway writer: header JSON padded to 8 bytes, tensors back to back."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def tiny_config(arch, **extra):
    cfg = {"architectures": [arch], "hidden_size": 16, "intermediate_size": 24,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 40, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False}
    cfg.update(extra)
    return cfg


def random_weights(cfg, gen):
    c = Config(cfg)
    h, i, q, kv = c.hidden, cfg["intermediate_size"], c.heads * c.head_dim, c.kv_heads * c.head_dim

    def rnd(*shape):
        return torch.randn(*shape, generator=gen) * 0.3

    w = {"model.embed_tokens.weight": rnd(cfg["vocab_size"], h), "model.norm.weight": 1 + rnd(h)}
    if not c.tied:
        w["lm_head.weight"] = rnd(cfg["vocab_size"], h)
    for layer in range(c.layers):
        p = f"model.layers.{layer}."
        for name, shape in (("q_proj", (q, h)), ("k_proj", (kv, h)), ("v_proj", (kv, h)), ("o_proj", (h, q))):
            w[p + "self_attn." + name + ".weight"] = rnd(*shape)
        if c.arch == "Qwen2ForCausalLM":
            for name, n in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
                w[p + "self_attn." + name + ".bias"] = rnd(n)
        if c.arch == "Qwen3ForCausalLM":
            w[p + "self_attn.q_norm.weight"] = 1 + rnd(c.head_dim)
            w[p + "self_attn.k_norm.weight"] = 1 + rnd(c.head_dim)
        for name, shape in (("gate_proj", (i, h)), ("up_proj", (i, h)), ("down_proj", (h, i))):
            w[p + "mlp." + name + ".weight"] = rnd(*shape)
        w[p + "input_layernorm.weight"] = 1 + rnd(h)
        w[p + "post_attention_layernorm.weight"] = 1 + rnd(h)
    return w


def save_model(folder, cfg, weights, shards=1):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = list(weights)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), weights)
        return
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for n in names[s::shards]}
        write_safetensors(os.path.join(folder, file), part)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


class SelfTest:
    def __init__(self):
        self.failures = 0
        self.passed = 0

    def check(self, ok, what):
        print(("PASS " if ok else "FAIL ") + what)
        if ok:
            self.passed += 1
        else:
            self.failures += 1

    def close(self, a, b, tol, what):
        err = (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)
        self.check(err <= tol, f"{what} (relative difference {err:.2e}, allowed {tol:.0e})")


def check_reader(t, tmp, gen):
    tensors = {"a": torch.randn(3, 5, generator=gen), "b": torch.randn(7, generator=gen).to(torch.bfloat16),
               "c": torch.randn(2, 2, generator=gen).double(), "d": torch.randn(4, generator=gen).half()}
    path = os.path.join(tmp, "x.safetensors")
    write_safetensors(path, tensors)
    back = read_safetensors(path)
    t.check(all(back[n].dtype == v.dtype and torch.equal(back[n], v) for n, v in tensors.items()),
            "safetensors round trip (F32, BF16, F64, F16)")


def check_rope(t, gen):
    """rotate() against complex multiplication: pair (x_i, x_{i+d/2}) as x_i + i x_{i+d/2}."""
    c = Config(tiny_config("LlamaForCausalLM"))
    inv, scale = rope_inv_freq(c, 8)
    x = torch.randn(2, 8, c.head_dim, generator=gen, dtype=torch.float64)
    pos = torch.tensor([0, 1, 2, 3, 40, 41, 42, 43])
    half = c.head_dim // 2
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(
        torch.ones(8, half, dtype=torch.float64), pos[:, None].double() * inv.float().double()[None, :])
    want = torch.cat([z.real, z.imag], dim=-1)
    t.close(rotate(x, pos, inv, scale), want, 1e-6, "rotate_half pairing = complex rotation")
    # yarn with factor 4 scales cos/sin by 0.1 ln 4 + 1.
    c = Config(tiny_config("LlamaForCausalLM", rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                              "original_max_position_embeddings": 16}))
    _, scale = rope_inv_freq(c, 8)
    t.check(abs(scale - (0.1 * math.log(4) + 1)) < 1e-15, "yarn attention factor")


def check_model(t, tmp, arch, extra, gen):
    cfg = tiny_config(arch, **extra)
    weights = random_weights(cfg, gen)
    folder = os.path.join(tmp, arch + str(len(extra)))
    save_model(folder, cfg, weights)
    ids = [3, 17, 5, 39, 0, 22, 8]
    logits = run(folder, ids, torch.float64)
    label = f"{arch} {json.dumps(extra) if extra else ''}".strip()
    t.check(tuple(logits.shape) == (len(ids), 40) and bool(torch.isfinite(logits).all()), label + ": shape")
    # Causality: changing the last tokens leaves the earlier rows alone.
    other = run(folder, ids[:4] + [1, 2, 3], torch.float64)
    t.close(other[:4], logits[:4], 1e-12, label + ": causal")
    t.check((other[4:] - logits[4:]).abs().max().item() > 1e-6, label + ": later tokens matter")
    # RoPE makes attention depend on relative positions only: shifting every position leaves
    # the logits alone (up to the fp32 angles HF uses), spreading them apart does not.
    c, w = Config(cfg), load_weights(folder)
    shifted = forward(c, w, ids, torch.float64, [p + 9 for p in range(len(ids))])
    t.close(shifted, logits, 1e-6, label + ": shift invariance")
    spread = forward(c, w, ids, torch.float64, [3 * p for p in range(len(ids))])
    t.check((spread - logits).abs().max().item() > 1e-6, label + ": relative positions matter")
    # Sharded and bf16 copies.
    save_model(folder + "-sharded", cfg, weights, shards=3)
    t.close(run(folder + "-sharded", ids, torch.float64), logits, 0, label + ": sharded index")
    save_model(folder + "-bf16", cfg, {n: v.to(torch.bfloat16) for n, v in weights.items()})
    t.close(run(folder + "-bf16", ids, torch.float32), logits, 0.05, label + ": bf16 weights")
    return weights, cfg, logits, ids, folder


def check_tied(t, tmp, gen):
    cfg = tiny_config("Qwen2ForCausalLM", tie_word_embeddings=True)
    weights = random_weights(cfg, gen)
    save_model(os.path.join(tmp, "tied"), cfg, weights)
    untied = dict(weights, **{"lm_head.weight": weights["model.embed_tokens.weight"].clone()})
    save_model(os.path.join(tmp, "untied"), dict(cfg, tie_word_embeddings=False), untied)
    ids = [1, 2, 3, 4]
    t.close(run(os.path.join(tmp, "tied"), ids, torch.float64),
            run(os.path.join(tmp, "untied"), ids, torch.float64), 1e-15, "tied = untied with lm_head copied")


def check_gqa(t, tmp, gen):
    """Grouped-query attention equals full attention with each k/v head duplicated."""
    cfg = tiny_config("LlamaForCausalLM")
    w = random_weights(cfg, gen)
    full_cfg = dict(cfg, num_key_value_heads=4)
    full = dict(w)
    hd = 4
    for layer in range(2):
        for name in ("k_proj", "v_proj"):
            key = f"model.layers.{layer}.self_attn.{name}.weight"
            full[key] = w[key].view(2, hd, 16).repeat_interleave(2, dim=0).reshape(16, 16)
    save_model(os.path.join(tmp, "gqa"), cfg, w)
    save_model(os.path.join(tmp, "mha"), full_cfg, full)
    ids = [9, 8, 7, 6, 5]
    t.close(run(os.path.join(tmp, "gqa"), ids, torch.float64), run(os.path.join(tmp, "mha"), ids, torch.float64),
            1e-12, "GQA = MHA with repeated k/v heads")


def selftest():
    t = SelfTest()
    gen = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        check_reader(t, tmp, gen)
        check_rope(t, gen)
        for arch, extra in (("LlamaForCausalLM", {}),
                            ("LlamaForCausalLM", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                   "original_max_position_embeddings": 16}}),
                            ("MistralForCausalLM", {"sliding_window": 4096}),
                            ("Qwen2ForCausalLM", {"rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                   "original_max_position_embeddings": 16}}),
                            ("Qwen3ForCausalLM", {"head_dim": 8})):
            check_model(t, tmp, arch, extra, gen)
        check_tied(t, tmp, gen)
        check_gqa(t, tmp, gen)
        # The command line itself, as the integration test will drive it.
        cfg = tiny_config("Qwen3ForCausalLM", head_dim=8)
        folder = os.path.join(tmp, "cli")
        save_model(folder, cfg, random_weights(cfg, gen))
        out = json.loads(json.dumps({"logits": run(folder, [1, 2], torch.float32).tolist()}))
        t.check(len(out["logits"]) == 2 and len(out["logits"][0]) == 40, "JSON output shape")
    print(f"{t.passed} passed, {t.failures} failed")
    return 1 if t.failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", nargs="?")
    parser.add_argument("ids", nargs="?", help="comma-separated token ids")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--selftest", action="store_true")
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    if not args.model_dir or not args.ids:
        parser.error("MODEL_DIR and IDS are required (or --selftest)")
    ids = [int(x) for x in args.ids.split(",") if x.strip()]
    logits = run(args.model_dir, ids, getattr(torch, args.dtype))
    json.dump({"logits": logits.float().tolist()}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
