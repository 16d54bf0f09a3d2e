#include "studio/trainer/hf_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"

namespace studio::trainer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr std::size_t kMaxListed = 20;

// What from_pretrained() and the tokenizer loaders read besides the weights.
constexpr const char* kCopiedFiles[] = {
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
    "chat_template.jinja",
};

[[noreturn]] void fail(const std::string& where, const std::string& message) {
  throw CheckpointError(where + ": " + message);
}

// One error for many problems, so that a user fixes them all in one round.
[[noreturn]] void fail_listing(const std::string& headline, const std::vector<std::string>& items) {
  std::string message = headline;
  for (std::size_t i = 0; i < items.size() && i < kMaxListed; ++i) message += "\n  " + items[i];
  if (items.size() > kMaxListed)
    message += "\n  ... and " + std::to_string(items.size() - kMaxListed) + " more";
  throw CheckpointError(message);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string file_name(const std::string& path) {
  return fs::path(path).filename().string();
}

// A weight_map value must name a file in the folder itself, never a path out of it.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// "model-00002-of-00005.safetensors"
bool is_shard_name(const std::string& name) {
  if (name.size() != 32 || name.rfind("model-", 0) != 0 || name.substr(11, 4) != "-of-" ||
      name.substr(20) != ".safetensors")
    return false;
  const std::string digits = name.substr(6, 5) + name.substr(15, 5);
  return std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

json read_json(const std::string& path, const char* hint) {
  json j;
  std::string error;
  if (!read_json_file(path, j, error)) throw CheckpointError(error + hint);
  return j;
}

// The index's weight_map as tensor -> shard file name, with its format checked.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const json index = read_json(index_path, " (re-download the model's index file)");
  const auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object())
    fail(index_path, "no \"weight_map\" object (not a transformers index file? re-download it)");
  std::map<std::string, std::string> out;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const json& v = it.value();
    if (!v.is_string() || !plain_file_name(v.get<std::string>()))
      // Never dump() an untrusted value: it recurses into arbitrarily deep nesting.
      fail(index_path, "weight_map maps tensor '" + it.key() + "' to " +
                           (v.is_string() ? "'" + v.get<std::string>() + "'"
                                          : std::string("a JSON ") + v.type_name()) +
                           ", not to a file name in the folder (re-download the index file)");
    out[it.key()] = v.get<std::string>();
  }
  return out;
}

}  // namespace

CheckpointReader CheckpointReader::open(const std::string& dir) {
  CheckpointReader r;
  r.dir_ = dir;
  const std::string single = (fs::path(dir) / kSingleFile).string();
  const std::string index = (fs::path(dir) / kIndexFile).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(dir, "is not a folder (a model path must be a local Hugging Face model folder)");
  // transformers looks for the single file first, and so do we.
  if (fs::exists(single, ec)) {
    r.files_.push_back(SafetensorsFile::open(single));
    for (const auto& name : r.files_[0].names()) r.file_index_[name] = 0;
    return r;
  }
  if (!fs::exists(index, ec))
    fail(dir, std::string("neither ") + kSingleFile + " nor " + kIndexFile +
                  " is here (not a Hugging Face model folder, or weights only in PyTorch .bin "
                  "form: re-save it with save_pretrained(safe_serialization=True))");

  const auto weight_map = read_weight_map(index);
  std::map<std::string, std::size_t> shard_of_file;
  std::vector<std::string> problems;
  for (const auto& [tensor, file] : weight_map) {
    if (shard_of_file.count(file)) continue;
    const std::string path = (fs::path(dir) / file).string();
    if (!fs::exists(path, ec)) {
      const auto count = std::count_if(weight_map.begin(), weight_map.end(),
                                       [&](const auto& entry) { return entry.second == file; });
      problems.push_back("shard '" + file + "' does not exist (the weight_map maps " +
                         std::to_string(count) + " tensors to it, e.g. '" + tensor + "')");
      shard_of_file[file] = SIZE_MAX;
      continue;
    }
    shard_of_file[file] = r.files_.size();
    r.files_.push_back(SafetensorsFile::open(path));
  }
  // What the index says must be what the shards hold, both ways.
  for (const auto& [tensor, file] : weight_map) {
    const std::size_t shard = shard_of_file[file];
    if (shard == SIZE_MAX) continue;
    if (r.files_[shard].has(tensor)) {
      r.file_index_[tensor] = shard;
      continue;
    }
    problems.push_back("tensor '" + tensor + "' is mapped to '" + file +
                       "', which does not hold it");
  }
  for (const auto& f : r.files_) {
    for (const auto& tensor : f.names()) {
      const auto it = weight_map.find(tensor);
      if (it == weight_map.end())
        problems.push_back("tensor '" + tensor + "' in '" + file_name(f.path()) +
                           "' is not in the weight_map");
      else if (it->second != file_name(f.path()))
        problems.push_back("tensor '" + tensor + "' is in '" + file_name(f.path()) +
                           "', but the weight_map maps it to '" + it->second + "'");
    }
  }
  if (!problems.empty())
    fail_listing(index + ": " + std::to_string(problems.size()) +
                     " problems between the index and its shards (incomplete download or "
                     "shards of two different saves? re-download or re-save the checkpoint):",
                 problems);
  return r;
}

