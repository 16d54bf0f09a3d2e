#!/usr/bin/env bash
# The table of docs/LONG_CONTEXT.md: the longest cutoff_len `studio-train estimate` fits in
# 80 GiB GPUs for Qwen2.5-7B, Llama-3.1-8B and Qwen2.5-72B (model shapes from
# resources/model-shapes), SFT and DPO, on 1, 8 and (72B) 32 GPUs with sequence parallelism
# over all of them, bf16, with every long-sequence option on (checkpointing, activations
# offloaded, tiled MLP, ZeRO-3 with optimizer and parameters offloaded; DPO with precomputed
# reference log-probs) and, for comparison, with ZeRO-3 offload and checkpointing alone.
# Prints Markdown rows. Run after scripts/build.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${STUDIO_BUILD_DIR:-$root/build}/app/studio-train
gib=${GPU_GIB:-80}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"
echo '{"sft": {"file_name": "sft.json"}, "dpo": {"file_name": "dpo.json", "ranking": true}}' \
  >"$tmp/data/dataset_info.json"
echo '[]' >"$tmp/data/sft.json"
echo '[]' >"$tmp/data/dpo.json"

# longest MODEL STAGE GPUS SP MODE ULYSSES OPTIONS...
longest() {
  local model=$1 stage=$2 gpus=$3 sp=$4 mode=$5 ulysses=$6
  shift 6
  cat >"$tmp/run.yaml" <<EOF
model_name_or_path: $root/resources/model-shapes/$model
stage: $stage
do_train: true
finetuning_type: full
dataset: $stage
dataset_dir: $tmp/data
template: qwen
cutoff_len: 4096
output_dir: $tmp/out
per_device_train_batch_size: 1
bf16: true
gradient_checkpointing: true
zero_stage: 3
offload_optimizer: true
offload_param: true
sequence_parallel_size: $sp
sequence_parallel_mode: $mode
sequence_parallel_ulysses_degree: $ulysses
sequence_parallel_ring_degree: $((sp / ulysses))
EOF
  [ "$stage" = dpo ] && echo "precompute_ref_logps: true" >>"$tmp/run.yaml"
  for kv in "$@"; do echo "$kv" >>"$tmp/run.yaml"; done
  local n
  n=$("$bin" estimate "$tmp/run.yaml" --nproc "$gpus" --gpu-memory "$gib" --json 2>/dev/null |
    python3 -c 'import json,sys; v=json.load(sys.stdin)["longest_cutoff_len"]; print(v if v else 0)')
  # ... and the host memory each rank needs at that length (offloaded states and activations).
  local host
  host=$("$bin" estimate "$tmp/run.yaml" --nproc "$gpus" --gpu-memory "$gib" --json \
           --set cutoff_len="$((n > 0 ? n : 1024))" 2>/dev/null |
         python3 -c 'import json,sys; j=json.load(sys.stdin); print(round((j["offloaded_bytes"] + j["host_activation_bytes"]) / 2**30))')
  echo "$n $host"
}

fmt() {  # 1048576 -> 1,048,576 (1.05M)
  python3 -c 'import sys; n=int(sys.argv[1]); print(f"{n:,}" + (f" ({n/1e6:.2f}M)" if n >= 1e6 else f" ({n/1e3:.0f}k)"))' "$1"
}

echo "| model | stage | GPUs | SP | every option | host memory per rank | ZeRO-3 offload + checkpointing only | host memory per rank |"
echo "|---|---|---:|---|---:|---:|---:|---:|"
while read -r model label gpus sp mode ulysses; do
  for stage in sft dpo; do
    read -r all all_host < <(longest "$model" "$stage" "$gpus" "$sp" "$mode" "$ulysses" \
      "offload_activations: true" "tiled_mlp: true")
    read -r base base_host < <(longest "$model" "$stage" "$gpus" "$sp" "$mode" "$ulysses")
    desc=$mode
    [ "$mode" = usp ] && desc="usp $ulysses x $((sp / ulysses))"
    [ "$sp" = 1 ] && desc="-"
    echo "| $label | ${stage^^} | $gpus | $desc | $(fmt "$all") | $all_host GiB | $(fmt "$base") | $base_host GiB |"
  done
done <<'EOF'
qwen2.5-7b Qwen2.5-7B 1 1 zigzag-ring 1
qwen2.5-7b Qwen2.5-7B 8 8 usp 4
llama-3.1-8b Llama-3.1-8B 1 1 zigzag-ring 1
llama-3.1-8b Llama-3.1-8B 8 8 ulysses 8
qwen2.5-72b Qwen2.5-72B 8 8 ulysses 8
qwen2.5-72b Qwen2.5-72B 32 32 usp 8
EOF
