// Turning messages into (prompt, response) pieces the way LLaMA-Factory's Template._encode and
// ReasoningTemplate do. A piece is one slot element: text tokenized on its own, or a token id.
// Rendering and encoding both start from the same pieces, so the text tests check is the text
// that is tokenized.
#include <algorithm>

#include "studio/data/chat_template.h"

namespace studio::data {

struct TemplateEncoder::Piece {
  std::string text;
  int32_t id = -1;  // >= 0: a token id (bos/eos), text unused
};

struct TemplateEncoder::PieceTurn {
  std::vector<Piece> prompt;
  std::vector<Piece> response;
};

std::string_view to_string(Role role) {
  switch (role) {
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
    case Role::System: return "system";
    case Role::Function: return "function";
    case Role::Observation: return "observation";
  }
  return "?";
}

namespace {

bool uses_eos(const ChatTemplate& t) {
  if (t.efficient_eos) return true;
  for (const Slots* slots : {&t.user, &t.assistant, &t.system, &t.observation, &t.prefix})
    for (const SlotElement& e : *slots)
      if (e.kind == SlotElement::Kind::Eos) return true;
  return false;
}

bool slots_write(const ChatTemplate& t, const std::string& word) {
  for (const Slots* slots : {&t.user, &t.assistant, &t.system, &t.observation, &t.prefix})
    for (const SlotElement& e : *slots)
      if (e.kind == SlotElement::Kind::Text && e.text.find(word) != std::string::npos) return true;
  return false;
}

// LF's remove_thought: drops every non-greedy open...close block, then leading newlines.
std::string remove_thought(std::string content, const ChatTemplate& t) {
  std::size_t from = 0;
  while (true) {
    const std::size_t open = content.find(t.thought_open, from);
    if (open == std::string::npos) break;
    const std::size_t close = content.find(t.thought_close, open + t.thought_open.size());
    if (close == std::string::npos) break;
    content.erase(open, close + t.thought_close.size() - open);
    from = open;
  }
  const std::size_t first = content.find_first_not_of('\n');
  return first == std::string::npos ? std::string() : content.substr(first);
}

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// An answer that already carries a thought (or a stray tag) gets no empty one.
bool has_thought_tag(const std::string& content, const ChatTemplate& t) {
  return content.find(trim(t.thought_open)) != std::string::npos ||
         content.find(trim(t.thought_close)) != std::string::npos;
}

}  // namespace

TemplateEncoder::TemplateEncoder(const ChatTemplate& tmpl, const Tokenizer& tokenizer)
    : tmpl_(tmpl), tok_(tokenizer), bos_id_(tokenizer.bos_id()) {
  // LF's fix_special_tokens makes every stop word (but a replaced eos) a special token, which
  // then encodes whole wherever the text has it. One the slots write must be so already: else
  // LF's ids would hold a new token, or split it where LF does not. A stop word the slots never
  // write (llama3's <|eom_id|>) changes no encoding.
  for (std::size_t i = tmpl_.replace_eos ? 1 : 0; i < tmpl_.stop_words.size(); ++i) {
    const std::string& word = tmpl_.stop_words[i];
    if (!slots_write(tmpl_, word)) continue;
    const auto id = tok_.token_to_id(word);
    if (!id || tok_.encode(word, false) != std::vector<int32_t>{*id})
      throw TemplateError("template '" + tmpl_.name + "' writes the stop word " + word +
                          ", which LLaMA-Factory makes a special token: " + tok_.source() +
                          " does not have it as one (use the model's own tokenizer)");
  }
  // LF would add a missing stop word as a new token, which a model without resized embeddings
  // cannot train on: refuse the pairing instead.
  if (tmpl_.replace_eos && !tmpl_.stop_words.empty()) {
    const std::string& word = tmpl_.stop_words.front();
    auto id = tok_.token_to_id(word);
    if (!id)
      throw TemplateError("template '" + tmpl_.name + "' ends answers with " + word + ", which " +
                          tok_.source() + " does not have as a token");
    eos_id_ = *id;
    return;
  }
  if (!uses_eos(tmpl_)) return;
  // LF gives a tokenizer without an eos token <|endoftext|>; it must exist already here since
  // the model's embeddings are not resized.
  auto id = tok_.eos_id();
  if (!id) id = tok_.token_to_id("<|endoftext|>");
  if (!id)
    throw TemplateError("template '" + tmpl_.name + "' needs an eos token: " + tok_.source() +
                        " has none (no eos_token in tokenizer_config.json, no <|endoftext|>)");
  eos_id_ = *id;
}

void TemplateEncoder::append_slots(const Slots& slots, const std::string& content,
                                   std::vector<Piece>& out) const {
  static const std::string kPlaceholder = "{{content}}";
  for (const SlotElement& e : slots) {
    switch (e.kind) {
      case SlotElement::Kind::Text: {
        std::string s = e.text;
        const std::size_t at = s.find(kPlaceholder);
        if (at != std::string::npos) s.replace(at, kPlaceholder.size(), content);
        if (!s.empty()) out.push_back({std::move(s), -1});
        break;
      }
      case SlotElement::Kind::Bos:
        if (bos_id_) out.push_back({{}, *bos_id_});
        break;
      case SlotElement::Kind::Eos:
        if (eos_id_ >= 0) out.push_back({{}, eos_id_});
        break;
    }
  }
}

// LF's ReasoningTemplate, before encoding: drops the thoughts that are not trained and returns
// which turns may receive an empty thought (if their answer has none).
std::vector<bool> TemplateEncoder::prepare_thoughts(std::vector<Message>& messages,
                                                    const EncodeOptions& opt, bool one_turn) const {
  const std::size_t n = messages.size();
  std::vector<bool> eligible(n / 2, false);
  if (!tmpl_.reasoning) return eligible;
  const bool drop_history = one_turn ? !opt.preserve_thinking : (opt.mask_history && !opt.preserve_thinking);
  for (std::size_t i = 1; i < n; i += 2) {
    const bool last = i == n - 1;
    // encode_oneturn drops the last thought for enable_thinking=false, encode_multiturn all.
    const bool drop = (drop_history && !last) || (!opt.enable_thinking && (last || !one_turn));
    if (drop) messages[i].content = remove_thought(messages[i].content, tmpl_);
  }
  for (std::size_t t = 0; t < n / 2; ++t) eligible[t] = !(one_turn || drop_history) || t == n / 2 - 1;
  return eligible;
}

// LF's Template._encode: turn 1's prompt is prefix + system + query; later prompts the query.
std::vector<TemplateEncoder::PieceTurn> TemplateEncoder::message_pieces(
    const std::vector<Message>& messages, const std::string& system) const {
  const std::string& sys = system.empty() ? tmpl_.default_system : system;
  std::vector<PieceTurn> turns(messages.size() / 2);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    std::vector<Piece>& out = i % 2 == 0 ? turns[i / 2].prompt : turns[i / 2].response;
    std::string content = messages[i].content;
    if (i == 0) {
      append_slots(tmpl_.prefix, {}, out);
      if (!sys.empty() && tmpl_.system_in_first_user) {  // LF's Llama2Template
        std::vector<Piece> fused;
        append_slots({tmpl_.system.front()}, sys, fused);
        content = (fused.empty() ? std::string() : fused.front().text) + content;
      } else if (!sys.empty()) {
        append_slots(tmpl_.system, sys, out);
      }
    }
    switch (messages[i].role) {
      case Role::User: append_slots(tmpl_.user, content, out); break;
      case Role::Assistant: append_slots(tmpl_.assistant, content, out); break;
      case Role::Observation: append_slots(tmpl_.observation, content, out); break;
      case Role::Function:
      case Role::System:
        throw TemplateError("message " + std::to_string(i + 1) + " has role '" +
                            std::string(to_string(messages[i].role)) +
                            "', which templates do not render here (tool calls are not supported)");
    }
  }
  return turns;
}