const std::string& CheckpointReader::dir() const {
  return dir_;
}
const std::vector<SafetensorsFile>& CheckpointReader::files() const {
  return files_;
}
bool CheckpointReader::has(const std::string& name) const {
  return file_index_.count(name) > 0;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  out.reserve(file_index_.size());
  for (const auto& entry : file_index_) out.push_back(entry.first);
  return out;
}

const SafetensorsFile& CheckpointReader::file_holding(const std::string& name) const {
  const auto it = file_index_.find(name);
  if (it == file_index_.end())
    fail(dir_, "tensor '" + name + "' is not in the checkpoint (" +
                   std::to_string(file_index_.size()) + " tensors; a different architecture?)");
  return files_[it->second];
}

const TensorInfo& CheckpointReader::info(const std::string& name) const {
  return file_holding(name).info(name);
}
torch::Tensor CheckpointReader::tensor(const std::string& name) const {
  return file_holding(name).tensor(name);
}
const std::string& CheckpointReader::file_of(const std::string& name) const {
  return file_holding(name).path();
}

void CheckpointReader::check_shapes(
    const std::map<std::string, std::vector<std::int64_t>>& expected) const {
  std::vector<std::string> mismatched, missing, unexpected;
  for (const auto& [name, shape] : expected) {
    if (!has(name)) {
      missing.push_back("missing tensor '" + name + "' (expected shape " + shape_text(shape) + ")");
    } else if (info(name).shape != shape) {
      mismatched.push_back("tensor '" + name + "' has shape " + shape_text(info(name).shape) +
                           ", the config implies " + shape_text(shape));
    }
  }
  for (const auto& [name, file] : file_index_)
    if (!expected.count(name))
      unexpected.push_back("unexpected tensor '" + name + "' " + shape_text(info(name).shape) +
                           " in " + file_name(files_[file].path()));
  if (mismatched.empty() && missing.empty() && unexpected.empty()) return;
  std::vector<std::string> all = mismatched;
  all.insert(all.end(), missing.begin(), missing.end());
  all.insert(all.end(), unexpected.begin(), unexpected.end());
  fail_listing(dir_ + ": the checkpoint does not match the shapes against the config (" +
                   std::to_string(mismatched.size()) + " mismatched, " +
                   std::to_string(missing.size()) + " missing, " +
                   std::to_string(unexpected.size()) +
                   " unexpected; is config.json from another model size or architecture?):",
               all);
}

// ---------------------------------------------------------------------------------------------
// Saving

std::optional<torch::ScalarType> dtype_from_torch_dtype_name(const std::string& name) {
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kHalf;
  if (name == "float32") return torch::kFloat;
  return std::nullopt;
}

std::string torch_dtype_name(torch::ScalarType dtype) {
  if (dtype == torch::kBFloat16) return "bfloat16";
  if (dtype == torch::kHalf) return "float16";
  if (dtype == torch::kFloat) return "float32";
  throw CheckpointError(std::string("models are saved as bfloat16, float16 or float32, not ") +
                        c10::toString(dtype));
}

