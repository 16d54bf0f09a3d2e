#include "studio/runs/chat_protocol.h"

#include <charconv>
#include <cmath>
#include <map>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "studio/base/whole_number.h"

namespace studio::chat {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string line_of(const json& j) {
  return dump(j) + '\n';
}

json parse(std::string_view line) {
  return json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
}

// A double in its shortest form that reads back the same (the form QJsonDocument gives the
// requests the studio has always written): a whole number up to 2^53 as an integer; otherwise
// decimal, unless the exponent form (at least two exponent digits) is shorter. Not finite: null.
std::string number_text(double d) {
  if (!std::isfinite(d)) return "null";
  if (d == 0) return "0";
  char buf[32];
  const char* end =
      std::to_chars(buf, buf + sizeof buf, std::abs(d), std::chars_format::scientific).ptr;
  // "D.DDDe+XX": |d| = 0.DDDD x 10^decpt
  const std::string_view sci(buf, static_cast<std::size_t>(end - buf));
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  bool decimal = std::abs(d) <= 9007199254740992.0 && d == std::trunc(d);
  if (!decimal) {
    // What the exponent form adds ("e+XX" and maybe ".") against what decimal adds (the dot,
    // the padding zeros).
    int bias = 4;
    if (n <= decpt && n > 1)
      ++bias;
    else if (n == 1 && decpt <= 0)
      --bias;
    decimal = decpt <= 0 ? 1 - decpt <= bias : decpt <= n + bias;
  }
  std::string out = d < 0 ? "-" : "";
  if (!decimal) {
    out += digits[0];
    if (n > 1) out += '.' + digits.substr(1);
    out += exponent < 0 ? "e-" : "e+";
    if (std::abs(exponent) < 10) out += '0';
    return out + std::to_string(std::abs(exponent));
  }
  if (decpt <= 0) return out + "0." + std::string(-decpt, '0') + digits;
  if (decpt >= n) return out + digits + std::string(decpt - n, '0');
  return out + digits.substr(0, decpt) + '.' + digits.substr(decpt);
}

// Empty when `j` is a request, else why not (the engine's error message); the shape is checked
// in the order of the fields, the first problem reported.
std::string read_request(const json& j, Request& r) {
  if (!j.is_object()) return "a request is a JSON object";
  const auto messages = j.find("messages");
  if (messages == j.end() || !messages->is_array() || messages->empty())
    return "\"messages\" must be a non-empty array of {role, content}";
  for (const json& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      return "every message needs a string \"role\" and \"content\"";
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      return "message role '" + role + "' is not user or assistant";
    r.messages.push_back({role, m["content"].get<std::string>()});
  }
  for (std::size_t i = 0; i < r.messages.size(); ++i)
    if ((r.messages[i].role == "user") != (i % 2 == 0))
      return "messages must alternate user, assistant, user, ... (message " +
             std::to_string(i + 1) + " does not)";
  if (const auto system = j.find("system"); system != j.end()) {
    if (!system->is_string()) return "\"system\" must be a string";
    r.system = system->get<std::string>();
  }
  std::string error;
  const auto number = [&](const char* key, auto& field) {
    const auto it = j.find(key);
    if (!error.empty() || it == j.end()) return;
    if (!it->is_number()) {
      error = std::string("\"") + key + "\" must be a number";
      return;
    }
    field = it->template get<typename std::decay_t<decltype(field)>::value_type>();
  };
  number("max_new_tokens", r.max_new_tokens);
  number("temperature", r.temperature);
  number("top_p", r.top_p);
  number("top_k", r.top_k);
  number("repetition_penalty", r.repetition_penalty);
  number("seed", r.seed);
  return error;
}

// Reads the fields of one event; a field of an unexpected type reads as empty and is reported
// as "EVENT: KEY: not a ... (got VALUE)". An absent field is no problem: it keeps its default.
class Fields {
 public:
  Fields(const json& object, std::string event, std::vector<std::string>& problems)
      : object_(object), event_(std::move(event)), problems_(problems) {}

