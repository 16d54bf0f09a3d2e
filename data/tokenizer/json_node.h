#pragma once
// A value inside a tokenizer file together with its JSON path, so that every error names the file
// and the exact value at fault: "tokenizer.json: model.merges[17]: 'ab' is not in the vocabulary".
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "studio/base/whole_number.h"

namespace studio::data::detail {

class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, std::string file, std::string path = {});

  // A member (a null node when absent) or an array element.
  JsonNode operator[](const char* key) const;
  JsonNode operator[](std::size_t index) const;

  bool is_null() const { return value_->is_null(); }
  bool has(const char* key) const { return value_->is_object() && value_->contains(key); }
  std::size_t size() const { return value_->size(); }
  const nlohmann::json& raw() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }

  // Typed reads that fail with "expected a string, got number" at this node's path.
  std::string string() const;
  bool boolean() const;
  int64_t integer(WholeRange range = {}) const;  // fails when outside `range` too
  char32_t character() const;  // a string of exactly one character
  std::string string_or(std::string fallback) const { return is_null() ? fallback : string(); }
  bool boolean_or(bool fallback) const { return is_null() ? fallback : boolean(); }
  void require_object() const;
  void require_array() const;

  // The component type in "type", checked against `supported` (listed in the error).
  std::string type(std::initializer_list<std::string_view> supported) const;

  // "FILE: PATH: what", or "FILE: PATH what" when `what` starts with the quoted value or "is ".
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::shared_ptr<const std::string> file_;
  const nlohmann::json* value_;
  std::string path_;
  JsonNode(const nlohmann::json& value, std::shared_ptr<const std::string> file, std::string path);
};

}  // namespace studio::data::detail