namespace {

// A temporary folder (from a mkdtemp template) removed with its contents unless released.
class StagingDir {
 public:
  StagingDir(const fs::path& target, std::string tmpl) {
    if (::mkdtemp(tmpl.data()) == nullptr)
      fail(target.string(), std::string("cannot create a staging folder for it: ") +
                                std::strerror(errno) + " (is the folder writable?)");
    path_ = tmpl;
    // mkdtemp makes the folder 0700; once renamed into place it is the model folder, which
    // should get the permissions any new folder gets (0777 less the umask).
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(path_.c_str(), 0777 & ~mask);
  }
  ~StagingDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail(to.string(),
         std::string("cannot move the saved file into place: ") + std::strerror(errno));
}

// Groups tensor indices into shards as huggingface_hub's split_torch_state_dict_into_shards does.
std::vector<std::vector<std::size_t>> plan_shards(const NamedTensors& tensors,
                                                  torch::ScalarType dtype, std::uint64_t max) {
  std::vector<std::vector<std::size_t>> shards;
  std::vector<std::size_t> current;
  std::uint64_t current_size = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t size = safetensors_byte_size(tensors[i].second, dtype);
    if (size > max) {
      shards.push_back({i});
      continue;
    }
    if (!current.empty() && current_size + size > max) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(i);
    current_size += size;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  return shards;
}

void check_tensors(const std::string& out_dir, const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (!seen.insert(name).second) fail(out_dir, "tensor '" + name + "' is given twice");
    if (!t.defined()) fail(out_dir, "tensor '" + name + "' is undefined (nothing to save)");
  }
}

std::optional<json> read_source_config(const std::string& source_dir) {
  if (source_dir.empty()) return std::nullopt;
  const fs::path path = fs::path(source_dir) / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  json config = read_json(path.string(), " (the source model's config.json must be readable)");
  if (!config.is_object()) fail(path.string(), "is not a JSON object");
  return config;
}

torch::ScalarType resolve_dtype(const HfSaveOptions& options, const std::optional<json>& config) {
  if (options.dtype) {
    torch_dtype_name(*options.dtype);  // throws for anything but bf16/f16/f32
    return *options.dtype;
  }
  if (config) {
    // transformers 4.56 renamed torch_dtype to dtype; read whichever the file has.
    for (const char* key : {"torch_dtype", "dtype"}) {
      const auto it = config->find(key);
      if (it != config->end() && it->is_string())
        if (auto d = dtype_from_torch_dtype_name(it->get<std::string>())) return *d;
    }
  }
  return torch::kBFloat16;
}

// transformers writes its JSON files with json.dumps(indent=2, sort_keys=True) + "\n".
std::string to_transformers_json(const json& j) {
  return j.dump(2, ' ', true) + "\n";
}

void write_text(const fs::path& path, const std::string& content) {
  const std::string error = write_file_atomic(path.string(), content);
  if (!error.empty()) throw CheckpointError(error);
}

// The files a save writes, as indices into its tensors: the model's own tensors sharded as
// transformers shards them, and a value head's (kValueHeadFile), written after them.
struct FilePlan {
  std::vector<std::vector<std::size_t>> shards;
  std::vector<std::size_t> head;
};

FilePlan plan_files(const NamedTensors& tensors, torch::ScalarType dtype, std::uint64_t max) {
  FilePlan plan;
  NamedTensors own;
  std::vector<std::size_t> own_index;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (is_value_head_tensor(tensors[i].first)) {
      plan.head.push_back(i);
    } else {
      own.push_back(tensors[i]);
      own_index.push_back(i);
    }
  }
  plan.shards = plan_shards(own, dtype, max);
  for (auto& shard : plan.shards)
    for (std::size_t& i : shard) i = own_index[i];
  return plan;
}

// Writes the weight files into `staging`; returns their names in order and the index, if any.
HfSaveResult write_weights(const fs::path& staging, const NamedTensors& tensors,
                           torch::ScalarType dtype, const HfSaveOptions& options) {
  HfSaveResult result;
  result.dtype = dtype;
  const auto [shards, head] = plan_files(tensors, dtype, options.max_shard_bytes);
  json weight_map = json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1 ? kSingleFile : shard_name(s, shards.size());
    NamedTensors part;
    for (std::size_t i : shards[s]) {
      part.emplace_back(tensors[i].first, options.fetch ? options.fetch(i) : tensors[i].second);
      weight_map[tensors[i].first] = name;
      result.total_size += safetensors_byte_size(tensors[i].second, dtype);
    }
    write_safetensors((staging / name).string(), part, {{"format", "pt"}}, dtype);
    result.weight_files.push_back(name);
  }
  if (shards.size() > 1) {
    const json index = {{"metadata", {{"total_size", result.total_size}}},
                        {"weight_map", weight_map}};
    write_text(staging / kIndexFile, to_transformers_json(index));
  }
  // LLaMA-Factory keeps a reward model's value head apart, in fp32 as its trainer holds it (the
  // model's own weights in the save dtype).
  if (!head.empty()) {
    NamedTensors part;
    for (std::size_t i : head)
      part.emplace_back(tensors[i].first, options.fetch ? options.fetch(i) : tensors[i].second);
    write_safetensors((staging / kValueHeadFile).string(), part, {{"format", "pt"}},
                      torch::kFloat);
    result.value_head = true;
  }
  return result;
}

