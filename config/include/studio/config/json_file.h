#pragma once
// Reading a JSON file with an error that names the file and, for malformed JSON, the line.
#include <string>

#include <nlohmann/json.hpp>

namespace studio {

bool read_json_file(const std::string& path, nlohmann::json& out, std::string& error);

}  // namespace studio
