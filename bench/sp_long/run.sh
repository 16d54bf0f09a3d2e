#!/usr/bin/env bash
# Long-sequence SP equivalence on the CPU: a GQA model of hidden size 64 (by default 4 layers, 8
# query heads, 2 key/value heads) trained on sequences of --tokens tokens (default 16384) with
# sequence_parallel_size 4 in every mode (zigzag-ring, ulysses, usp 2x2) against the
# single-process run, per-step losses compared (relative difference <= 1e-5), each run's wall time
# printed; --record appends the table to docs/PERFORMANCE.md. The CTest sp_long_16k runs a
# lighter shape (--layers 2 --heads 4, 2 steps): the same 16k tokens and splits, with head_dim 16,
# where the CPU attention kernel is 2.4x faster per FLOP than at head_dim 8.
#
#   bench/sp_long/run.sh [--tokens N] [--steps S] [--layers L] [--heads H] [--kv-heads K]
#                        [--record] [--build-dir DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${STUDIO_BUILD_DIR:-$root/build}
tokens=16384
steps=3
layers=4
heads=8
kv_heads=2
record=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tokens) tokens=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --heads) heads=$2; shift 2 ;;
    --kv-heads) kv_heads=$2; shift 2 ;;
    --record) record=1; shift ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "bench/sp_long/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
exe=$build/app/studio-train
[ -x "$exe" ] || { echo "bench/sp_long/run.sh: build studio-train first ($exe)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/src" "$work/data"
cat > "$work/src/config.json" <<JSON
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
 "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": $layers, "num_attention_heads": $heads,
 "num_key_value_heads": $kv_heads, "vocab_size": 4288, "max_position_embeddings": $((tokens * 2)),
 "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
 "bos_token_id": 4256, "eos_token_id": 4258, "torch_dtype": "float32"}
JSON
"$exe" init-model --config "$work/src/config.json" --out "$work/model" --seed 5 >/dev/null
cp "$root/resources/demo/model/tokenizer.json" "$root/resources/demo/model/tokenizer_config.json" "$work/model/"
# Long prompts (train_on_prompt: every token is a target), truncated to cutoff_len.
python3 - "$work/data" "$tokens" <<'PY'
import json, sys
out, tokens = sys.argv[1], int(sys.argv[2])
words = "alpha river stone green moves under seven light quick table north sings".split()
rows = []
for i in range(8):
    text = " ".join(words[(i * 7 + w * 5) % 12] + str((w * 31 + i) % 97) for w in range(tokens))
    rows.append({"instruction": text, "input": "", "output": words[i % 12]})
json.dump(rows, open(out + "/long.json", "w"))
json.dump({"long": {"file_name": "long.json"}}, open(out + "/dataset_info.json", "w"))
PY

run() {  # name nproc mode extra...
  local name=$1 nproc=$2 mode=$3; shift 3
  {
    echo "model_name_or_path: $work/model"
    echo "stage: sft"
    echo "dataset: long"
    echo "dataset_dir: $work/data"
    echo "template: empty"
    echo "cutoff_len: $tokens"
    echo "train_on_prompt: true"
    echo "output_dir: $work/$name"
    echo "overwrite_output_dir: true"
    echo "logging_steps: 1"
    echo "save_steps: 100000"
    echo "max_steps: $steps"
    echo "learning_rate: 1.0e-3"
    echo "gradient_checkpointing: true"
    echo "sequence_parallel_mode: $mode"
    for kv in "$@"; do echo "$kv"; done
  } > "$work/$name.yaml"
  local start end
  start=$(date +%s.%N)
  "$exe" train "$work/$name.yaml" --nproc "$nproc" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$name $(echo "$end - $start" | bc)"
}

echo "running SP=1 and SP=4 (zigzag-ring, ulysses, usp 2x2) on $tokens-token sequences, $steps steps each ($layers layers, $heads query / $kv_heads key-value heads)..." >&2
times=()
times+=("$(run sp1 1 zigzag-ring)")
times+=("$(run zigzag 4 zigzag-ring "sequence_parallel_size: 4")")
times+=("$(run ulysses 4 ulysses "sequence_parallel_size: 4")")
times+=("$(run usp 4 usp "sequence_parallel_size: 4" "sequence_parallel_ulysses_degree: 2" "sequence_parallel_ring_degree: 2")")

table=$(python3 - "$work" "$tokens" "$steps" "${times[@]}" <<'PY'
import json, sys
work, tokens, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
times = dict(t.split() for t in sys.argv[4:])
def losses(name):
    out = []
    for line in open(f"{work}/{name}/events.jsonl"):
        e = json.loads(line)
        if e.get("event") == "step": out.append(e["loss"])
    return out
ref = losses("sp1")
print(f"| run | tokens | steps | per-step losses | max relative difference vs SP=1 | wall s |")
print("|---|---|---|---|---|---|")
worst_all = 0.0
for name, label in [("sp1", "SP=1"), ("zigzag", "zigzag-ring SP=4"), ("ulysses", "ulysses SP=4"), ("usp", "usp 2x2")]:
    got = losses(name)
    assert len(got) == len(ref) == steps, (name, got)
    worst = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
    worst_all = max(worst_all, worst)
    print(f"| {label} | {tokens} | {steps} | {' '.join(f'{x:.6f}' for x in got)} | {worst:.2e} | {float(times[name]):.0f} |")
verdict = 'PASS' if worst_all <= 1e-5 else 'FAIL'
print(f"| verdict | | | | {verdict} (bound 1e-5) | |")
PY
)
echo "$table"
status=0
grep -q "| verdict .*PASS" <<<"$table" || status=1
if [ "$record" = 1 ]; then
  {
    echo
    echo "### Long-sequence SP equivalence ($(date -u +%Y-%m-%d), $(nproc) CPU cores, $(lscpu | sed -n 's/^Model name: *//p'))"
    echo
    echo "\`bench/sp_long/run.sh --tokens $tokens --steps $steps --layers $layers --heads $heads --kv-heads $kv_heads\`: $layers-layer GQA model ($heads q / $kv_heads kv heads, hidden 64), fp32, activation checkpointing."
    echo
    echo "$table"
  } >> "$root/docs/PERFORMANCE.md"
fi
exit $status