std::vector<std::string> copy_source_files(const fs::path& staging, const HfSaveOptions& options,
                                           std::optional<json> config, torch::ScalarType dtype) {
  std::vector<std::string> copied;
  if (options.source_dir.empty()) return copied;
  for (const char* name : kCopiedFiles) {
    const fs::path from = fs::path(options.source_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    std::string content, error;
    if (name == std::string("config.json") && config) {
      (*config)["torch_dtype"] = torch_dtype_name(dtype);
      if (config->contains("dtype")) (*config)["dtype"] = torch_dtype_name(dtype);
      content = to_transformers_json(*config);
    } else if (!read_file(from.string(), content, error)) {
      throw CheckpointError(error);
    }
    write_text(staging / name, content);
    copied.push_back(name);
  }
  return copied;
}

// Weight files of an earlier save in `out` that the new save does not use.
void remove_stale_weights(const fs::path& out, const HfSaveResult& result) {
  const std::set<std::string> keep(result.weight_files.begin(), result.weight_files.end());
  const bool sharded = result.weight_files.size() > 1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    const bool stale = (is_shard_name(name) && !keep.count(name)) ||
                       (sharded && name == kSingleFile) || (!sharded && name == kIndexFile) ||
                       (!result.value_head && name == kValueHeadFile);
    if (stale && !fs::remove(entry.path(), ec))
      fail(entry.path().string(), "cannot remove this file of an earlier save: " + ec.message());
  }
}

// Moves the staged files into the existing folder `out` one by one (weights, index, then the
// rest), then removes the weight files of the earlier save that the new one does not use.
void move_into(const StagingDir& staging, const fs::path& out, const HfSaveResult& result,
               const std::vector<std::string>& other_files) {
  std::vector<std::string> order = result.weight_files;
  if (result.weight_files.size() > 1) order.push_back(kIndexFile);
  if (result.value_head) order.push_back(kValueHeadFile);
  for (const auto& name : order) rename_or_fail(staging.path() / name, out / name);
  remove_stale_weights(out, result);
  for (const auto& name : other_files) rename_or_fail(staging.path() / name, out / name);
  fsync_dir(out);
}

fs::path normalized_target(const std::string& out_dir) {
  fs::path p = fs::absolute(fs::path(out_dir)).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

}  // namespace

bool is_value_head_tensor(const std::string& name) { return name.rfind("v_head.", 0) == 0; }

std::vector<std::size_t> hf_save_order(const NamedTensors& tensors, const HfSaveOptions& options) {
  const torch::ScalarType dtype = resolve_dtype(options, read_source_config(options.source_dir));
  const FilePlan plan = plan_files(tensors, dtype, options.max_shard_bytes);
  std::vector<std::size_t> order;
  for (const auto& shard : plan.shards) order.insert(order.end(), shard.begin(), shard.end());
  order.insert(order.end(), plan.head.begin(), plan.head.end());
  return order;
}

HfSaveResult save_hf_model(const std::string& out_dir, const NamedTensors& tensors,
                           const HfSaveOptions& options) {
  if (options.max_shard_bytes == 0) fail(out_dir, "max_shard_bytes must be positive");
  check_tensors(out_dir, tensors);
  const std::optional<json> config = read_source_config(options.source_dir);
  const torch::ScalarType dtype = resolve_dtype(options, config);

  const fs::path out = normalized_target(out_dir);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    fail(out_dir, "exists and is not a folder (choose another output_dir)");
  // An existing folder is staged inside itself (its parent may not be writable, and the renames
  // stay within one folder); a new one beside itself, to appear whole in one rename.
  const bool existing = fs::is_directory(out, ec);
  if (!existing) {
    fs::create_directories(out.parent_path(), ec);
    if (ec) fail(out.parent_path().string(), "cannot create this folder: " + ec.message());
  }
  StagingDir staging(
      out, existing
               ? (out / ".saving-XXXXXX").string()
               : (out.parent_path() / ("." + out.filename().string() + ".saving-XXXXXX")).string());
  HfSaveResult result = write_weights(staging.path(), tensors, dtype, options);
  const auto copied = copy_source_files(staging.path(), options, config, dtype);
  fsync_dir(staging.path());
  if (existing) {
    move_into(staging, out, result, copied);
  } else {
    rename_or_fail(staging.path(), out);
    staging.release();
    fsync_dir(out.parent_path());
  }
  return result;
}

}  // namespace studio::trainer
