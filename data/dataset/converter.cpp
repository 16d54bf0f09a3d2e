#include "converter.h"

#include <algorithm>
#include <vector>

namespace studio::data::detail {
namespace {

using nlohmann::json;

std::string row_keys(const json& row) {
  std::string keys;
  for (const auto& [k, v] : row.items()) keys += (keys.empty() ? "" : ", ") + k;
  return keys.empty() ? "none" : keys;
}

// The value of the column mapped to `role`; nullptr when the row lacks it (or holds null) and
// the column is optional.
const json* column(const DatasetAttr& attr, const json& row, const std::string& role,
                   const std::string& name, bool required) {
  auto it = row.find(name);
  if (it != row.end() && !it->is_null()) return &*it;
  if (!required) return nullptr;
  throw RowError("has no column '" + name + "' (" + attr.describe_column(role) +
                 "; the row has: " + row_keys(row) + ")");
}

std::string as_string(const json& v, const std::string& what) {
  if (!v.is_string())
    throw RowError(what + " is a " + std::string(v.type_name()) + ", expected a string");
  return v.get<std::string>();
}

std::string string_column(const DatasetAttr& attr, const json& row, const std::string& role,
                          const std::string& name, bool required) {
  const json* v = column(attr, row, role, name, required);
  return v ? as_string(*v, "column '" + name + "'") : std::string();
}

// Tool definitions change what the system prompt says; rendering them is not implemented, so a
// row that has some is refused rather than trained without them.
void refuse_tools(const DatasetAttr& attr, const json& row) {
  if (attr.tools.empty()) return;
  const json* v = column(attr, row, "tools", attr.tools, false);
  if (v && !v->empty() && !(v->is_string() && v->get<std::string>().empty()))
    throw RowError("column '" + attr.tools + "' holds tool definitions, which are not supported");
}

std::vector<Message> alpaca_history(const DatasetAttr& attr, const json& row) {
  std::vector<Message> out;
  if (attr.history.empty()) return out;
  const json* h = column(attr, row, "history", attr.history, false);
  if (!h) return out;
  const std::string bad = "column '" + attr.history + "' must be a list of [query, answer] pairs";
  if (!h->is_array()) throw RowError(bad);
  for (const json& pair : *h) {
    if (!pair.is_array() || pair.size() != 2) throw RowError(bad);
    out.push_back({Role::User, as_string(pair[0], "a history query")});
    out.push_back({Role::Assistant, as_string(pair[1], "a history answer")});
  }
  return out;
}

// The user turns of an alpaca row: its history, then the query. LF joins instruction and input
// with a newline, leaving out the empty ones; v1 puts one right after the other, and needs only
// one of them.
std::vector<Message> alpaca_prompt(const DatasetAttr& attr, const json& row) {
  std::vector<Message> prompt = alpaca_history(attr, row);
  std::string query = string_column(attr, row, "prompt", attr.prompt, !attr.v1);
  const std::string input = string_column(attr, row, "query", attr.query, false);
  if (attr.v1 && !row.contains(attr.prompt) && !row.contains(attr.query))
    throw RowError("has neither '" + attr.prompt + "' nor '" + attr.query + "' (the row has: " +
                   row_keys(row) + ")");
  if (!input.empty()) query = query.empty() ? input : query + (attr.v1 ? "" : "\n") + input;
  prompt.push_back({Role::User, query});
  return prompt;
}

Converted convert_alpaca(const DatasetAttr& attr, const json& row, bool pairwise) {
  Conversation c;
  c.prompt = alpaca_prompt(attr, row);
  if (pairwise) {
    c.response.push_back({Role::Assistant, string_column(attr, row, "chosen", attr.chosen, true)});
    c.response.push_back({Role::Assistant, string_column(attr, row, "rejected", attr.rejected, true)});
  } else {
    c.response.push_back({Role::Assistant, string_column(attr, row, "response", attr.response, true)});
  }
  if (!attr.system.empty()) c.system = string_column(attr, row, "system", attr.system, false);
  refuse_tools(attr, row);
  return {std::move(c), {}};
}

// Rows in OpenAI form ({"role", "content"}) are read as such when dataset_info.json sets no
// tags and the row does not use the sharegpt keys.
DatasetAttr tags_for(const DatasetAttr& attr, const json& messages) {
  if (attr.tags_given || messages.empty() || !messages[0].is_object()) return attr;
  const json& first = messages[0];
  if (first.contains(attr.role_tag) || !first.contains("role")) return attr;
  DatasetAttr openai = attr;
  openai.use_openai_tags();
  return openai;
}

struct TaggedMessage {
  std::string role;
  std::string content;
};

TaggedMessage read_message(const DatasetAttr& t, const json& m, const std::string& what) {
  if (!m.is_object())
    throw RowError(what + " is a " + std::string(m.type_name()) + ", expected an object");
  auto role = m.find(t.role_tag);
  if (role == m.end())
    throw RowError(what + " has no '" + t.role_tag + "' (tags: role_tag=" + t.role_tag +
                   ", content_tag=" + t.content_tag + "; the message has: " + row_keys(m) + ")");
  auto content = m.find(t.content_tag);
  if (content == m.end())
    throw RowError(what + " has no '" + t.content_tag + "' (tags: content_tag=" + t.content_tag +
                   "; the message has: " + row_keys(m) + ")");
  return {as_string(*role, what + " '" + t.role_tag + "'"),
          as_string(*content, what + " '" + t.content_tag + "'")};
}

std::string expected_roles(const DatasetAttr& t, bool query) {
  return query ? "'" + t.user_tag + "' or '" + t.observation_tag + "'"
               : "'" + t.assistant_tag + "' or '" + t.function_tag + "'";
}

// nullopt: the role is not one LF accepts at this position.
std::optional<Role> role_at(const DatasetAttr& t, const std::string& role, bool query,
                            const std::string& what) {
  if (role == t.function_tag && !query)
    throw RowError(what + " is a tool call ('" + role + "'); tool calls are not supported");
  if (query && role == t.user_tag) return Role::User;
  if (query && role == t.observation_tag) return Role::Observation;
  if (!query && role == t.assistant_tag) return Role::Assistant;
  return std::nullopt;
}

std::optional<Message> preference_answer(const DatasetAttr& t, const json& row,
                                         const std::string& role, const std::string& name,
                                         std::string& skip) {
  const json* v = column(t, row, role, name, true);
  if (v->is_string()) return Message{Role::Assistant, v->get<std::string>()};
  const TaggedMessage m = read_message(t, *v, "column '" + name + "'");
  auto r = role_at(t, m.role, false, "column '" + name + "'");
  if (!r) {
    skip = "column '" + name + "' has role '" + m.role + "', expected " + expected_roles(t, false);
    return std::nullopt;
  }
  return Message{*r, m.content};
}

const json& message_list(const DatasetAttr& attr, const json& row) {
  const json* messages = column(attr, row, "messages", attr.messages, true);
  if (!messages->is_array())
    throw RowError("column '" + attr.messages + "' is a " + std::string(messages->type_name()) +
                   ", expected a list of messages");
  return *messages;
}

// 1 when the first message is the system prompt (LF takes it out before the turns), else 0.
std::size_t turns_start(const DatasetAttr& t, const json& messages) {
  if (t.system_tag.empty() || messages.empty()) return 0;
  return read_message(t, messages[0], "message 1").role == t.system_tag ? 1 : 0;
}

Converted convert_sharegpt(const DatasetAttr& attr, const json& row, bool pairwise) {
  const json* messages = &message_list(attr, row);
  const DatasetAttr t = tags_for(attr, *messages);
  Conversation c;
  const std::size_t start = turns_start(t, *messages);
  if (start == 1) c.system = read_message(t, (*messages)[0], "message 1").content;
  if (start == 0 && !attr.system.empty())
    c.system = string_column(attr, row, "system", attr.system, false);

  std::vector<Message> aligned;
  for (std::size_t i = start; i < messages->size(); ++i) {
    const std::string what = "message " + std::to_string(i + 1);
    const TaggedMessage m = read_message(t, (*messages)[i], what);
    const bool query = (i - start) % 2 == 0;
    auto role = role_at(t, m.role, query, what);
    if (!role)
      return {std::nullopt,
              what + " has role '" + m.role + "', expected " + expected_roles(t, query)};
    aligned.push_back({*role, m.content});
  }
  refuse_tools(attr, row);
  if (aligned.empty()) return {std::nullopt, "no messages"};
  if (!pairwise && aligned.size() % 2 != 0)
    return {std::nullopt, "the conversation does not end with an answer"};
  if (pairwise && aligned.size() % 2 == 0)
    return {std::nullopt, "a preference conversation must end with the query (the answers are "
                          "in '" + attr.chosen + "' and '" + attr.rejected + "')"};
  if (pairwise) {
    std::string skip;
    auto chosen = preference_answer(t, row, "chosen", attr.chosen, skip);
    auto rejected = chosen ? preference_answer(t, row, "rejected", attr.rejected, skip) : std::nullopt;
    if (!chosen || !rejected) return {std::nullopt, skip};
    c.prompt = std::move(aligned);
    c.response = {*chosen, *rejected};
  } else {
    c.response = {aligned.back()};
    aligned.pop_back();
    c.prompt = std::move(aligned);
  }
  return {std::move(c), {}};
}

// A row's kto_tag: true, false, or nullopt where it is null or missing (LF reads such a row as a
// plain example).
std::optional<bool> kto_tag_of(const DatasetAttr& attr, const json& row) {
  const json* v = column(attr, row, "kto_tag", attr.kto_tag, false);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw RowError("column '" + attr.kto_tag + "' is a " + std::string(v->type_name()) +
                   ", expected true (desirable) or false (undesirable) (" +
                   attr.describe_column("kto_tag") +
                   "; LLaMA-Factory's datasets cannot load a column that mixes such values with "
                   "bools)");
  return v->get<bool>();
}

// A KTO dataset (kto_tag set) outside stage kto: LF's converters give each tagged row two
// responses, which its sft processor drops; untagged rows stay plain examples.
Converted untagged_only(const DatasetAttr& attr, const json& row, Converted c) {
  if (attr.kto_tag.empty() || !c.conversation) return c;
  if (const std::optional<bool> tag = kto_tag_of(attr, row))
    return {std::nullopt, "column '" + attr.kto_tag + "' is " + (*tag ? "true" : "false") +
                              ": LLaMA-Factory gives a KTO row two responses, which its sft "
                              "processor drops (stage kto trains such rows)"};
  return c;
}

// LF's KTO responses: the answer and an empty one, the answer first when it is desirable.
std::vector<Message> kto_responses(Message answer, bool desirable) {
  Message empty{Role::Assistant, {}};
  if (desirable) return {std::move(answer), empty};
  return {empty, std::move(answer)};
}

std::string untagged(const DatasetAttr& attr) {
  return "column '" + attr.kto_tag + "' is null or missing, so LLaMA-Factory reads the row as a "
         "plain example, which its KTO processor drops";
}

ConvertedFeedback feedback_alpaca(const DatasetAttr& attr, const json& row,
                                  const std::optional<bool>& tag) {
  ConvertedFeedback out;
  Conversation& c = out.conversation;
  c.prompt = alpaca_prompt(attr, row);
  if (tag) {
    c.response = kto_responses(
        {Role::Assistant, string_column(attr, row, "response", attr.response, true)}, *tag);
  } else {
    out.skip_reason = untagged(attr);
    if (const json* v = column(attr, row, "response", attr.response, false); v && v->is_string())
      c.response.push_back({Role::Assistant, v->get<std::string>()});
  }
  if (!attr.system.empty()) c.system = string_column(attr, row, "system", attr.system, false);
  refuse_tools(attr, row);
  return out;
}

// The sharegpt converter's kto branch; LF checks roles and the message count first (a broken
// row has no messages at all).
ConvertedFeedback feedback_sharegpt(const DatasetAttr& attr, const json& row,
                                    const std::optional<bool>& tag) {
  Converted plain = convert_sharegpt(attr, row, false);
  ConvertedFeedback out;
  if (!plain.conversation) {
    out.skip_reason = std::move(plain.skip_reason);
    return out;
  }
  out.conversation = std::move(*plain.conversation);
  Conversation& c = out.conversation;
  if (tag) {
    Message answer = std::move(c.response.front());
    c.response = kto_responses(std::move(answer), *tag);
  } else {
    out.skip_reason = untagged(attr);
  }
  return out;
}

// Stage pt reads the first turn of a sharegpt row; the others only have to take turns as LF
// requires (it drops the row otherwise). No answer is needed, and tool calls do no harm.
ConvertedText sharegpt_text(const DatasetAttr& attr, const json& row) {
  const json& messages = message_list(attr, row);
  const DatasetAttr t = tags_for(attr, messages);
  const std::size_t start = turns_start(t, messages);
  if (start == messages.size()) return {std::nullopt, "no messages"};
  for (std::size_t i = start; i < messages.size(); ++i) {
    const std::string what = "message " + std::to_string(i + 1);
    const TaggedMessage m = read_message(t, messages[i], what);
    const bool query = (i - start) % 2 == 0;
    const bool accepted = query ? m.role == t.user_tag || m.role == t.observation_tag
                                : m.role == t.assistant_tag || m.role == t.function_tag;
    if (!accepted)
      return {std::nullopt,
              what + " has role '" + m.role + "', expected " + expected_roles(t, query)};
  }
  return {read_message(t, messages[start], "message " + std::to_string(start + 1)).content, {}};
}

// A message of LLaMA-Factory v1: a role, its text, and how much its tokens weigh in the loss.
struct V1Message {
  std::string role;
  std::string content;
  double loss_weight = 1.0;
};

// A list of messages as v1 writes them: content as text blocks ([{"type": "text", "value"}]) or,
// in the pair converter's input, a string.
std::vector<V1Message> v1_messages(const json& row, const std::string& column) {
  const json* list = &row.at(column);
  if (!list->is_array())
    throw RowError("column '" + column + "' is a " + std::string(list->type_name()) +
                   ", expected a list of messages");
  std::vector<V1Message> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    const std::string what = "column '" + column + "' message " + std::to_string(i + 1);
    if (!m.is_object() || !m.contains("role") || !m.contains("content"))
      throw RowError(what + " needs a role and a content");
    V1Message msg{as_string(m.at("role"), what + " role"), {}, 1.0};
    const json& content = m.at("content");
    if (content.is_string()) {
      msg.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const json& block : content) {
        const std::string type = block.is_object() ? block.value("type", "") : "";
        if (type != "text")
          throw RowError(what + " has content of type '" + type + "': only text is trained here");
        msg.content += as_string(block.value("value", json()), what + " text");
      }
    } else {
      throw RowError(what + " content is a " + std::string(content.type_name()) +
                     ", expected text or text blocks");
    }
    if (m.contains("loss_weight")) {
      if (!m.at("loss_weight").is_number()) throw RowError(what + " loss_weight must be a number");
      msg.loss_weight = m.at("loss_weight").get<double>();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// v1 messages as a conversation: a leading system message, then queries (user, tool) and answers
// (assistant) taking turns, ending with an answer. Which answers are learned comes from their
// loss_weight (0 or 1: weighted tokens are not implemented).
Converted v1_conversation(const std::vector<V1Message>& msgs, const std::string& column) {
  Converted out;
  Conversation c;
  std::size_t start = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    c.system = msgs[0].content;
    start = 1;
  }
  std::vector<Message> aligned;
  for (std::size_t i = start; i < msgs.size(); ++i) {
    const V1Message& m = msgs[i];
    const std::string what = "column '" + column + "' message " + std::to_string(i + 1);
    const bool query = (i - start) % 2 == 0;
    if (query && (m.role == "user" || m.role == "tool")) {
      aligned.push_back({m.role == "user" ? Role::User : Role::Observation, m.content});
    } else if (!query && m.role == "assistant") {
      if (m.loss_weight != 0.0 && m.loss_weight != 1.0)
        throw RowError(what + " has loss_weight " + std::to_string(m.loss_weight) +
                       ": weighted tokens are not implemented (0 or 1)");
      aligned.push_back({Role::Assistant, m.content});
      out.learned_answers.push_back(m.loss_weight != 0.0);
    } else {
      throw RowError(what + " has role '" + m.role + "' where " +
                     (query ? "a user or tool message" : "an assistant message") +
                     " belongs: studio-train's templates render turns in that order");
    }
  }
  if (aligned.empty() || aligned.back().role != Role::Assistant)
    throw RowError("column '" + column + "' does not end with an assistant message");
  c.response = {aligned.back()};
  aligned.pop_back();
  c.prompt = std::move(aligned);
  out.conversation = std::move(c);
  return out;
}

// v1 preference rows: two whole conversations that share everything before their last answer.
Converted v1_pair(const json& row, const std::string& chosen_col, const std::string& rejected_col) {
  for (const std::string& col : {chosen_col, rejected_col})
    if (!row.contains(col))
      throw RowError("has no column '" + col + "' (the row has: " + row_keys(row) + ")");
  Converted chosen = v1_conversation(v1_messages(row, chosen_col), chosen_col);
  Converted rejected = v1_conversation(v1_messages(row, rejected_col), rejected_col);
  Conversation& a = *chosen.conversation;
  const Conversation& b = *rejected.conversation;
  const bool same_prompt = a.system == b.system && a.prompt.size() == b.prompt.size() &&
                           std::equal(a.prompt.begin(), a.prompt.end(), b.prompt.begin(),
                                      [](const Message& x, const Message& y) {
                                        return x.role == y.role && x.content == y.content;
                                      });
  if (!same_prompt)
    throw RowError("'" + chosen_col + "' and '" + rejected_col + "' differ before their last "
                   "answer: a preference pair shares its prompt");
  a.response.push_back(b.response.front());
  return {std::move(chosen.conversation), {}, {}};
}

}  // namespace

Converted convert_row(const DatasetAttr& attr, const json& row, bool pairwise) {
  if (!row.is_object())
    throw RowError("is a " + std::string(row.type_name()) + ", expected a JSON object");
  if (attr.v1)  // v1's converters read media columns; training them is not implemented
    for (const char* media : {"images", "videos", "audios"})
      if (auto it = row.find(media); it != row.end() && !it->is_null() && !it->empty())
        throw RowError("has '" + std::string(media) + "': multimodal rows are not trained here");
  switch (attr.formatting) {
    case Formatting::Alpaca: return untagged_only(attr, row, convert_alpaca(attr, row, pairwise));
    case Formatting::Sharegpt:
      return untagged_only(attr, row, convert_sharegpt(attr, row, pairwise));
    case Formatting::V1Pair:
      refuse_tools(attr, row);
      if (!pairwise) throw RowError("holds preference pairs (converter: pair); stage sft needs "
                                    "conversations");
      return v1_pair(row, attr.chosen, attr.rejected);
    case Formatting::V1Messages: break;
  }
  refuse_tools(attr, row);
  if (pairwise) {
    if (row.contains("messages") && !row.contains("chosen_messages"))
      throw RowError("holds a conversation (messages); stage dpo needs chosen_messages and "
                     "rejected_messages");
    return v1_pair(row, "chosen_messages", "rejected_messages");
  }
  if (row.contains("chosen_messages") && !row.contains("messages"))
    throw RowError("holds a preference pair (chosen_messages); stage sft needs messages");
  if (!row.contains("messages"))
    throw RowError("has no column 'messages' (the row has: " + row_keys(row) + ")");
  return v1_conversation(v1_messages(row, "messages"), "messages");
}

ConvertedFeedback convert_feedback_row(const DatasetAttr& attr, const json& row) {
  if (!row.is_object())
    throw RowError("is a " + std::string(row.type_name()) + ", expected a JSON object");
  const std::optional<bool> tag = kto_tag_of(attr, row);
  switch (attr.formatting) {
    case Formatting::Alpaca: return feedback_alpaca(attr, row, tag);
    case Formatting::Sharegpt: return feedback_sharegpt(attr, row, tag);
    case Formatting::V1Pair:
    case Formatting::V1Messages: break;
  }
  throw RowError("holds LLaMA-Factory v1 messages; stage kto reads alpaca or sharegpt rows");
}

ConvertedText convert_text_row(const DatasetAttr& attr, const json& row) {
  if (!row.is_object())
    throw RowError("is a " + std::string(row.type_name()) + ", expected a JSON object");
  switch (attr.formatting) {
    case Formatting::Alpaca: return {alpaca_prompt(attr, row).front().content, {}};
    case Formatting::Sharegpt: return sharegpt_text(attr, row);
    case Formatting::V1Pair:
    case Formatting::V1Messages: break;
  }
  throw RowError("holds LLaMA-Factory v1 messages; stage pt reads alpaca or sharegpt rows");
}

std::vector<Conversation> v1_samples(const Converted& c) {
  std::vector<Message> all = c.conversation->prompt;
  all.push_back(c.conversation->response.front());
  std::vector<Conversation> out;
  std::size_t answer = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].role != Role::Assistant) continue;
    const bool learned = c.learned_answers.empty() || c.learned_answers[answer];
    ++answer;
    if (!learned) continue;
    Conversation s;
    s.system = c.conversation->system;
    s.prompt.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(i));
    s.response = {all[i]};
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace studio::data::detail
