// Training-step throughput of the engine: the demo-shaped decoder (resources/demo/model,
// Qwen2-style) doing what one step of `studio-train train` does (forward, the engine's chunked
// LM-head cross-entropy, backward, global-norm clipping, AdamW; in bf16 with fp32 master weights
// as the engine does), on deterministic token batches, on the CPU or a CUDA device.
// bench/train_step/hf_reference.py runs the same model and step with Hugging Face transformers
// (Qwen2ForCausalLM, SDPA attention, torch.optim.AdamW); bench/train_step/run.sh runs both in the
// same run and prints the table.
//
//   bench_train_step [--config CONFIG.json] [--seed N] [--case BxS]... [--warmup W] [--steps N]
//                    [--threads T] [--save-model DIR] [--device cpu|cuda] [--dtype fp32|bf16]
//                    [--profile DIR] [--profile-steps N] [--gradient-checkpointing]
//
// --gradient-checkpointing: every layer keeps only its input and runs again in the backward
// (the engine's gradient_checkpointing: true), for the long cases.
// A case that runs out of memory prints its RESULT line with error=oom and tokens_per_s=0.
//
// --profile DIR: after the timed steps, N more (default 2) under LibTorch's Kineto profiler,
// written to DIR/trace-<device>-<dtype>-<BxS>.json (Perfetto; bench/profile/trace_table.py makes
// the per-kernel table), and on CUDA the allocator's snapshot with the history of those steps,
// DIR/memory-<device>-<dtype>-<BxS>.pickle (bench/profile/memory_table.py: what is live at the
// peak). They are not in the timings.
//
// Each case prints one `RESULT key=value ...` line (see bench/README.md). --save-model writes the
// initial weights as a Hugging Face folder (what `studio-train init-model` writes for the seed),
// so the reference can start from the same weights and its losses can be compared.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/metrics/profile_capture.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/optim/zero.h"
#include "studio/trainer/runtime_info.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace studio::trainer;

struct Case {
  int64_t batch = 0, seq = 0;
};

struct Options {
  std::string config = STUDIO_SOURCE_DIR "/resources/demo/model/config.json";
  uint64_t seed = 7;  // scripts/demo.sh's init-model seed
  std::vector<Case> cases;
  int warmup = 3;
  int steps = 10;
  int threads = 0;  // 0: LibTorch's default
  std::string save_model;
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::string profile;  // folder for traces and snapshots; empty: none
  int profile_steps = 2;
  bool checkpointing = false;
};

// The demo's hyper-parameters (resources/demo/sft_demo.yaml) and LLaMA-Factory's clipping.
studio::RunConfig step_config() {
  studio::RunConfig cfg;
  cfg.learning_rate = 3e-3;
  cfg.weight_decay = 0.01;
  cfg.max_grad_norm = 1.0;
  return cfg;
}

// Token id of row r, position p in step k: a multiplicative hash (32-bit), so the eager reference
// regenerates the very same batches without sharing a random generator.
int64_t token(int64_t k, int64_t r, int64_t p, int64_t vocab) {
  uint32_t h = static_cast<uint32_t>(k * 1000003 + r * 10007 + p);
  h *= 2654435761u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return static_cast<int64_t>(h % static_cast<uint32_t>(vocab));
}

