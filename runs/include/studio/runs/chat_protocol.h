#pragma once
// The JSON-lines protocol of `studio-train chat --json` (docs/CHAT.md), read and written here for
// both sides: the studio writes requests and reads events; the engine reads the requests from its
// stdin and writes the events to its stdout. One JSON object per line; keys in sorted order.
// Plain C++ (no Qt, no Torch).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace studio::chat {

// ---- Requests: the engine's stdin ----

struct Message {
  std::string role;  // "user" or "assistant"
  std::string content;
  bool operator==(const Message& o) const { return role == o.role && content == o.content; }
};

// The answer to the conversation so far; an unset choice is the engine's command-line value.
struct Request {
  std::vector<Message> messages;  // user, assistant, user, ...: alternating, non-empty
  std::optional<std::string> system;
  std::optional<std::int64_t> max_new_tokens;
  std::optional<double> temperature;  // 0: greedy
  std::optional<double> top_p;
  std::optional<std::int64_t> top_k;  // 0: off
  std::optional<double> repetition_penalty;
  std::optional<std::uint64_t> seed;  // of the sampler, per answer
};

// The line (with its newline) asking for `request`. A double is written in its shortest form
// that reads back the same, a whole one up to 2^53 without a fraction ("temperature":0), the
// bytes the studio has always sent.
std::string request_line(const Request& request);
// The line that ends the answer being generated at its next token: {"cancel":true}.
std::string cancel_line();

// One line of the engine's stdin, read.
struct RequestLine {
  enum class Kind {
    Blank,    // only spaces, tabs and CRs: skipped
    NotJson,  // error: "stdin line N is not JSON: ..." (answered at once)
    Cancel,   // {"cancel": true}: ends the answer being generated, else the next one waiting
    Request,  // request
    Invalid,  // error: why the request cannot be answered (in its turn, as an answer would be)
  };
  Kind kind = Kind::Blank;
  chat::Request request;
  std::string error;
};

// Reads line `number` (from 1) of the engine's stdin. A request must be an object whose
// "messages" is a non-empty array of {role, content} strings alternating user and assistant
// from user; "system" is a string and the sampling choices numbers. Their ranges are the
// engine's to check.
RequestLine read_request_line(std::string_view line, std::int64_t number);

// ---- Events: the engine's stdout ----

// The ready event: the model loaded and how the engine will talk to it.
struct ModelInfo {
  std::string model;         // the model folder, absolute
  std::string architecture;  // config.json's architectures[0], e.g. "Qwen2ForCausalLM"
  std::int64_t parameters = 0;
  std::string template_name;    // "template": the chat template in use
  std::string template_source;  // "--template", "config.yaml" or "guessed"
  std::string device;           // "cpu", "cuda:0", ...
  std::string dtype;            // "float32", "bfloat16", ...
  std::vector<std::int64_t> stop_ids;
  std::vector<std::string> stop_words;
  double load_seconds = 0;
};

// The done event: one whole answer and its numbers.
struct Answer {
  std::string text;  // the token events' texts, concatenated
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> prompt_ids;
  std::int64_t prompt_tokens = 0;
  std::int64_t new_tokens = 0;
  std::string stop;  // "eos", "stop_word", "length" or "cancelled"
  double seconds = 0;
  double prefill_seconds = 0;
  double tokens_per_sec = 0;  // decoding speed after the first token
};

// The lines (with their newlines) of the four events. Text that is not UTF-8 is written with
// U+FFFD in place of each bad byte sequence.
std::string ready_line(const ModelInfo& info);
std::string token_line(std::string_view text);
std::string done_line(const Answer& answer);
std::string error_line(std::string_view message);

struct Event {
  enum class Kind {
    Ready,    // info
    Token,    // text: the next piece of the answer
    Done,     // answer
    Error,    // text: why the engine refused a request (the session goes on)
    Unknown,  // text: the line (an event this reader does not know)
    NotJson,  // text: the line (not a JSON object)
  };
  Kind kind = Kind::Unknown;
  ModelInfo info;
  std::string text;
  Answer answer;
  // Fields read as empty for a value of an unexpected type, e.g. "done: new_tokens: not an
  // integer (got \"3\")". An absent field is no problem: it keeps its default.
  std::vector<std::string> problems;
};

// One line of the engine's stdout (without its newline), read field by field: a field of an
// unexpected type costs that field, not the event.
Event read_event(std::string_view line);

// The engine's stdout, fed in whatever chunks the pipe delivers: each complete line becomes an
// event (a CR before its newline dropped); a partial last line waits for its newline. Lines of
// whitespace only are skipped.
class EventReader {
 public:
  std::vector<Event> feed(std::string_view bytes);
  std::size_t pending_bytes() const { return partial_.size(); }

 private:
  std::string partial_;
};

}  // namespace studio::chat
