#include "studio/model_facts/hub_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "studio/base/atomic_file.h"

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

// A ref holds a commit hash (40 characters, no newline as huggingface_hub writes it).
constexpr std::size_t kRefMaxBytes = 4096;

// `text` in quotes as a message shows it: bytes that are not printable ASCII as escapes, cut
// after 64 characters.
std::string quoted(const std::string& text) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < 64; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (text[i] == '\n')
      out += "\\n";
    else if (u < 0x20 || u >= 0x7f)
      out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
    else
      out += text[i];
  }
  return out + (text.size() > 64 ? "...'" : "'");
}

// The revision refs/REV names, or nullopt with why not (and what to do) added to `searched`.
std::optional<std::string> read_ref(const fs::path& ref, const std::string& id,
                                    const std::string& rev, std::vector<std::string>& searched) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(ref, ec))) {
    searched.push_back(ref.string() + ": no such revision (the cache has no '" + rev + "' of it)");
    return std::nullopt;
  }
  const std::string fix = "; a ref holds the commit hash of a snapshot: delete it and fetch " + id +
                          " again, or set model_revision to the commit hash of one of its "
                          "snapshots";
  std::string text, error;
  if (!read_small_file(ref.string(), kRefMaxBytes, text, error)) {
    searched.push_back(error + fix);
    return std::nullopt;
  }
  // huggingface_hub writes no newline; an editor or `echo` adds one.
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  if (const std::string why = revision_problem(text); !why.empty()) {
    searched.push_back(ref.string() + ": holds " + why + ", not a revision" + fix);
    return std::nullopt;
  }
  return text;
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

std::string revision_problem(const std::string& text) {
  if (text.empty()) return "nothing";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      return quoted(text) + ", with a line break or another control character in it";
  }
  if (text[0] == '/') return quoted(text) + ", an absolute path";
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('/', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part == "." || part == "..")
      return quoted(text) + ", a path with '" + (part.empty() ? "//" : part) + "' in it";
    start = end + 1;
  }
  return {};
}

HubLookup find_in_hub_cache(const std::string& id, const std::string& revision,
                            const std::string& cache_dir) {
  HubLookup out;
  const std::string rev = revision.empty() ? "main" : revision;
  // Both name places in the cache: what is not a hub id or a revision could lead out of it.
  if (!looks_like_hub_id(id)) {
    out.searched.push_back(quoted(id) + ": not a hub id (ORG/NAME)");
    return out;
  }
  if (const std::string why = revision_problem(rev); !why.empty()) {
    out.searched.push_back("revision " + why + ": not a branch, tag or commit hash");
    return out;
  }
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
      const std::optional<std::string> held = read_ref(ref, id, rev, out.searched);
      if (!held) continue;
      commit = *held;
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
