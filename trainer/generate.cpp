#include "studio/trainer/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace studio::trainer {

std::string sampling_options_error(const SamplingOptions& o) {
  if (o.max_new_tokens < 1)
    return "max_new_tokens must be at least 1, got " + std::to_string(o.max_new_tokens);
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return "temperature must be 0 (greedy) or positive, got " + std::to_string(o.temperature);
  if (!(o.top_p > 0 && o.top_p <= 1))
    return "top_p must be in (0, 1], got " + std::to_string(o.top_p);
  if (o.top_k < 0) return "top_k must be 0 (off) or positive, got " + std::to_string(o.top_k);
  if (!(o.repetition_penalty > 0) || !std::isfinite(o.repetition_penalty))
    return "repetition_penalty must be positive, got " + std::to_string(o.repetition_penalty);
  return {};
}

void apply_repetition_penalty(torch::Tensor& logits, const std::vector<int32_t>& seen,
                              double penalty) {
  if (penalty == 1.0 || seen.empty()) return;
  const torch::Tensor ids = torch::tensor(seen, torch::kLong).to(logits.device());
  const torch::Tensor score = logits.gather(0, ids);
  logits.scatter_(0, ids, torch::where(score < 0, score * penalty, score / penalty));
}

torch::Tensor warp_logits(const torch::Tensor& logits, const SamplingOptions& o) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  torch::Tensor scores = logits.to(torch::kFloat);
  if (o.temperature > 0 && o.temperature != 1.0) scores = scores / o.temperature;
  if (o.top_k > 0) {
    const int64_t k = std::min<int64_t>(o.top_k, scores.size(-1));
    const torch::Tensor kth = std::get<0>(scores.topk(k)).select(-1, k - 1);
    scores = scores.masked_fill(scores < kth, minus_inf);
  }
  if (o.top_p < 1.0) {
    const auto [sorted, order] = scores.sort(/*dim=*/-1, /*descending=*/false);
    torch::Tensor remove = sorted.softmax(-1).cumsum(-1) <= (1.0 - o.top_p);
    remove.select(-1, remove.size(-1) - 1).fill_(false);  // the most likely always stays
    scores = scores.masked_fill(remove.scatter(-1, order, remove), minus_inf);
  }
  return scores;
}

int32_t pick_token(const torch::Tensor& logits, const SamplingOptions& o,
                   at::Generator& generator) {
  if (o.temperature == 0) return static_cast<int32_t>(logits.argmax().item<int64_t>());
  const torch::Tensor probs = warp_logits(logits, o).softmax(-1);
  return static_cast<int32_t>(at::multinomial(probs, 1, false, generator).item<int64_t>());
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::Eos: return "eos";
    case StopReason::StopWord: return "stop_word";
    case StopReason::Length: return "length";
    case StopReason::Cancelled: return "cancelled";
  }
  return "length";
}

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: a character not yet whole

// Where the first stop word starts in `text` (npos: none).
std::size_t stop_word_at(const std::string& text, const std::vector<std::string>& words) {
  std::size_t at = std::string::npos;
  for (const auto& w : words)
    if (!w.empty()) at = std::min(at, text.find(w));
  return at;
}

// How many bytes at the end of `text` could begin a stop word.
std::size_t stop_word_prefix(const std::string& text, const std::vector<std::string>& words) {
  std::size_t held = 0;
  for (const auto& w : words)
    for (std::size_t n = std::min(w.size() - (w.empty() ? 0 : 1), text.size()); n > held; --n)
      if (text.compare(text.size() - n, n, w, 0, n) == 0) {
        held = n;
        break;
      }
  return held;
}

}  // namespace

Generation generate(CausalLM& model, const data::Tokenizer& tokenizer,
                    const std::vector<int32_t>& prompt, const SamplingOptions& options,
                    const StopCriteria& stop,
                    const std::function<void(const std::string&)>& on_text,
                    const std::atomic<bool>* cancel) {
  if (const std::string why = sampling_options_error(options); !why.empty())
    throw std::invalid_argument(why);
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const torch::Device device = model->lm_head_weight().device();
  const int64_t vocab = model->info().vocab_size;
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw std::invalid_argument("generate: prompt token " + std::to_string(id) +
                                  " is outside the model's vocabulary of " +
                                  std::to_string(vocab));

  Generation out;
  out.prompt_tokens = static_cast<int64_t>(prompt.size());
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  KVCache cache(model->info().num_layers);
  std::vector<int32_t> sequence = prompt;  // what the repetition penalty looks at
  std::size_t emitted = 0;
  const auto emit = [&](bool final) {
    if (!on_text) return;
    std::size_t end = out.text.size();
    if (!final) {
      if (out.text.size() >= kReplacement.size() &&
          out.text.compare(out.text.size() - kReplacement.size(), kReplacement.size(),
                           kReplacement) == 0)
        return;
      end -= stop_word_prefix(out.text, stop.words);
    }
    if (end > emitted) on_text(out.text.substr(emitted, end - emitted)), emitted = end;
  };

  torch::Tensor logits =
      model->decode_step(torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()),
                                       torch::TensorOptions().dtype(torch::kLong))
                             .to(device)
                             .unsqueeze(0),
                         cache)
          .squeeze(0);
  out.prefill_seconds = seconds_since();
  while (true) {
    if (cancel && cancel->load()) {
      out.stop = StopReason::Cancelled;
      break;
    }
    torch::Tensor scores = logits.to(torch::kCPU, torch::kFloat);
    apply_repetition_penalty(scores, sequence, options.repetition_penalty);
    const int32_t next = pick_token(scores, options, rng);
    if (std::find(stop.ids.begin(), stop.ids.end(), next) != stop.ids.end()) {
      out.stop = StopReason::Eos;
      break;
    }
    out.ids.push_back(next);
    sequence.push_back(next);
    out.text = tokenizer.decode(out.ids, /*skip_special_tokens=*/true);
    if (const std::size_t at = stop_word_at(out.text, stop.words); at != std::string::npos) {
      out.text.resize(at);
      out.stop = StopReason::StopWord;
      break;
    }
    emit(false);
    if (static_cast<int64_t>(out.ids.size()) >= options.max_new_tokens) {
      out.stop = StopReason::Length;
      break;
    }
    logits = model->decode_step(torch::tensor({static_cast<int64_t>(next)},
                                              torch::TensorOptions().dtype(torch::kLong))
                                    .to(device)
                                    .unsqueeze(0),
                                cache)
                 .squeeze(0);
  }
  emit(true);
  out.seconds = seconds_since();
  return out;
}

}  // namespace studio::trainer
