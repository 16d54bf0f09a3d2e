#pragma once
// Chat templates by their LLaMA-Factory names, and the encoding of conversations into training
// tokens exactly as LLaMA-Factory does it (see docs/templates.md for every string):
//   - the conversation is cut into (prompt, response) pairs, one per assistant turn;
//   - every slot element is tokenized on its own (prefix, system, query, response, bos/eos), so
//     token boundaries are LLaMA-Factory's, not those of the whole text tokenized at once;
//   - prompts are masked unless train_on_prompt; mask_history learns the last turn only;
//   - cutoff_len truncates turn by turn with infer_seqlen() on the remaining budget.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "studio/data/conversation.h"
#include "studio/data/sample.h"
#include "studio/data/tokenizer.h"

namespace studio::data {

// An unknown template name, a tokenizer lacking a token the template needs, or an option the
// template cannot honour.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One element of a slot list, as LLaMA-Factory's formatters hold them: literal text, where
// "{{content}}" stands for the message, or the tokenizer's bos / the template's eos token.
struct SlotElement {
  enum class Kind { Text, Bos, Eos };
  Kind kind = Kind::Text;
  std::string text;
};
using Slots = std::vector<SlotElement>;

struct ChatTemplate {
  std::string name;
  Slots user;         // a user query, up to the start of the assistant's answer
  Slots assistant;    // an answer, with whatever ends it
  Slots system;       // the system prompt
  Slots observation;  // a tool result (sharegpt "observation")
  Slots prefix;       // once, before the first message (e.g. bos)
  std::string default_system;          // used when a conversation has no system prompt
  // With replace_eos the first one is the eos token; LF adds the others to the tokenizer as
  // special tokens, so those the slots write must already be single tokens of the tokenizer.
  std::vector<std::string> stop_words;
  bool replace_eos = false;    // the template's eos is stop_words[0], not the tokenizer's
  bool efficient_eos = false;  // one eos after the last answer instead of one per answer
  bool system_in_first_user = false;  // LF Llama2Template: system text fused into query 1
  bool reasoning = false;             // LF ReasoningTemplate: empty thought blocks added
  std::string thought_open = "<think>\n";
  std::string thought_close = "\n</think>\n\n";

  std::string empty_thought() const { return thought_open + thought_close; }
};

// The templates this engine renders, by LLaMA-Factory name (docs/templates.md lists them);
// template_names() in a fixed order. Throws TemplateError naming the allowed ones for any other
// name.
const ChatTemplate& find_template(std::string_view name);
const std::vector<std::string>& template_names();

struct EncodeOptions {
  int64_t cutoff_len = 2048;       // tokens per sequence
  bool train_on_prompt = false;    // also learn prompt tokens
  bool mask_history = false;       // learn the last answer only
  bool enable_thinking = true;     // reasoning templates: LF's enable_thinking
  bool preserve_thinking = false;  // reasoning templates: keep history thoughts with mask_history
};

// LLaMA-Factory's infer_seqlen: the (source, target) lengths kept under cutoff_len. A short
// target is kept whole, else a short source is, else both shrink in proportion.
std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len,
                                         int64_t cutoff_len);

struct TextTurn {
  std::string prompt;
  std::string response;
};
struct TokenTurn {
  std::vector<int32_t> prompt;
  std::vector<int32_t> response;
};

// An SFT sample with what truncation did to it.
struct EncodedSft {
  TokenizedSample sample;
  int64_t full_length = 0;  // tokens before cutoff_len truncation
};
struct EncodedPair {
  PairSample pair;
  int64_t full_length = 0;  // prompt + the longer response, before truncation
};

// A template bound to a tokenizer. Immutable; usable from many threads at once.
class TemplateEncoder {
 public:
  // Resolves the bos/eos ids the template needs; throws TemplateError when the tokenizer lacks
  // them (e.g. qwen needs <|im_end|>) or lacks a stop word the slots write (glm4's <|user|>).
  TemplateEncoder(const ChatTemplate& tmpl, const Tokenizer& tokenizer);

  const ChatTemplate& chat_template() const { return tmpl_; }
  const Tokenizer& tokenizer() const { return tok_; }
  int32_t eos_id() const { return eos_id_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }

  // The (prompt, response) pairs of `messages` (user, assistant, user, assistant, ...), as LF's
  // encode_multiturn cuts them; `one_turn` instead puts everything before the last answer in a
  // single prompt (LF's encode_oneturn, used for preference data). Text renders bos/eos as their
  // token strings.
  std::vector<TextTurn> render_turns(const std::vector<Message>& messages,
                                     const std::string& system, const EncodeOptions& opt,
                                     bool one_turn = false) const;
  std::vector<TokenTurn> encode_turns(const std::vector<Message>& messages,
                                      const std::string& system, const EncodeOptions& opt,
                                      bool one_turn = false) const;
  // All turns concatenated: what the model reads (before truncation).
  std::string render(const std::vector<Message>& messages, const std::string& system,
                     const EncodeOptions& opt = {}) const;

  // LF's supervised processor: prompt + response[0], masked and truncated.
  EncodedSft encode_supervised(const Conversation& conv, const EncodeOptions& opt) const;
  // LLaMA-Factory v1's rendering: everything before response[0] one masked prompt (as LF's
  // encode_oneturn), response[0] learned, the first cutoff_len tokens kept; the answer may be cut
  // away entirely (v1 then drops the sample).
  EncodedSft encode_last_answer(const Conversation& conv, const EncodeOptions& opt) const;
  // LF's feedback (KTO) processor, for each of its two sequences: everything before response[0]
  // one masked prompt (LF's encode_oneturn), response[0] learned (with an eos after it for an
  // efficient_eos template), the two cut to cutoff_len by infer_seqlen. full_length: both before.
  EncodedSft encode_feedback(const Conversation& conv, const EncodeOptions& opt) const;
  // LF's pairwise processor: prompt + response[0] (chosen) and prompt + response[1] (rejected).
  EncodedPair encode_pairwise(const Conversation& conv, const EncodeOptions& opt) const;

 private:
  struct Piece;
  struct PieceTurn;
  std::vector<PieceTurn> piece_turns(std::vector<Message> messages, const std::string& system,
                                     const EncodeOptions& opt, bool one_turn) const;
  std::vector<bool> prepare_thoughts(std::vector<Message>& messages, const EncodeOptions& opt,
                                     bool one_turn) const;
  std::vector<PieceTurn> message_pieces(const std::vector<Message>& messages,
                                        const std::string& system) const;
  void append_slots(const Slots& slots, const std::string& content,
                    std::vector<Piece>& out) const;
  std::vector<int32_t> to_ids(const std::vector<Piece>& pieces) const;
  std::string to_text(const std::vector<Piece>& pieces) const;

  ChatTemplate tmpl_;
  Tokenizer tok_;
  int32_t eos_id_ = -1;
  std::optional<int32_t> bos_id_;
};

}  // namespace studio::data
