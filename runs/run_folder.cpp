#include "studio/runs/run_folder.h"

#include <cctype>
#include <cstdint>
#include <string_view>

#include <dirent.h>
#include <sys/stat.h>

namespace studio {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::optional<std::int64_t> checkpoint_number(std::string_view name) {
  constexpr std::string_view kPrefix = "checkpoint-";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix)
    return std::nullopt;
  std::int64_t n = 0;
  for (const char c : name.substr(kPrefix.size())) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    const int digit = c - '0';
    if (n > (INT64_MAX - digit) / 10) return std::nullopt;  // beyond int64
    n = n * 10 + digit;
  }
  return n;
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string run_file(const std::string& dir, const char* name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + '/' + name;
}

bool has_trainer_state(const std::string& dir) {
  // A checkpoint's own folder holds one too, but is part of a run, not one.
  if (checkpoint_number(base_name(dir))) return false;
  if (exists(run_file(dir, kTrainerStateFileName))) return true;
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (!checkpoint_number(name)) continue;
    const std::string sub = run_file(dir, name.c_str());
    struct stat st {};
    if (::stat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        exists(run_file(sub, kTrainerStateFileName))) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

bool is_run_folder(const std::string& dir) {
  for (const char* name : {kStatusFileName, kEventsFileName, kTrainerLogFileName,
                           kLaunchRecordFileName, kRemoteRecordFileName})
    if (exists(run_file(dir, name))) return true;
  return has_trainer_state(dir);
}

}  // namespace studio
