#include "studio/runs/launch_record.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/runs/run_folder.h"

namespace studio {
namespace {

using json = nlohmann::json;

std::string string_or_empty(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<double> number(const json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

std::string LaunchRecord::to_json() const {
  json o = json::object();  // std::map: keys sorted
  o["command"] = command;
  o["cwd"] = cwd;
  o["engine"] = engine;
  o["config"] = config;
  // Seconds since the epoch, as every time in events.jsonl and status.json.
  if (started) o["started"] = *started;
  o["pid"] = pid;
  o["nproc"] = nproc;
  o["host"] = host;
  return o.dump(4, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string LaunchRecord::write(const std::string& run_dir) const {
  return write_file_atomic(run_file(run_dir, kLaunchRecordFileName), to_json());
}

bool LaunchRecord::from_json(const std::string& text, const std::string& path,
                             LaunchRecord& out, std::string& error) {
  json o;
  JsonSyntaxError syntax;
  if (!parse_json_text(text, o, syntax)) {
    error = path + " is not valid JSON: " + syntax.describe();
    return false;
  }
  if (!o.is_object()) {
    error = path + ": expected a JSON object";
    return false;
  }
  const std::optional<double> pid = number(o, "pid");
  if (!pid || !(*pid >= 1) || std::floor(*pid) != *pid ||
      *pid >= 9223372036854775808.0) {
    error = path + ": field 'pid' must be a positive integer";
    return false;
  }
  LaunchRecord r;
  if (const auto it = o.find("command"); it != o.end() && it->is_array())
    for (const json& a : *it) r.command.push_back(a.is_string() ? a.get<std::string>() : "");
  r.cwd = string_or_empty(o, "cwd");
  r.engine = string_or_empty(o, "engine");
  r.config = string_or_empty(o, "config");
  if (const auto started = number(o, "started"); started && std::isfinite(*started))
    r.started = *started;
  r.pid = static_cast<std::int64_t>(*pid);
  if (const auto nproc = number(o, "nproc");
      nproc && std::floor(*nproc) == *nproc && *nproc >= std::numeric_limits<int>::min() &&
      *nproc <= std::numeric_limits<int>::max())
    r.nproc = static_cast<int>(*nproc);
  r.host = string_or_empty(o, "host");
  out = std::move(r);
  return true;
}

bool LaunchRecord::read(const std::string& run_dir, LaunchRecord& out, std::string& error) {
  const std::string path = run_file(run_dir, kLaunchRecordFileName);
  std::string text;
  if (!read_small_file(path, kRunMetadataMaxBytes, text, error)) return false;
  return from_json(text, path, out, error);
}

}  // namespace studio
