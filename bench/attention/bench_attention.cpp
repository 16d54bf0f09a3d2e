// Attention forward + backward throughput: the kernel the engine dispatches to (Auto: ATen's
// flash attention where it applies) against the math path (the tests' reference), and on CUDA
// against at::scaled_dot_product_attention under autograd (what a PyTorch training loop runs), in
// the same process on the same tensors.
//
//   bench_attention [--device cpu|cuda] [--dtype fp32|bf16] [--case BxHxHKVxSxD]... [--causal 0|1]
//                   [--warmup W] [--steps N] [--threads T]
//
// One `RESULT key=value ...` line per (case, implementation): ms per forward+backward (median),
// TFLOP/s counting 4·B·H·S²·D for the forward and 2.5x that for the backward (halved when
// causal), and the max |difference| of out and dq from the math path's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/model/attention.h"

using namespace studio::trainer;

namespace {

struct Case {
  int64_t b, h, hkv, s, d;
};

Case parse_case(const std::string& text) {
  Case c{};
  if (std::sscanf(text.c_str(), "%ldx%ldx%ldx%ldx%ld", &c.b, &c.h, &c.hkv, &c.s, &c.d) != 5 ||
      c.b < 1 || c.h < 1 || c.hkv < 1 || c.h % c.hkv != 0 || c.s < 1 || c.d < 1)
    throw std::invalid_argument("--case wants BxHxHKVxSxD with H a multiple of HKV, got '" + text + "'");
  return c;
}

void sync(const torch::Device& dev) {
  if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
}

struct Run {
  double ms = 0;
  torch::Tensor out, dq;
};

// Median ms of fn() over `steps` after `warmup`; fn returns (out, dq) of its last call.
template <class Fn>
Run time_it(const torch::Device& dev, int warmup, int steps, Fn fn) {
  Run r;
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    sync(dev);
    const auto t0 = std::chrono::steady_clock::now();
    auto [out, dq] = fn();
    sync(dev);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    r.out = out;
    r.dq = dq;
  }
  std::sort(ms.begin(), ms.end());
  r.ms = ms[ms.size() / 2];
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string device = "cpu", dtype = "fp32";
    std::vector<Case> cases;
    int warmup = 2, steps = 5, threads = 0;
    bool causal = true;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--device") device = value();
      else if (a == "--dtype") dtype = value();
      else if (a == "--case") cases.push_back(parse_case(value()));
      else if (a == "--causal") causal = value() != "0";
      else if (a == "--warmup") warmup = std::stoi(value());
      else if (a == "--steps") steps = std::stoi(value());
      else if (a == "--threads") threads = std::stoi(value());
      else if (a == "-h" || a == "--help") {
        std::cout << "bench_attention [--device cpu|cuda] [--dtype fp32|bf16] [--case BxHxHKVxSxD]..."
                     " [--causal 0|1] [--warmup W] [--steps N] [--threads T]\n";
        return 0;
      } else throw std::invalid_argument("unknown option '" + a + "'");
    }
    if (device != "cpu" && device != "cuda") throw std::invalid_argument("--device cpu|cuda");
    if (dtype != "fp32" && dtype != "bf16") throw std::invalid_argument("--dtype fp32|bf16");
    if (steps < 1 || warmup < 0) throw std::invalid_argument("--steps >= 1, --warmup >= 0");
    if (threads > 0) torch::set_num_threads(threads);
    const torch::Device dev(device == "cuda" ? torch::kCUDA : torch::kCPU);
    if (dev.is_cuda() && !torch::cuda::is_available())
      throw std::runtime_error("--device cuda: no usable CUDA device");
    const auto type = dtype == "bf16" ? torch::kBFloat16 : torch::kFloat;
    if (cases.empty()) cases = {parse_case("1x8x2x1024x64"), parse_case("1x8x2x4096x64")};

    for (const Case& c : cases) {
      torch::manual_seed(1);
      const auto opt = torch::TensorOptions().dtype(type).device(dev);
      auto q = torch::randn({c.b, c.h, c.s, c.d}, opt), k = torch::randn({c.b, c.hkv, c.s, c.d}, opt),
           v = torch::randn({c.b, c.hkv, c.s, c.d}, opt), dout = torch::randn({c.b, c.h, c.s, c.d}, opt);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      auto blocks = [&] {
        auto f = attention_block_forward(q, k, v, BlockMask{causal}, scale);
        auto g = attention_block_backward(dout, q, k, v, f.out, f.lse, BlockMask{causal}, scale);
        return std::make_pair(f.out, g.dq);
      };
      set_attention_kernel(AttentionKernel::Math);
      const Run math = time_it(dev, warmup, steps, blocks);
      set_attention_kernel(AttentionKernel::Auto);
      const Run kernel = time_it(dev, warmup, steps, blocks);
      std::vector<std::pair<std::string, Run>> runs{{"math", math}, {"engine", kernel}};
      if (dev.is_cuda()) {
        // PyTorch's own path: SDPA (its dispatcher picks the backend) with GQA, under autograd.
        const Run sdpa = time_it(dev, warmup, steps, [&] {
          auto qq = q.detach().requires_grad_(true);
          auto kk = k.repeat_interleave(c.h / c.hkv, 1).detach().requires_grad_(true);
          auto vv = v.repeat_interleave(c.h / c.hkv, 1).detach().requires_grad_(true);
          auto o = at::scaled_dot_product_attention(qq, kk, vv, {}, 0.0, causal, scale);
          o.backward(dout);
          return std::make_pair(o.detach(), qq.grad());
        });
        runs.emplace_back("sdpa", sdpa);
      }
      const double flops = 4.0 * static_cast<double>(c.b * c.h * c.s) * static_cast<double>(c.s * c.d) *
                           3.5 * (causal ? 0.5 : 1.0);
      for (const auto& [name, r] : runs) {
        const double dout_err = (r.out.to(torch::kFloat) - math.out.to(torch::kFloat)).abs().max().item<double>();
        const double dq_err = (r.dq.to(torch::kFloat) - math.dq.to(torch::kFloat)).abs().max().item<double>();
        std::printf("RESULT case=%ldx%ldx%ldx%ldx%ld device=%s dtype=%s causal=%d impl=%s threads=%d "
                    "ms=%.3f tflops=%.4f speedup_vs_math=%.2f max_out_diff=%.3g max_dq_diff=%.3g\n",
                    c.b, c.h, c.hkv, c.s, c.d, device.c_str(), dtype.c_str(), causal ? 1 : 0,
                    name.c_str(), torch::get_num_threads(), r.ms, flops / (r.ms * 1e-3) / 1e12,
                    math.ms / r.ms, dout_err, dq_err);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_attention: " << e.what() << "\n";
    return 2;
  }
}
