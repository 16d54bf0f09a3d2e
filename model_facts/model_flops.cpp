#include "studio/model_facts/model_flops.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace studio {

double matmul_parameters(const ModelInfo& m) {
  const double h = double(m.hidden_size), d = double(m.head_dim > 0 ? m.head_dim
                                                                    : m.hidden_size / std::max<int64_t>(1, m.num_heads));
  const double q = double(m.num_heads) * d, kv = double(m.num_kv_heads) * d;
  const double attn = h * q + 2 * h * kv + q * h;
  const double dense = 3 * h * double(m.intermediate_size);
  // An MoE layer: the router, the num_experts_per_tok experts a token goes through, and
  // Qwen2-MoE's shared expert with its gate.
  const double sparse = h * double(m.num_experts) +
                        3 * h * double(m.moe_intermediate_size * m.num_experts_per_tok) +
                        (m.shared_expert_intermediate_size > 0
                             ? 3 * h * double(m.shared_expert_intermediate_size) + h
                             : 0.0);
  const double moe = double(m.moe_layer_count());
  return (double(m.num_layers) - moe) * (attn + dense) + moe * (attn + sparse) +
         double(m.vocab_size) * h;
}

namespace {

// 2 x (keys seen, summed over the span's tokens): S (S + 1) for full causal attention; with a
// window w < S token i sees min(i + 1, w) keys: w (w + 1) + 2 w (S - w).
double span_keys(int64_t s, int64_t window) {
  if (window <= 0 || s <= window) return double(s) * double(s + 1);
  return double(window) * double(window + 1) + 2.0 * double(window) * double(s - window);
}

}  // namespace

double attention_span_term(const std::vector<int64_t>& spans, const ModelInfo* model) {
  double sum = 0;
  if (!model || model->sliding_window <= 0 || model->num_layers <= 0) {
    for (int64_t s : spans) sum += span_keys(s, 0);
    return sum;
  }
  for (int64_t layer = 0; layer < model->num_layers; ++layer)
    for (int64_t s : spans) sum += span_keys(s, model->layer_window(layer));
  return sum / double(model->num_layers);
}

double forward_flops(const ModelInfo& m, double tokens, double span_term) {
  const double d = double(m.head_dim > 0 ? m.head_dim
                                         : m.hidden_size / std::max<int64_t>(1, m.num_heads));
  return 2 * matmul_parameters(m) * tokens +
         2 * double(m.num_layers) * double(m.num_heads) * d * span_term;
}

double training_flops(const ModelInfo& m, double tokens, double span_term,
                      bool reference_forward) {
  return (reference_forward ? 4 : 3) * forward_flops(m, tokens, span_term);
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Peak {
  const char* pattern;  // all of its space-separated words must be in the lowercased name
  double half;          // bf16 / fp16 dense tensor-core TFLOP/s
  double fp32;          // fp32 (no TF32) TFLOP/s; 0: not in the table
};

// Vendor datasheet figures, dense (no structured sparsity). More specific names first.
constexpr Peak kPeaks[] = {
    {"gb200", 2500, 0},        {"b200", 2250, 0},        {"b100", 1750, 0},
    {"gh200", 989.4, 66.9},    {"h200 nvl", 835, 60},     {"h200", 989.4, 66.9},    {"h100 pcie", 756.5, 51.2},
    {"h100 nvl", 835, 60},     {"h100", 989.4, 66.9},    {"h800 pcie", 756.5, 51.2},
    {"h800", 989.4, 66.9},     {"a100", 312, 19.5},
    {"a800", 312, 19.5},       {"l40s", 362.05, 91.6},   {"l40", 181.05, 90.5},
    {"l4", 121, 30.3},         {"a10g", 70, 31.2},       {"a10", 125, 31.2},
    {"a6000", 154.8, 38.7},    {"rtx 4090", 165.2, 82.6}, {"rtx 3090", 71, 35.6},
    {"v100", 125, 15.7},
};

bool matches(const std::string& name, const char* pattern) {
  std::string p = pattern;
  std::size_t start = 0;
  while (start < p.size()) {
    const std::size_t end = std::min(p.find(' ', start), p.size());
    if (name.find(p.substr(start, end - start)) == std::string::npos) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

std::optional<double> peak_tflops(const std::string& device_name, const std::string& dtype) {
  if (const char* env = std::getenv("STUDIO_PEAK_TFLOPS")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && *end == '\0' && v > 0) return v;
  }
  const std::string name = lower(device_name);
  for (const Peak& p : kPeaks) {
    if (!matches(name, p.pattern)) continue;
    if (dtype == "float32") return p.fp32 > 0 ? std::optional<double>(p.fp32) : std::nullopt;
    if (p.pattern == std::string("v100") && dtype == "bfloat16") return std::nullopt;
    return p.half;
  }
  return std::nullopt;
}

}  // namespace studio
