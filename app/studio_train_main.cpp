// studio-train: the training engine's command line.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "studio/config/config_schema.h"
#include "studio/trainer/runtime_info.h"
#include "studio/version.h"

namespace studio::app {
namespace {

const char* kUsage = R"(usage: studio-train COMMAND [OPTIONS]

Commands:
  train CONFIG.yaml [--set key=value ...] [--skip-bad-rows]
        [--nproc N [--nnodes M --node-rank R --master-addr A --master-port P]
         [--max-restarts R [--rdzv-timeout S]]]
      Train (stage: pt, sft or dpo) as the config says; metrics go to OUTPUT_DIR/events.jsonl
      and status.json, a progress bar to the terminal. An output_dir holding checkpoints
      continues from the last one. Ctrl-C stops cleanly (every rank).
      --nproc N starts N worker processes on this node with the torchrun environment
      (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...) and watches them: when one fails
      the others are stopped and OUTPUT_DIR says which rank failed and why. A process
      started by torchrun or srun with that environment trains as one rank directly.
      sequence_parallel_size must divide N x M.
      --max-restarts R (or MAX_RESTARTS=R): after a failure, start every worker again
      from the newest checkpoint (whose files match its manifest), up to R times; each
      restart is a 'restart' event in OUTPUT_DIR/events.jsonl. With --nnodes M the
      launchers first meet at node 0's rendezvous (a c10d TCPStore at the master address
      and port; RDZV_ID names the run there): a node started again while the others wait
      joins them; one that does not come within --rdzv-timeout S seconds (600) ends the run.
      SIGUSR1 to the launcher: every worker writes a checkpoint, then stops (Slurm's
      warning before the time limit). Under Slurm a requeued job (SLURM_RESTART_COUNT)
      resumes from the newest checkpoint.
  eval CONFIG.yaml [--set key=value ...] [--skip-bad-rows]
      Print the mean loss per token of model_name_or_path on the evaluation data.
  validate CONFIG.yaml [--nproc N] [--nnodes M] [--for-training]
      Check a LLaMA-Factory training YAML. Every problem is printed on stderr as
      FILE:LINE:COL: key: message (allowed: ...). The world size is N x M
      (processes per node x nodes); sequence_parallel_size must divide it.
      Exit 0 when the config is valid (warnings allowed), 2 otherwise.
      --for-training  treat missing local paths as errors, as a training run does.
  estimate CONFIG.yaml [--nproc N] [--nnodes M] [--gpu-memory GIB] [--json] [--cpu]
           [--set key=value ...] [--plan ...]
      Estimate the memory per GPU of the run (weights, gradients, optimizer states,
      DPO reference, activations, logits, sequence-parallel buffers), the smallest
      sequence_parallel_size that fits and the longest cutoff_len that fits. The config is validated first (errors and
      exit code as validate). The world is N x M (default: one SP group). The GPU's
      memory is --gpu-memory, else the smallest local CUDA device, else unknown.
      --json  print one JSON object: every part in bytes, total, capacity, fits, sp,
              smallest_fitting_sp, longest_cutoff_len, long_context and the notes.
      --cpu   estimate a run on the CPU (the engine's CPU attention kernels, plain host
              buffers for offloaded activations) instead of CUDA.
      --plan [--gpus-per-node G] [--max-gpus N]  the length planner: the longest
              cutoff_len that fits against 1, 2, 4, ... N GPUs (64; G a node, 8), one
              line per SP mode x ZeRO-2 / ZeRO-3 / + offload / + tiled MLP and activation
              offload, with published long-context points beside; --json for all of it.
  export CONFIG.yaml [--set key=value ...]
      LLaMA-Factory's export of adapters (its merge_lora examples): the base model of
      model_name_or_path with every adapter_name_or_path merged, written to export_dir
      as a transformers model folder (export_size GB per shard, infer_dtype).
  print-config CONFIG.yaml [--nproc N] [--nnodes M]
      Print the config as the engine runs it: every key, defaults filled in,
      unknown keys kept at the end.