  std::string string(const char* key) const {
    const json* v = find(key);
    if (v && v->is_string()) return v->get<std::string>();
    if (v) problem(key, "not a string", *v);
    return {};
  }
  double number(const char* key) const {
    const json* v = find(key);
    if (v && v->is_number()) return v->get<double>();
    if (v) problem(key, "not a number", *v);
    return 0;
  }
  std::int64_t integer(const char* key) const {
    const json* v = find(key);
    std::int64_t out = 0;
    if (v && !json_whole(*v, out).empty()) problem(key, "not an integer", *v);
    return out;
  }
  // The whole list, or none of it when one element is not an integer.
  std::vector<std::int64_t> integers(const char* key) const {
    std::vector<std::int64_t> out;
    const json* v = find(key);
    if (!v) return out;
    for (std::size_t i = 0; v->is_array() && i < v->size(); ++i)
      if (std::int64_t x = 0; json_whole((*v)[i], x).empty())
        out.push_back(x);
      else
        break;
    if (v->is_array() && out.size() == v->size()) return out;
    problem(key, "not a list of integers", *v);
    return {};
  }
  // The whole list, or none of it when one element is not a string.
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    const json* v = find(key);
    if (!v) return out;
    for (std::size_t i = 0; v->is_array() && i < v->size() && (*v)[i].is_string(); ++i)
      out.push_back((*v)[i].get<std::string>());
    if (v->is_array() && out.size() == v->size()) return out;
    problem(key, "not a list of strings", *v);
    return {};
  }

 private:
  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  void problem(const char* key, const char* what, const json& v) const {
    // cut to keep a message short
    problems_.push_back(event_ + ": " + key + ": " + what + " (got " + dump(v).substr(0, 80) + ")");
  }

  const json& object_;
  std::string event_;
  std::vector<std::string>& problems_;
};

ModelInfo read_info(const Fields& f) {
  ModelInfo info;
  info.model = f.string("model");
  info.architecture = f.string("architecture");
  info.template_name = f.string("template");
  info.template_source = f.string("template_source");
  info.device = f.string("device");
  info.dtype = f.string("dtype");
  info.parameters = f.integer("parameters");
  info.load_seconds = f.number("load_seconds");
  info.stop_ids = f.integers("stop_ids");
  info.stop_words = f.strings("stop_words");
  return info;
}

Answer read_answer(const Fields& f) {
  Answer a;
  a.text = f.string("text");
  a.ids = f.integers("ids");
  a.prompt_tokens = f.integer("prompt_tokens");
  a.new_tokens = f.integer("new_tokens");
  a.stop = f.string("stop");
  a.seconds = f.number("seconds");
  a.tokens_per_sec = f.number("tokens_per_sec");
  a.prompt_ids = f.integers("prompt_ids");
  a.prefill_seconds = f.number("prefill_seconds");
  return a;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\n\v\f\r") == std::string_view::npos;
}

}  // namespace

std::string request_line(const Request& request) {
  json messages = json::array();
  for (const Message& m : request.messages)
    messages.push_back({{"content", m.content}, {"role", m.role}});
  // Each key's value as text, in the keys' order (json objects are written sorted), so that the
  // doubles keep their form.
  std::map<std::string, std::string> fields{{"messages", dump(messages)}};
  if (request.system) fields["system"] = dump(*request.system);
  if (request.max_new_tokens) fields["max_new_tokens"] = std::to_string(*request.max_new_tokens);
  if (request.temperature) fields["temperature"] = number_text(*request.temperature);
  if (request.top_p) fields["top_p"] = number_text(*request.top_p);
  if (request.top_k) fields["top_k"] = std::to_string(*request.top_k);
  if (request.repetition_penalty)
    fields["repetition_penalty"] = number_text(*request.repetition_penalty);
  if (request.seed) fields["seed"] = std::to_string(*request.seed);
  std::string line = "{";
  for (const auto& [key, value] : fields)
    line += (line.size() > 1 ? ",\"" : "\"") + key + "\":" + value;
  return line + "}\n";
}