std::vector<TemplateEncoder::PieceTurn> TemplateEncoder::piece_turns(
    std::vector<Message> messages, const std::string& system, const EncodeOptions& opt,
    bool one_turn) const {
  if (messages.empty() || messages.size() % 2 != 0)
    throw TemplateError("a conversation needs (query, answer) pairs; got " +
                        std::to_string(messages.size()) + " messages");
  const std::vector<bool> eligible = prepare_thoughts(messages, opt, one_turn);
  std::vector<PieceTurn> turns = message_pieces(messages, system);

  for (std::size_t t = 0; t < turns.size(); ++t) {
    if (!eligible[t] || has_thought_tag(messages[2 * t + 1].content, tmpl_)) continue;
    Piece thought{tmpl_.empty_thought(), -1};  // its own element, encoded alone as LF does
    if (opt.enable_thinking)  // learned: the model is taught to emit the empty block
      turns[t].response.insert(turns[t].response.begin(), thought);
    else
      turns[t].prompt.push_back(thought);
  }
  if (!one_turn || turns.size() == 1) return turns;

  PieceTurn merged;  // everything before the last answer is one prompt
  for (std::size_t t = 0; t < turns.size(); ++t) {
    merged.prompt.insert(merged.prompt.end(), turns[t].prompt.begin(), turns[t].prompt.end());
    auto& r = turns[t].response;
    if (t + 1 < turns.size()) merged.prompt.insert(merged.prompt.end(), r.begin(), r.end());
    else merged.response = r;
  }
  return {merged};
}

std::vector<int32_t> TemplateEncoder::to_ids(const std::vector<Piece>& pieces) const {
  std::vector<int32_t> ids;
  for (const Piece& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    std::vector<int32_t> part = tok_.encode(p.text, false);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::string TemplateEncoder::to_text(const std::vector<Piece>& pieces) const {
  std::string text;
  for (const Piece& p : pieces)
    text += p.id >= 0 ? tok_.id_to_token(p.id).value_or("<id " + std::to_string(p.id) + ">")
                      : p.text;
  return text;
}

std::vector<TextTurn> TemplateEncoder::render_turns(const std::vector<Message>& messages,
                                                    const std::string& system,
                                                    const EncodeOptions& opt, bool one_turn) const {
  std::vector<TextTurn> out;
  for (const PieceTurn& t : piece_turns(messages, system, opt, one_turn))
    out.push_back({to_text(t.prompt), to_text(t.response)});
  return out;
}

std::vector<TokenTurn> TemplateEncoder::encode_turns(const std::vector<Message>& messages,
                                                     const std::string& system,
                                                     const EncodeOptions& opt, bool one_turn) const {
  std::vector<TokenTurn> out;
  for (const PieceTurn& t : piece_turns(messages, system, opt, one_turn))
    out.push_back({to_ids(t.prompt), to_ids(t.response)});
  return out;
}

std::string TemplateEncoder::render(const std::vector<Message>& messages,
                                    const std::string& system, const EncodeOptions& opt) const {
  std::string text;
  for (const TextTurn& t : render_turns(messages, system, opt)) text += t.prompt + t.response;
  return text;
}

}  // namespace studio::data