  config-keys
      Print every run-config key with its default, valid values and meaning
      (Markdown; docs/config.md is this output).
  tokenize --tokenizer FILE_OR_DIR [--decode]
      Each stdin line -> one JSON array of token ids (no special tokens added);
      with --decode each line is a JSON array of ids and is printed as text.
  preview CONFIG.yaml [--n 3] [--skip-bad-rows]
      The first N samples rendered with the chat template, masked (not learned)
      spans marked, token counts, and a length histogram against cutoff_len.
  logprobs --model DIR --ids ID,ID,...
      Print one JSON array: log p(id[i+1] | id[0..i]) for every position, under the
      model in DIR (a Hugging Face folder or a checkpoint-STEP folder).
  chat --model DIR [--prompt TEXT] [--template NAME] [--system TEXT] [--json]
       [--max-new-tokens N] [--temperature T] [--top-p P] [--top-k K]
       [--repetition-penalty R] [--seed S] [--stop WORD ...] [--enable-thinking true|false]
       [--device auto|cpu|cuda|cuda:N] [--dtype auto|float32|bfloat16|float16]
      Talk to a model folder (a run's final model or a checkpoint-STEP folder) with KV-cache
      decoding, its answer streamed as it is generated. Interactive without --prompt
      (/clear starts over, /exit quits); one answer with --prompt. The chat template is
      --template, else the run's config.yaml beside the model, else guessed from the
      tokenizer. Temperature 0 (the default) is greedy; otherwise temperature, top-k and
      top-p sample as Hugging Face's generate does. Generation stops at the template's and
      the model's end-of-sequence tokens, a --stop word, or after --max-new-tokens (256).
      --json  JSON lines on stdout (ready, token, done, error events); without --prompt
              requests are read as JSON lines from stdin (docs/CHAT.md).
      --device auto picks the first CUDA device when there is one; --dtype auto is the
      checkpoint's torch_dtype on a GPU and float32 on the CPU.
  sweep CONFIG.yaml --sweep KEY=V1,V2,... [--sweep ...] [--list] --out SWEEP_DIR
        [--nproc N] [--parallel K] [--dry-run] [--cpu]
  sweep --resume SWEEP_DIR [--nproc N] [--parallel K] [--point I]
  sweep CONFIG.yaml --sweep ... --out SWEEP_DIR --prepare
      Train the base config at every point of a grid of the swept keys' values (--list:
      the i-th values together), each point a run of its own in SWEEP_DIR/NN-KEY=V,...
      (config.yaml, train.log, events.jsonl; SWEEP_DIR/sweep.json lists them). Every
      point is validated first; none starts while one is invalid. Points run one after
      another, K at a time: on GPUs each takes N of them (CUDA_VISIBLE_DEVICES), so K is
      at most GPUs / N. Ctrl-C stops the running points and starts no more; --resume
      skips the finished points and continues the others from their checkpoints.
      --prepare writes the folder and prints the number of points, training nothing;
      --point I trains point I alone (a Slurm job array task: I = SLURM_ARRAY_TASK_ID).
      Exit 0 when every point finished, 1 when one failed (docs/SWEEPS.md).
  supervise --output-dir DIR [--grace S] [--env NAME=VALUE ...] -- PROGRAM ARGS...
      Run another trainer (e.g. llamafactory-cli train CONFIG.yaml) the way studio-train
      runs: DIR/status.json says running, then finished, failed (exit code and its last
      output line) or stopped; its output passes through; Ctrl-C or SIGTERM stops its
      whole process group (SIGKILL after --grace seconds, default 30). Exit code: the
      program's, or 130 after a stop. The studio launches LLaMA-Factory runs this way.
  init-model --config CONFIG.json --out DIR [--seed N] [--dtype float32|bfloat16]
      Write a freshly initialised model folder (weights, config.json and the
      tokenizer files beside CONFIG.json).

Options:
  -h, --help     show this help
  --version      show the version and where the engine runs (LibTorch, CUDA devices)
)";

}  // namespace

int usage_error(const std::string& message) {
  std::cerr << "studio-train: " << message << "\nRun 'studio-train --help' for usage.\n";
  return kExitInvalid;
}

}  // namespace studio::app

using namespace studio::app;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitInvalid;
  }
  const std::string cmd = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return std::cout << kUsage, kExitOk;
    if (cmd == "--version") {
      std::cout << "studio-train " << studio::kVersion << "\n"
                << studio::trainer::format_runtime_info();
      return kExitOk;
    }
    if (cmd == "validate") return cmd_validate(rest);
    if (cmd == "print-config") return cmd_print_config(rest);
    if (cmd == "estimate") return cmd_estimate(rest);
    if (cmd == "train") return cmd_train(rest);
    if (cmd == "eval") return cmd_eval(rest);
    if (cmd == "tokenize") return cmd_tokenize(rest);
    if (cmd == "preview") return cmd_preview(rest);
    if (cmd == "logprobs") return cmd_logprobs(rest);
    if (cmd == "init-model") return cmd_init_model(rest);
    if (cmd == "export") return cmd_export(rest);
    if (cmd == "chat") return cmd_chat(rest);
    if (cmd == "supervise") return cmd_supervise(rest);
    if (cmd == "sweep") return cmd_sweep(rest);
    if (cmd == "config-keys") return std::cout << studio::config_keys_markdown(), kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "studio-train " << cmd << ": " << e.what() << "\n";
    return kExitFailed;
  }
  return usage_error("unknown command '" + cmd + "'");
}