std::string cancel_line() {
  return line_of({{"cancel", true}});
}

RequestLine read_request_line(std::string_view line, std::int64_t number) {
  RequestLine out;
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return out;
  const json j = parse(line);
  if (j.is_discarded()) {
    out.kind = RequestLine::Kind::NotJson;
    out.error = "stdin line " + std::to_string(number) +
                " is not JSON: " + std::string(line.substr(0, 200));
    return out;
  }
  if (const auto cancel = j.is_object() ? j.find("cancel") : j.end(); cancel != j.end()) {
    if (!cancel->is_boolean()) {
      out.kind = RequestLine::Kind::Invalid;
      out.error = "\"cancel\" must be true or false";
      return out;
    }
    if (cancel->get<bool>()) {
      out.kind = RequestLine::Kind::Cancel;
      return out;
    }
  }
  out.error = read_request(j, out.request);
  out.kind = out.error.empty() ? RequestLine::Kind::Request : RequestLine::Kind::Invalid;
  return out;
}

std::string ready_line(const ModelInfo& info) {
  return line_of({{"event", "ready"},
                  {"model", info.model},
                  {"architecture", info.architecture},
                  {"parameters", info.parameters},
                  {"template", info.template_name},
                  {"template_source", info.template_source},
                  {"device", info.device},
                  {"dtype", info.dtype},
                  {"stop_ids", info.stop_ids},
                  {"stop_words", info.stop_words},
                  {"load_seconds", info.load_seconds}});
}

std::string token_line(std::string_view text) {
  return line_of({{"event", "token"}, {"text", text}});
}

std::string done_line(const Answer& a) {
  return line_of({{"event", "done"},
                  {"text", a.text},
                  {"ids", a.ids},
                  {"prompt_ids", a.prompt_ids},
                  {"prompt_tokens", a.prompt_tokens},
                  {"new_tokens", a.new_tokens},
                  {"stop", a.stop},
                  {"seconds", a.seconds},
                  {"prefill_seconds", a.prefill_seconds},
                  {"tokens_per_sec", a.tokens_per_sec}});
}

std::string error_line(std::string_view message) {
  return line_of({{"event", "error"}, {"message", message}});
}

Event read_event(std::string_view line) {
  Event e;
  const json j = parse(line);
  if (j.is_discarded() || !j.is_object()) {
    e.kind = Event::Kind::NotJson;
    e.text = std::string(line);
    return e;
  }
  const auto event = j.find("event");
  const std::string name =
      event != j.end() && event->is_string() ? event->get<std::string>() : std::string();
  const Fields fields(j, name, e.problems);
  if (name == "ready") {
    e.kind = Event::Kind::Ready;
    e.info = read_info(fields);
  } else if (name == "token") {
    e.kind = Event::Kind::Token;
    e.text = fields.string("text");
  } else if (name == "done") {
    e.kind = Event::Kind::Done;
    e.answer = read_answer(fields);
  } else if (name == "error") {
    e.kind = Event::Kind::Error;
    e.text = fields.string("message");
  } else {
    e.kind = Event::Kind::Unknown;
    e.text = std::string(line);
  }
  return e;
}

std::vector<Event> EventReader::feed(std::string_view bytes) {
  std::vector<Event> events;
  std::size_t start = 0;
  for (std::size_t nl = bytes.find('\n'); nl != std::string_view::npos;
       nl = bytes.find('\n', start)) {
    std::string line = partial_;
    line += bytes.substr(start, nl - start);
    partial_.clear();
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!blank(line)) events.push_back(read_event(line));
  }
  partial_ += bytes.substr(start);
  return events;
}

}  // namespace studio::chat
