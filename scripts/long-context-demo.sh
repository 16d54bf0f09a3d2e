#!/usr/bin/env bash
# The long-sequence demonstration on the CPU (docs/LONG_CONTEXT.md, "The CPU demonstration"):
# a small GQA model (hidden 64, 4 query heads over 2 K/V heads, 2 layers) trained on one
# sequence of TOKENS tokens (131072 by default) split over 4 worker processes (zigzag-ring
# SP=4, Gloo) with every long-sequence option on: the fused LM head and loss, checkpointed
# layers with their inputs offloaded to host memory, the tiled MLP, and ZeRO-3 with the
# optimizer and parameters offloaded. It prints, per rank, the measured peak ("device side":
# what a GPU would hold) next to the estimator's total for the same run, and then checks the
# same options at EQUIV_TOKENS tokens (8192) against one process (SP=1): equal step losses.
#
#   scripts/long-context-demo.sh [OUT_DIR]      (after scripts/build.sh; OUT_DIR: build/long-context-demo)
#   TOKENS=32768 STEPS=2 scripts/long-context-demo.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STUDIO_BUILD_DIR:-$root/build}
bin=$build/app/studio-train
out=${1:-$build/long-context-demo}
tokens=${TOKENS:-131072}
equiv_tokens=${EQUIV_TOKENS:-8192}
steps=${STEPS:-2}
[ -x "$bin" ] || { echo "long-context-demo: $bin is missing: run scripts/build.sh first" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/data" "$out/shape"

# The model: the demo model's tokenizer and vocabulary, a smaller body, positions for the run.
cp "$root/resources/demo/model/tokenizer.json" "$root/resources/demo/model/tokenizer_config.json" "$out/shape/"
cat >"$out/shape/config.json" <<EOF
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
 "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4288,
 "max_position_embeddings": $((tokens > equiv_tokens ? tokens : equiv_tokens)), "rms_norm_eps": 1e-06,
 "rope_theta": 1000000.0, "tie_word_embeddings": true, "initializer_range": 0.02,
 "bos_token_id": 4256, "eos_token_id": 4258, "torch_dtype": "float32"}
EOF
"$bin" init-model --config "$out/shape/config.json" --out "$out/model" --seed 11 >/dev/null

# One SFT sample per length whose answer is longer than the cutoff: every position a target.
python3 - "$out/data" "$tokens" "$equiv_tokens" <<'EOF'
import json, random, sys
out, lengths = sys.argv[1], [int(a) for a in sys.argv[2:]]
words = ("alpha beta gamma delta river stone cloud paper seven green table light music "
         "north window garden silver number orange market winter").split()
info = {}
for n in lengths:
    rng = random.Random(n)
    rows = [{"instruction": "Continue the list.", "input": "",
             "output": " ".join(rng.choice(words) for _ in range(n))} for _ in range(4)]
    json.dump(rows, open(f"{out}/long_{n}.json", "w"))
    info[f"long_{n}"] = {"file_name": f"long_{n}.json"}
json.dump(info, open(f"{out}/dataset_info.json", "w"))
EOF

config() {  # config NAME CUTOFF SP
  cat >"$out/$1.yaml" <<EOF
model_name_or_path: $out/model
stage: sft
do_train: true
finetuning_type: full
dataset: long_$2
dataset_dir: $out/data
template: qwen
cutoff_len: $2
output_dir: $out/$1
overwrite_output_dir: true
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
learning_rate: 1.0e-3
max_steps: $steps
logging_steps: 1
save_steps: 1000000
seed: 7
sequence_parallel_size: $3
sequence_parallel_mode: zigzag-ring
gradient_checkpointing: true
offload_activations: true
tiled_mlp: true
zero_stage: 3
offload_optimizer: true
offload_param: true
EOF
  echo "$out/$1.yaml"
}

echo "== estimate: $tokens tokens, SP=4 over 4 processes, every long-sequence option on"
cfg=$(config long "$tokens" 4)
"$bin" estimate "$cfg" --nproc 4 --cpu --json >"$out/estimate.json"
"$bin" estimate "$cfg" --nproc 4 --cpu 2>/dev/null | sed -n '/^Memory per GPU/,/^Notes/p'

echo "== training it: $steps steps (on 2 cores this takes a while)"
start=$(date +%s)
"$bin" train "$cfg" --nproc 4 2>"$out/long.log" >/dev/null || { tail -20 "$out/long.log"; exit 1; }
echo "   done in $(( $(date +%s) - start )) s"

python3 - "$out/estimate.json" "$out/long/events.jsonl" <<'EOF'
import json, sys
est = json.load(open(sys.argv[1]))
steps = [json.loads(l) for l in open(sys.argv[2]) if '"event":"step"' in l]
mib = 1024 * 1024
total, activations = est["total"] / mib, est["bytes"]["activations"] / mib
print("   losses: " + ", ".join("%.4f" % s["loss"] for s in steps))
print(f"   estimate per rank: total {total:.1f} MiB (activations {activations:.1f}, logits "
      f"{est['bytes']['logits'] / mib:.1f}, SP buffers {est['bytes']['sp_buffers'] / mib:.1f}); "
      f"host: {(est['offloaded_bytes'] + est['host_activation_bytes']) / mib:.1f} MiB")
peak = {}
for s in steps:
    for g in s.get("gpus", []):
        peak[g["rank"]] = max(peak.get(g["rank"], 0), g.get("peak_mib") or 0)
print("   rank | measured peak (device side) | estimate | measured / estimate")
for r in sorted(peak):
    print(f"   {r:4d} | {peak[r]:10.1f} MiB | {total:8.1f} MiB | {peak[r] / total:.3f}")
EOF

echo "== SP=1 equivalence at $equiv_tokens tokens, the same options"
for sp in 1 4; do
  cfg=$(config "equiv-sp$sp" "$equiv_tokens" "$sp")
  "$bin" train "$cfg" --nproc "$sp" 2>"$out/equiv-sp$sp.log" >/dev/null || { tail -20 "$out/equiv-sp$sp.log"; exit 1; }
done
python3 - "$out/equiv-sp1/events.jsonl" "$out/equiv-sp4/events.jsonl" <<'EOF'
import json, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"event":"step"' in l]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"   SP=1 losses {a}\n   SP=4 losses {b}\n   max relative difference {worst:.2e}")
sys.exit(0 if len(a) == len(b) and worst <= 1e-5 else 1)
EOF
