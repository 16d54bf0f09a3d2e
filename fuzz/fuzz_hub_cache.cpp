// The Hugging Face cache lookup (find_in_hub_cache, resolve_model_dir) on a cache tree made from
// the input, in a temporary folder:
//
//   line 1: the model id          line 3: what the ref is (its first byte, below)
//   line 2: the revision asked    line 4: snapshot names, space-separated (each with config.json)
//   the rest: the ref's bytes (a ref of kind f or l)
//
// Kinds of refs/REVISION: f a file holding the rest, l a link to such a file, z a link to
// /dev/zero, p a FIFO, d a folder, anything else none. The tree is only made where the id and
// the names could be ours (looks_like_hub_id, revision_problem), so that the target itself writes
// nowhere else; the lookup is given whatever the input says.
// Invariants: no crash, no hang (a FIFO or /dev/zero is refused, not read), and a snapshot found
// is a folder with config.json under the repo's snapshots/, named by a revision: never a place
// outside the cache, whatever the ref holds; when none is found, the reasons are given, and
// resolve_model_dir says what to do.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "studio/model_facts/hub_cache.h"

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

// The next line of `rest` (without its '\n'), taken off it.
std::string take_line(std::string_view& rest) {
  const std::size_t nl = rest.find('\n');
  const std::string line(rest.substr(0, nl));
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  return line;
}

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// CACHE/models--ORG--NAME.
fs::path repo_of(const fs::path& cache, const std::string& id) {
  std::string folder = "models--" + id;
  if (const auto slash = folder.find('/'); slash != std::string::npos)
    folder.replace(slash, 1, "--");
  return cache / folder;
}

bool is_hash(const std::string& s) {
  return s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Lays out the repo of `id` in `cache` as the input says.
void make_tree(const fs::path& cache, const std::string& id, const std::string& revision, char kind,
               const std::string& snapshots, std::string_view content) {
  const fs::path repo = repo_of(cache, id);
  std::error_code ec;
  fs::create_directories(repo / "refs", ec);
  fs::create_directories(repo / "blobs", ec);
  std::size_t start = 0;
  while (start <= snapshots.size()) {
    const std::size_t end = std::min(snapshots.find(' ', start), snapshots.size());
    const std::string name = snapshots.substr(start, end - start);
    start = end + 1;
    if (name.find('/') != std::string::npos || !studio::revision_problem(name).empty()) continue;
    if (fs::create_directories(repo / "snapshots" / name, ec) || !ec)
      write(repo / "snapshots" / name / "config.json", "{}");
  }
  const std::string rev = revision.empty() ? "main" : revision;
  if (!studio::revision_problem(rev).empty() || is_hash(rev)) return;
  const fs::path ref = repo / "refs" / rev;
  fs::create_directories(ref.parent_path(), ec);
  switch (kind) {
    case 'f':
      write(ref, content);
      break;
    case 'l':
      write(repo / "blobs" / "ref", content);
      fs::create_symlink(fs::relative(repo / "blobs" / "ref", ref.parent_path(), ec), ref, ec);
      break;
    case 'z':
      fs::create_symlink("/dev/zero", ref, ec);
      break;
    case 'p':
      ::mkfifo(ref.c_str(), 0600);
      break;
    case 'd':
      fs::create_directories(ref, ec);
      break;
    default:
      break;
  }
}

void check(const fs::path& cache, const std::string& id, const std::string& revision, char kind) {
  const studio::HubLookup found = studio::find_in_hub_cache(id, revision, cache.string());
  if (!studio::looks_like_hub_id(id)) {
    if (!found.path.empty() || found.searched.empty()) fail("a non-id looked up: " + id);
    return;  // resolve_model_dir takes it as a local path
  }
  std::string error;
  const auto dir = studio::resolve_model_dir(id, (cache / "no such base").string(), revision,
                                             cache.string(), error);
  if (found.path.empty()) {
    if (found.searched.empty()) fail("nothing found and no reason given");
    if (dir || error.find("huggingface-cli download") == std::string::npos)
      fail("resolve_model_dir disagrees or says nothing to do: " + error);
    return;
  }
  if (!dir || *dir != found.path) fail("resolve_model_dir found another folder");
  if (!studio::revision_problem(found.commit).empty())
    fail("followed a non-revision: " + found.commit);
  const std::string rev = revision.empty() ? "main" : revision;
  if (!is_hash(rev) && (kind == 'z' || kind == 'p' || kind == 'd'))
    fail("found a snapshot through a ref that is no regular file");
  // Nothing in the tree is a link but refs, so the folder itself must lie in the repo's snapshots.
  std::error_code ec, ec2;
  const std::string real = fs::canonical(found.path, ec).string();
  const std::string snapshots = fs::canonical(repo_of(cache, id), ec2).string() + "/snapshots/";
  if (ec || ec2 || real.rfind(snapshots, 0) != 0 || real.size() == snapshots.size() ||
      found.cache != cache.string())
    fail("a snapshot outside the repo's snapshots: " + found.path);
  if (!fs::is_regular_file(fs::path(found.path) / "config.json", ec))
    fail("a snapshot without config.json: " + found.path);
}

// The temporary folder of the whole run, removed at its end.
struct TempRoot {
  fs::path path;
  TempRoot() {
    // Each input makes and removes a small tree: in memory (/dev/shm) unless TMPDIR says where,
    // as a disk busy with other work makes that many times slower.
    const bool shm = !std::getenv("TMPDIR") && ::access("/dev/shm", W_OK) == 0;
    std::string tmpl =
        ((shm ? fs::path("/dev/shm") : fs::temp_directory_path()) / "fuzz_hub_cache-XXXXXX")
            .string();
    if (!::mkdtemp(tmpl.data())) fail("cannot make a temporary folder");
    path = tmpl;
    // Only the cache given is searched: none of the environment's.
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"})
      ::setenv(name, (path / "cache").c_str(), 1);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const TempRoot root;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string id = take_line(rest);
  const std::string revision = take_line(rest);
  const std::string kind_line = take_line(rest);
  const char kind = kind_line.empty() ? 'n' : kind_line[0];
  const std::string snapshots = take_line(rest);

  const fs::path cache = root.path / "cache";
  std::error_code ec;
  fs::remove_all(cache, ec);
  fs::create_directories(cache, ec);
  if (studio::looks_like_hub_id(id)) make_tree(cache, id, revision, kind, snapshots, rest);
  check(cache, id, revision, kind);
  fs::remove_all(cache, ec);
  return 0;
}
