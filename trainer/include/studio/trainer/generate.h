#pragma once
// Text generation with a trained model: a key/value cache for incremental decoding, the logits
// processing of Hugging Face's generate() (repetition penalty, then temperature, top-k and top-p,
// in that order), stopping at end-of-sequence ids or stop words, and streamed text.
//
// Greedy decoding (temperature 0) picks the first maximum, as torch.argmax does, so that it gives
// transformers' generate(do_sample=False) token for token. Sampling draws from the filtered
// distribution with a generator seeded per request; the draws are reproducible for a seed but are
// not those of Python's torch.multinomial.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "studio/data/tokenizer.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model/kv_cache.h"

namespace studio::trainer {

struct SamplingOptions {
  int64_t max_new_tokens = 256;
  double temperature = 0.0;  // 0: greedy (top_k/top_p then play no part)
  double top_p = 1.0;        // (0, 1]: the smallest set of tokens holding this probability
  int64_t top_k = 0;         // 0: off
  double repetition_penalty = 1.0;  // HF's: > 1 discourages tokens already in the sequence
  uint64_t seed = 0;
};

// Empty when the options are usable, else what is wrong with which one.
std::string sampling_options_error(const SamplingOptions& options);

// HF's RepetitionPenaltyLogitsProcessor, in place on logits [V]: for every id in `seen`, a
// positive logit is divided by `penalty`, a negative one multiplied.
void apply_repetition_penalty(torch::Tensor& logits, const std::vector<int32_t>& seen,
                              double penalty);
// Temperature, then top-k (ties with the k-th logit kept), then top-p (the tokens whose
// cumulative probability from the least likely up is <= 1 - top_p are removed; the most likely
// is always kept), as HF's warpers: removed tokens get -inf. logits [V] fp32.
torch::Tensor warp_logits(const torch::Tensor& logits, const SamplingOptions& options);
// The next token: argmax for greedy, else a draw from softmax(warp_logits(...)).
int32_t pick_token(const torch::Tensor& logits, const SamplingOptions& options,
                   at::Generator& generator);

enum class StopReason { Eos, StopWord, Length, Cancelled };
const char* stop_reason_name(StopReason reason);

struct StopCriteria {
  std::vector<int32_t> ids;          // end of sequence: the token is not part of the answer
  std::vector<std::string> words;    // stop words that are not one token: cut from the text
};

struct Generation {
  std::vector<int32_t> ids;  // the new tokens, the stop token excluded
  std::string text;          // decoded, special tokens skipped, a stop word cut off
  StopReason stop = StopReason::Length;
  int64_t prompt_tokens = 0;
  double seconds = 0;        // prefill and decoding
  double prefill_seconds = 0;
};

// Generates an answer to `prompt` (a batch of one). `on_text` receives the text as it grows, in
// pieces that concatenate to Generation::text (held back while it ends inside a UTF-8 character
// or could be the start of a stop word). `cancel`, when set, ends generation at the next token.
Generation generate(CausalLM& model, const data::Tokenizer& tokenizer,
                    const std::vector<int32_t>& prompt, const SamplingOptions& options,
                    const StopCriteria& stop,
                    const std::function<void(const std::string&)>& on_text = {},
                    const std::atomic<bool>* cancel = nullptr);

}  // namespace studio::trainer
