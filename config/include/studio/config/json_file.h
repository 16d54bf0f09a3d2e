#pragma once
// Reading a JSON file with an error that names the file and, for malformed JSON, the line.
#include <string>

#include <nlohmann/json.hpp>

namespace studio {

bool read_json_file(const std::string& path, nlohmann::json& out, std::string& error);

// nlohmann's exception text without its "[json.exception.parse_error.101] " prefix, which says
// nothing to a user.
std::string json_error_text(const char* what);

}  // namespace studio
