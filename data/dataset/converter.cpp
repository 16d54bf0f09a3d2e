#include "converter.h"

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

Converted convert_alpaca(const DatasetAttr& attr, const json& row, bool pairwise) {
  Conversation c;
  c.prompt = alpaca_history(attr, row);
  // LF joins instruction and input with a newline, leaving out the empty ones.
  std::string query = string_column(attr, row, "prompt", attr.prompt, true);
  const std::string input = string_column(attr, row, "query", attr.query, false);
  if (!input.empty()) query = query.empty() ? input : query + "\n" + input;
  c.prompt.push_back({Role::User, query});
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

Converted convert_sharegpt(const DatasetAttr& attr, const json& row, bool pairwise) {
  const json* messages = column(attr, row, "messages", attr.messages, true);
  if (!messages->is_array())
    throw RowError("column '" + attr.messages + "' is a " + std::string(messages->type_name()) +
                   ", expected a list of messages");
  const DatasetAttr t = tags_for(attr, *messages);
  Conversation c;
  std::size_t start = 0;
  if (!t.system_tag.empty() && !messages->empty()) {
    const TaggedMessage first = read_message(t, (*messages)[0], "message 1");
    if (first.role == t.system_tag) {
      c.system = first.content;
      start = 1;
    }
  }
  if (start == 0 && !attr.system.empty())
    c.system = string_column(attr, row, "system", attr.system, false);

  std::vector<Message> aligned;
  for (std::size_t i = start; i < messages->size(); ++i) {
    const std::string what = "message " + std::to_string(i + 1);
    const TaggedMessage m = read_message(t, (*messages)[i], what);
    const bool query = (i - start) % 2 == 0;
    auto role = role_at(t, m.role, query, what);
    if (!role)
      return {std::nullopt, what + " has role '" + m.role + "', expected " + expected_roles(t, query)};
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

}  // namespace

Converted convert_row(const DatasetAttr& attr, const json& row, bool pairwise) {
  if (!row.is_object())
    throw RowError("is a " + std::string(row.type_name()) + ", expected a JSON object");
  return attr.formatting == Formatting::Alpaca ? convert_alpaca(attr, row, pairwise)
                                               : convert_sharegpt(attr, row, pairwise);
}

}  // namespace studio::data::detail
