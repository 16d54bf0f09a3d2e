#include "studio/config/hub_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace studio {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool hub_part(const std::string& part) {
  if (part.empty() || part == "." || part == "..") return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
  });
}

bool is_commit_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// ~ and ~/x as the home folder, as Python's expanduser does for these variables.
std::string expand_home(const std::string& p) {
  if (p == "~") return env("HOME");
  if (p.rfind("~/", 0) == 0) return env("HOME") + p.substr(1);
  return p;
}

// The repo folder's name in the cache: models--ORG--NAME.
std::string repo_folder(const std::string& id) {
  std::string name = "models--";
  for (char c : id) {
    if (c == '/')
      name += "--";
    else
      name += c;
  }
  return name;
}

}  // namespace

bool looks_like_hub_id(const std::string& text) {
  if (text.empty() || text[0] == '/' || text[0] == '.' || text[0] == '~') return false;
  const auto slash = text.find('/');
  if (slash == std::string::npos) return hub_part(text);
  if (text.find('/', slash + 1) != std::string::npos) return false;
  return hub_part(text.substr(0, slash)) && hub_part(text.substr(slash + 1));
}

std::vector<std::string> hub_cache_dirs(const std::string& cache_dir) {
  std::vector<std::string> dirs;
  auto add = [&dirs](const std::string& d) {
    if (d.empty()) return;
    const std::string e = expand_home(d);
    if (std::find(dirs.begin(), dirs.end(), e) == dirs.end()) dirs.push_back(e);
  };
  add(cache_dir);
  std::string hub = env("HF_HUB_CACHE");
  if (hub.empty()) hub = env("HUGGINGFACE_HUB_CACHE");
  if (hub.empty()) {
    std::string home = env("HF_HOME");
    if (home.empty()) {
      const std::string xdg = env("XDG_CACHE_HOME");
      home = (xdg.empty() ? expand_home("~/.cache") : xdg) + "/huggingface";
    }
    hub = expand_home(home) + "/hub";
  }
  add(hub);
  add(env("TRANSFORMERS_CACHE"));
  return dirs;
}

HubLookup find_in_hub_cache(const std::string& id, const std::string& revision,
                            const std::string& cache_dir) {
  HubLookup out;
  const std::string rev = revision.empty() ? "main" : revision;
  std::error_code ec;
  for (const std::string& cache : hub_cache_dirs(cache_dir)) {
    const fs::path repo = fs::path(cache) / repo_folder(id);
    if (!fs::is_directory(repo, ec)) {
      out.searched.push_back(repo.string() + ": not there");
      continue;
    }
    std::string commit = rev;
    if (!is_commit_hash(rev)) {
      const fs::path ref = repo / "refs" / rev;
      std::ifstream in(ref);
      std::string line;
      if (!in || !std::getline(in, line)) {
        out.searched.push_back(ref.string() + ": no such revision (the cache has no '" + rev +
                               "' of it)");
        continue;
      }
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      commit = line;
    }
    const fs::path snapshot = repo / "snapshots" / commit;
    if (!fs::is_regular_file(snapshot / "config.json", ec)) {
      out.searched.push_back(snapshot.string() +
                             (fs::is_directory(snapshot, ec)
                                  ? ": no config.json (an incomplete download)"
                                  : ": not there (revision " + rev + " points at it)"));
      continue;
    }
    out.path = snapshot.string();
    out.cache = cache;
    out.commit = commit;
    return out;
  }
  return out;
}

std::optional<std::string> resolve_model_dir(const std::string& value, const std::string& base_dir,
                                             const std::string& revision,
                                             const std::string& cache_dir, std::string& error) {
  std::error_code ec;
  fs::path local(value);
  if (!local.is_absolute() && !base_dir.empty()) local = fs::path(base_dir) / local;
  if (fs::exists(local, ec)) return local.string();
  if (!looks_like_hub_id(value)) {
    error = "no such folder: " + local.string();
    return std::nullopt;
  }
  const HubLookup found = find_in_hub_cache(value, revision, cache_dir);
  if (!found.path.empty()) return found.path;
  error = "'" + value + "' is no folder here (" + local.string() +
          ") and not in the local Hugging Face cache at revision " +
          (revision.empty() ? std::string("main") : revision) + " (looked at: ";
  for (std::size_t i = 0; i < found.searched.size(); ++i)
    error += (i ? "; " : "") + found.searched[i];
  error += "). studio-train downloads nothing: fetch it where there is network (huggingface-cli "
           "download " + value + ", with HF_HUB_CACHE or HF_HOME pointing at the cache this "
           "machine reads), or give the model's folder";
  return std::nullopt;
}

}  // namespace studio
