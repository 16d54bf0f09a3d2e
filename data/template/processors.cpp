// LLaMA-Factory's supervised and pairwise processors: masking and cutoff_len truncation of the
// (prompt, response) pairs a template produced.
#include <algorithm>

#include "studio/data/chat_template.h"

namespace studio::data {

std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len,
                                         int64_t cutoff_len) {
  int64_t max_target_len = 0;
  if (target_len * 2 < cutoff_len) {
    max_target_len = cutoff_len;  // short answer: keep it, cut the prompt
  } else if (source_len * 2 < cutoff_len) {
    max_target_len = cutoff_len - source_len;  // short prompt: keep it, cut the answer
  } else {  // both long: each keeps its share (Python's int() truncates toward zero)
    max_target_len = static_cast<int64_t>(static_cast<double>(cutoff_len) *
                                          (static_cast<double>(target_len) /
                                           static_cast<double>(source_len + target_len)));
  }
  const int64_t new_target_len = std::min(max_target_len, target_len);
  const int64_t max_source_len = std::max<int64_t>(cutoff_len - new_target_len, 0);
  const int64_t new_source_len = std::min(max_source_len, source_len);
  return {new_source_len, new_target_len};
}

namespace {

std::vector<int64_t> widen(const std::vector<int32_t>& ids, std::size_t n) {
  return std::vector<int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<Message> with_answer(const Conversation& conv, std::size_t which) {
  std::vector<Message> messages = conv.prompt;
  messages.push_back(conv.response.at(which));
  return messages;
}

struct Chunk {
  std::vector<int64_t> ids;
  std::vector<int64_t> labels;
};

// LF's encode_oneturn of the prompt and response[which], with the eos an efficient_eos template
// adds after the answer (as LF's pairwise and feedback processors do).
TokenTurn one_turn(const TemplateEncoder& enc, const Conversation& conv, std::size_t which,
                   const EncodeOptions& opt) {
  TokenTurn t = enc.encode_turns(with_answer(conv, which), conv.system, opt, true).front();
  if (enc.chat_template().efficient_eos) t.response.push_back(enc.eos_id());
  return t;
}

// The first `prompt_len` prompt tokens, masked, then the first `answer_len` answer tokens.
TokenizedSample masked_prompt(const std::vector<int32_t>& prompt, std::size_t prompt_len,
                              const std::vector<int32_t>& answer, std::size_t answer_len) {
  TokenizedSample s;
  s.input_ids = widen(prompt, std::min(prompt_len, prompt.size()));
  s.labels.assign(s.input_ids.size(), kIgnoreIndex);
  const std::vector<int64_t> target = widen(answer, std::min(answer_len, answer.size()));
  s.input_ids.insert(s.input_ids.end(), target.begin(), target.end());
  s.labels.insert(s.labels.end(), target.begin(), target.end());
  return s;
}

}  // namespace

EncodedSft TemplateEncoder::encode_supervised(const Conversation& conv,
                                              const EncodeOptions& opt) const {
  if (opt.train_on_prompt && tmpl_.efficient_eos)
    throw TemplateError("template '" + tmpl_.name + "' does not support train_on_prompt");
  std::vector<TokenTurn> turns = encode_turns(with_answer(conv, 0), conv.system, opt);
  const int64_t eos_extra = tmpl_.efficient_eos ? 1 : 0;

  EncodedSft out;
  out.full_length = eos_extra;
  for (const TokenTurn& t : turns)
    out.full_length += static_cast<int64_t>(t.prompt.size() + t.response.size());

  // mask_history walks the turns from the last one, so truncation spares the learned turn.
  if (opt.mask_history) std::reverse(turns.begin(), turns.end());
  std::vector<Chunk> chunks;
  int64_t total = eos_extra;
  for (std::size_t turn = 0; turn < turns.size(); ++turn) {
    if (total >= opt.cutoff_len) break;
    const TokenTurn& t = turns[turn];
    const auto [source_len, target_len] =
        infer_seqlen(static_cast<int64_t>(t.prompt.size()),
                     static_cast<int64_t>(t.response.size()), opt.cutoff_len - total);
    total += source_len + target_len;
    Chunk c;
    c.ids = widen(t.prompt, static_cast<std::size_t>(source_len));
    if (opt.train_on_prompt) {
      c.labels = c.ids;
    } else {
      c.labels.assign(c.ids.size(), kIgnoreIndex);
      // With efficient_eos the previous answer's eos is learned at this prompt's first token.
      if (tmpl_.efficient_eos && turn != 0 && !c.labels.empty()) c.labels.front() = eos_id_;
    }
    std::vector<int64_t> target = widen(t.response, static_cast<std::size_t>(target_len));
    const bool learned = !(opt.mask_history && turn != 0);
    c.labels.insert(c.labels.end(), learned ? target.begin() : target.end(), target.end());
    if (!learned) c.labels.resize(c.labels.size() + target.size(), kIgnoreIndex);
    c.ids.insert(c.ids.end(), target.begin(), target.end());
    chunks.push_back(std::move(c));
  }
  if (opt.mask_history) std::reverse(chunks.begin(), chunks.end());

  TokenizedSample& s = out.sample;
  for (const Chunk& c : chunks) {
    s.input_ids.insert(s.input_ids.end(), c.ids.begin(), c.ids.end());
    s.labels.insert(s.labels.end(), c.labels.begin(), c.labels.end());
  }
  if (tmpl_.efficient_eos) {
    s.input_ids.push_back(eos_id_);
    s.labels.push_back(eos_id_);
  }
  return out;
}

EncodedSft TemplateEncoder::encode_last_answer(const Conversation& conv,
                                               const EncodeOptions& opt) const {
  const TokenTurn t = one_turn(*this, conv, 0, opt);
  EncodedSft out;
  out.full_length = static_cast<int64_t>(t.prompt.size() + t.response.size());
  const auto keep = static_cast<std::size_t>(std::min<int64_t>(out.full_length, opt.cutoff_len));
  const std::size_t prompt_len = std::min(keep, t.prompt.size());
  out.sample = masked_prompt(t.prompt, prompt_len, t.response, keep - prompt_len);
  return out;
}

EncodedSft TemplateEncoder::encode_feedback(const Conversation& conv,
                                            const EncodeOptions& opt) const {
  const TokenTurn t = one_turn(*this, conv, 0, opt);
  const auto [source_len, target_len] =
      infer_seqlen(static_cast<int64_t>(t.prompt.size()),
                   static_cast<int64_t>(t.response.size()), opt.cutoff_len);
  EncodedSft out;
  out.full_length = static_cast<int64_t>(t.prompt.size() + t.response.size());
  out.sample = masked_prompt(t.prompt, static_cast<std::size_t>(source_len), t.response,
                             static_cast<std::size_t>(target_len));
  return out;
}

EncodedPair TemplateEncoder::encode_pairwise(const Conversation& conv,
                                             const EncodeOptions& opt) const {
  if (conv.response.size() < 2)
    throw TemplateError("a preference example needs a chosen and a rejected answer");
  // As LF: the prompt comes from the chosen conversation; both answers are encoded one-turn.
  const TokenTurn chosen = one_turn(*this, conv, 0, opt);
  const TokenTurn rejected = one_turn(*this, conv, 1, opt);
  const auto longest = static_cast<int64_t>(std::max(chosen.response.size(), rejected.response.size()));
  const auto prompt_len = static_cast<int64_t>(chosen.prompt.size());
  // The answers matter more than the prompt: infer_seqlen keeps short answers whole.
  const auto [source_len, target_len] = infer_seqlen(prompt_len, longest, opt.cutoff_len);

  EncodedPair out;
  out.full_length = prompt_len + longest;
  out.pair.prompt_len = source_len;
  const auto keep_prompt = static_cast<std::size_t>(source_len);
  const auto keep_answer = static_cast<std::size_t>(target_len);
  out.pair.chosen = masked_prompt(chosen.prompt, keep_prompt, chosen.response, keep_answer);
  out.pair.rejected = masked_prompt(chosen.prompt, keep_prompt, rejected.response, keep_answer);
  return out;
}

}  // namespace studio::data