// input_ids, targets (the next token; the last position ignored) and position ids of step k.
Batch make_step_batch(int64_t k, const Case& c, int64_t vocab) {
  auto ids = torch::empty({c.batch, c.seq}, torch::kLong);
  auto acc = ids.accessor<int64_t, 2>();
  for (int64_t r = 0; r < c.batch; ++r)
    for (int64_t p = 0; p < c.seq; ++p) acc[r][p] = token(k, r, p, vocab);
  Batch b;
  b.input_ids = ids;
  b.targets = torch::full({c.batch, c.seq}, kIgnoreIndex, torch::kLong);
  b.targets.narrow(1, 0, c.seq - 1).copy_(ids.narrow(1, 1, c.seq - 1));
  b.position_ids = torch::arange(c.seq, torch::kLong).unsqueeze(0).expand({c.batch, c.seq}).contiguous();
  b.valid_tokens = c.batch * (c.seq - 1);
  b.tokens = c.batch * c.seq;
  return b;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The BLAS the CPU matmuls run on: a loaded libblas (e.g. the system's, with a torch built
// against it), else the MKL linked into libtorch_cpu.so (the torch wheel). cuBLAS, which the CUDA
// build loads too, is not what the CPU uses.
std::string loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = path.substr(path.rfind('/') + 1);
    if (name.find("blas") != std::string::npos && name.find("cublas") == std::string::npos)
      return path;
  }
  return at::hasMKL() ? "mkl(in-libtorch_cpu)" : "unknown";
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Every step's loss, warm-up included, comma-separated (gpu-check --perf compares them step by
// step with the reference's).
std::string joined(const std::vector<double>& v) {
  std::string out;
  char buf[32];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, "%.6f", x);
    out += (out.empty() ? "" : ",") + std::string(buf);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct StepTimes {
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, loss = 0;
};

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

// One step as the engine's train loop does it (trainer/train_loop.cpp: bf16 compute with fp32
// masters, or fp32 where the parameters are their own masters). The phases are timed with a
// device synchronisation at each boundary (on the CPU ops are synchronous anyway).
StepTimes train_step(CausalLM& model, ShardedState& states, const Batch& b, double max_norm,
                     double lr, const torch::Device& dev) {
  StepTimes t;
  auto t0 = Clock::now();
  torch::Tensor loss;
  {
    RECORD_USER_SCOPE("step::forward_and_loss");
    states.begin_micro_batch(/*last=*/true);
    auto hidden = model->hidden_states(b.input_ids, b.position_ids);
    auto sum = lm_cross_entropy_sum(hidden, model->lm_head_weight(), b.targets, 0,
                                    model->info().final_logit_softcapping);
    loss = sum / static_cast<double>(b.valid_tokens);
    sync(dev);
  }
  t.forward_ms = ms_since(t0);
  t0 = Clock::now();
  {
    RECORD_USER_SCOPE("step::backward");
    loss.backward();
    states.end_backward();
    sync(dev);
  }
  t.backward_ms = ms_since(t0);
  t0 = Clock::now();
  {
    RECORD_USER_SCOPE("step::clip_and_adamw");
    states.clip_gradients(max_norm);
    states.step(lr);
    sync(dev);
  }
  t.optimizer_ms = ms_since(t0);
  t.loss = loss.item<double>();
  return t;
}

// The profiled steps after the timed ones: a Kineto trace of them and, on CUDA, the allocator's
// history over them (its snapshot shows every block live at the peak, with its C++ stack).
void profile_steps(CausalLM& model, ShardedState& states, const std::vector<Batch>& batches,
                   const Options& o, const Case& c, const studio::RunConfig& cfg,
                   const torch::Device& dev) {
  const std::string tag = o.device + "-" + o.dtype + "-" + std::to_string(c.batch) + "x" +
                          std::to_string(c.seq);
  std::string error;
  const bool history = dev.is_cuda() && start_cuda_memory_history(error);
  if (dev.is_cuda() && !history)
    std::fprintf(stderr, "bench_train_step: no allocator history: %s\n", error.c_str());
  start_trace(dev.is_cuda());
  for (int k = o.warmup + o.steps; k < o.warmup + o.steps + o.profile_steps; ++k) {
    RECORD_USER_SCOPE("step");
    train_step(model, states, batches[size_t(k)], cfg.max_grad_norm, cfg.learning_rate, dev);
  }
  const std::string trace = o.profile + "/trace-" + tag + ".json";
  save_trace(trace);
  std::printf("# trace of %d steps: %s\n", o.profile_steps, trace.c_str());
  if (history) {
    const std::string snap = o.profile + "/memory-" + tag + ".pickle";
    if (save_cuda_memory_snapshot(snap, error))
      std::printf("# allocator snapshot: %s\n", snap.c_str());
    else
      std::fprintf(stderr, "bench_train_step: no allocator snapshot: %s\n", error.c_str());
  }
}

void run_case(const studio::ModelInfo& info, const Options& o, const Case& c) {
  const torch::Device dev(o.device == "cuda" ? torch::kCUDA : torch::kCPU);
  ModelOptions mo;
  mo.warn = [](const std::string&) {};
  mo.device = dev;
  mo.dtype = o.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;
  CausalLM model(info, mo);
  model->init_weights(o.seed);  // the same weights as init-model's for the seed, on any device
  model->set_gradient_checkpointing(o.checkpointing);
  const auto cfg = step_config();
  // Stage 0 of the engine's sharded states (one process: nothing is sharded).
  ShardedState states(model, dev, nullptr, ZeroOptions{}, AdamWSettings::from(cfg));

  std::vector<Batch> batches;
  const int profiled = o.profile.empty() ? 0 : o.profile_steps;
  for (int k = 0; k < o.warmup + o.steps + profiled; ++k) {
    Batch b = make_step_batch(k, c, info.vocab_size);
    b.input_ids = b.input_ids.to(dev);
    // The targets stay on the host, as the train loop keeps them: the loss finds the valid
    // rows there without waiting for the device.
    b.position_ids = b.position_ids.to(dev);
    batches.push_back(std::move(b));
  }
  if (dev.is_cuda()) reset_cuda_peak_memory(dev.index());

  std::vector<double> step_ms, fwd, bwd, optim, losses;
  double cpu0 = 0;
  for (int k = 0; k < o.warmup + o.steps; ++k) {
    if (k == o.warmup) cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    const StepTimes t =
        train_step(model, states, batches[size_t(k)], cfg.max_grad_norm, cfg.learning_rate, dev);
    const double ms = ms_since(t0);
    losses.push_back(t.loss);
    if (k < o.warmup) continue;
    step_ms.push_back(ms);
    fwd.push_back(t.forward_ms);
    bwd.push_back(t.backward_ms);
    optim.push_back(t.optimizer_ms);
  }
  const double cpu = (process_cpu_seconds() - cpu0) / o.steps;
  double peak_mib = 0;
  if (dev.is_cuda())
    if (const auto m = cuda_memory_stats(dev.index())) peak_mib = m->peak_allocated_mib;
  if (profiled > 0) profile_steps(model, states, batches, o, c, cfg, dev);
  const double med = median(step_ms);
  // Model FLOPs per token (PaLM's MFU convention): 6 x the parameters that multiply (everything
  // but the embedding lookup; a tied head multiplies with the embedding's matrix), plus the
  // attention scores and values, 12 x layers x hidden x S, halved for the causal mask.
  double matmul_params = 0;
  for (const auto& [name, p] : model->hf_state())
    if (name.find("embed_tokens") == std::string::npos) matmul_params += static_cast<double>(p.numel());
  if (info.tie_word_embeddings) matmul_params += static_cast<double>(info.vocab_size * info.hidden_size);
  const double flops_per_token = 6 * matmul_params + 6.0 * static_cast<double>(info.num_layers) *
                                                         static_cast<double>(info.hidden_size) *
                                                         static_cast<double>(c.seq);
  const double tokens_per_s = static_cast<double>(c.batch * c.seq) / (med / 1000);
  std::printf(
      "RESULT impl=engine torch=%s blas=%s case=%lldx%lld device=%s dtype=%s threads=%d warmup=%d "
      "steps=%d tokens_per_s=%.1f step_ms=%.2f forward_ms=%.2f backward_ms=%.2f optimizer_ms=%.2f "
      "cpu_s_per_step=%.4f peak_mib=%.1f model_tflops_per_s=%.3f loss_first=%.6f loss_last=%.6f "
      "losses=%s\n",
      TORCH_VERSION, dev.is_cuda() ? "cuda" : loaded_blas().c_str(), static_cast<long long>(c.batch),
      static_cast<long long>(c.seq), o.device.c_str(), o.dtype.c_str(), torch::get_num_threads(),
      o.warmup, o.steps, tokens_per_s, med, median(fwd), median(bwd), median(optim), cpu, peak_mib,
      tokens_per_s * flops_per_token / 1e12, losses.front(), losses.back(), joined(losses).c_str());
  std::fflush(stdout);
}

Case parse_case(const std::string& s) {
  const auto x = s.find('x');
  Case c;
  try {
    if (x == std::string::npos) throw std::invalid_argument(s);
    c.batch = std::stoll(s.substr(0, x));
    c.seq = std::stoll(s.substr(x + 1));
  } catch (const std::exception&) {
    throw std::invalid_argument("--case wants BATCHxSEQ (e.g. 16x96), got '" + s + "'");
  }
  if (c.batch < 1 || c.seq < 2) throw std::invalid_argument("--case: batch >= 1 and seq >= 2, got '" + s + "'");
  return c;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--config") o.config = value();
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--case") o.cases.push_back(parse_case(value()));
    else if (a == "--warmup") o.warmup = std::stoi(value());
    else if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--save-model") o.save_model = value();
    else if (a == "--device") o.device = value();
    else if (a == "--dtype") o.dtype = value();
    else if (a == "--profile") o.profile = value();
    else if (a == "--profile-steps") o.profile_steps = std::stoi(value());
    else if (a == "--gradient-checkpointing") o.checkpointing = true;
    else throw std::invalid_argument("unknown option " + a + " (see bench/README.md)");
  }
  if (o.cases.empty()) o.cases = {{16, 96}, {1, 1024}};
  if (o.warmup < 0 || o.steps < 1) throw std::invalid_argument("--warmup >= 0 and --steps >= 1");
  if (o.device != "cpu" && o.device != "cuda") throw std::invalid_argument("--device cpu|cuda");
  if (o.dtype != "fp32" && o.dtype != "bf16") throw std::invalid_argument("--dtype fp32|bf16");
  if (o.profile_steps < 1) throw std::invalid_argument("--profile-steps >= 1");
  if (!o.profile.empty()) std::filesystem::create_directories(o.profile);
  if (o.device == "cuda") {
    if (!torch::cuda::is_available()) throw std::runtime_error("--device cuda: no usable CUDA device");
    select_cuda_device(0);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.threads > 0) torch::set_num_threads(o.threads);
    std::string error;
    const auto info = studio::read_model_info(o.config, error);
    if (!info) throw std::runtime_error(error);
    if (!o.save_model.empty()) init_model_folder(o.config, o.save_model, o.seed, torch::kFloat);
    std::printf("# bench_train_step: %s, %lld layers, hidden %lld, vocab %lld, seed %llu, %s on %s, "
                "LibTorch %s, %d threads\n",
                info->architecture.c_str(), static_cast<long long>(info->num_layers),
                static_cast<long long>(info->hidden_size), static_cast<long long>(info->vocab_size),
                static_cast<unsigned long long>(o.seed), o.dtype.c_str(), o.device.c_str(),
                TORCH_VERSION, torch::get_num_threads());
    for (const Case& c : o.cases) {
      try {
        run_case(*info, o, c);
      } catch (const c10::OutOfMemoryError& e) {
        // The row says so and the next case runs (its memory is free again).
        std::printf("RESULT impl=engine torch=%s case=%lldx%lld device=%s dtype=%s error=oom "
                    "tokens_per_s=0 step_ms=0 forward_ms=0 backward_ms=0 optimizer_ms=0 "
                    "cpu_s_per_step=0 peak_mib=0 loss_first=nan loss_last=nan\n",
                    TORCH_VERSION, static_cast<long long>(c.batch), static_cast<long long>(c.seq),
                    o.device.c_str(), o.dtype.c_str());
        std::fflush(stdout);
        std::cerr << "bench_train_step: " << c.batch << "x" << c.seq << ": out of memory: "
                  << std::string(e.what()).substr(0, 300) << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_train_step: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
