#include "json_node.h"

#include "studio/data/tokenizer.h"
#include "unicode.h"

namespace studio::data::detail {

namespace {

const nlohmann::json& null_json() {
  static const nlohmann::json null_value;
  return null_value;
}

std::string join(std::initializer_list<std::string_view> names) {
  std::string out;
  for (const std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

JsonNode::JsonNode(const nlohmann::json& value, std::string file, std::string path)
    : JsonNode(value, std::make_shared<const std::string>(std::move(file)), std::move(path)) {}

JsonNode::JsonNode(const nlohmann::json& value, std::shared_ptr<const std::string> file,
                   std::string path)
    : file_(std::move(file)), value_(&value), path_(std::move(path)) {}

JsonNode JsonNode::operator[](const char* key) const {
  std::string child = path_.empty() ? key : path_ + "." + key;
  if (!value_->is_object()) {
    if (!value_->is_null()) fail(std::string("expected an object, got ") + value_->type_name());
    return JsonNode(null_json(), file_, std::move(child));
  }
  const auto it = value_->find(key);
  return JsonNode(it == value_->end() ? null_json() : *it, file_, std::move(child));
}

JsonNode JsonNode::operator[](std::size_t index) const {
  require_array();
  return JsonNode(value_->at(index), file_, path_ + "[" + std::to_string(index) + "]");
}

std::string JsonNode::string() const {
  if (!value_->is_string()) fail(std::string("expected a string, got ") + value_->type_name());
  return value_->get<std::string>();
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean())
    fail(std::string("expected true or false, got ") + value_->type_name());
  return value_->get<bool>();
}

int64_t JsonNode::integer(WholeRange range) const {
  if (!value_->is_number_integer())
    fail(std::string("expected an integer, got ") + value_->type_name());
  int64_t v = 0;
  if (std::string problem = json_whole(*value_, v, range); !problem.empty()) fail(problem);
  return v;
}

char32_t JsonNode::character() const {
  const std::string text = string();
  std::size_t pos = 0;
  const char32_t c = text.empty() ? 0 : next_code_point(text, pos);
  if (text.empty() || pos != text.size()) fail("'" + text + "' must be exactly one character");
  return c;
}

void JsonNode::require_object() const {
  if (!value_->is_object()) fail(std::string("expected an object, got ") + value_->type_name());
}

void JsonNode::require_array() const {
  if (!value_->is_array()) fail(std::string("expected an array, got ") + value_->type_name());
}

std::string JsonNode::type(std::initializer_list<std::string_view> supported) const {
  const JsonNode node = (*this)["type"];
  if (node.is_null()) node.fail("is missing (supported: " + join(supported) + ")");
  const std::string name = node.string();
  for (const std::string_view candidate : supported) {
    if (candidate == name) return name;
  }
  node.fail("'" + name + "' is not supported (supported: " + join(supported) + ")");
}

void JsonNode::fail(const std::string& what) const {
  const std::string where = path_.empty() ? "top level" : path_;
  const bool reads_on = what.rfind('\'', 0) == 0 || what.rfind("is ", 0) == 0;
  throw TokenizerError(*file_ + ": " + where + (reads_on ? " " : ": ") + what);
}

}  // namespace studio::data::detail
