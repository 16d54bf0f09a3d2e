#include "studio/trainer/tensors/safetensors.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/model_facts/safetensors_header.h"

namespace studio::trainer {
namespace {

using json = nlohmann::json;

constexpr const char* kCorrupt =
    " (file truncated or corrupted? re-download or re-save the checkpoint)";

struct DtypeEntry {
  const char* name;
  torch::ScalarType type;
  int order;  // the Python library's Dtype enum order, which it sorts tensors by (descending)
};

constexpr std::array<DtypeEntry, 7> kDtypes{{
    {"U8", torch::kByte, 0},  // bitsandbytes' packed 4-bit weights and statistics
    {"F16", torch::kHalf, 1},
    {"BF16", torch::kBFloat16, 2},
    {"I32", torch::kInt, 3},
    {"F32", torch::kFloat, 4},
    {"F64", torch::kDouble, 5},
    {"I64", torch::kLong, 6},
}};

const DtypeEntry* find_dtype(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return &d;
  return nullptr;
}

std::string supported_dtypes() {
  return safetensors_supported_dtypes();
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw CheckpointError(path + ": " + message);
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name,
                              const std::string& message) {
  throw CheckpointError(path + ": tensor '" + name + "': " + message);
}

std::string sys_error() {
  return std::strerror(errno);
}


// Read-only private mapping of a whole file; unmapped when the last owner goes.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open: " + sys_error());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const std::string why = S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file";
      ::close(fd);
      fail(path, why + " (expected a .safetensors file)");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ < 8) {
      ::close(fd);
      fail(path, std::to_string(size_) + " bytes, too short for a safetensors file" + kCorrupt);
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const std::string why = sys_error();
    ::close(fd);  // the mapping keeps the file open
    if (p == MAP_FAILED) fail(path, "cannot map " + std::to_string(size_) + " bytes: " + why);
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ~Mapping() { ::munmap(const_cast<std::uint8_t*>(data_), size_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

std::optional<torch::ScalarType> dtype_from_safetensors(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  return std::nullopt;
}

std::string safetensors_dtype_name(torch::ScalarType dtype) {
  if (const DtypeEntry* d = find_dtype(dtype)) return d->name;
  throw CheckpointError(std::string("dtype ") + c10::toString(dtype) +
                        " cannot be stored (supported: " + supported_dtypes() + ")");
}

struct SafetensorsFile::State {
  explicit State(const std::string& p) : path(p), map(p) {}
  std::string path;
  Mapping map;
  std::map<std::string, TensorInfo> tensors;
  std::vector<std::string> names;
  std::map<std::string, std::string> metadata;
};

SafetensorsFile::SafetensorsFile(std::shared_ptr<const State> state) : state_(std::move(state)) {}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto state = std::make_shared<State>(path);
  SafetensorsHeader header;
  try {
    header = parse_safetensors_header(path, state->map.data(), state->map.size());
  } catch (const SafetensorsHeaderError& e) {
    throw CheckpointError(e.what());
  }
  state->metadata = std::move(header.metadata);
  for (auto& [name, entry] : header.tensors) {
    TensorInfo info;
    info.dtype = *dtype_from_safetensors(entry.dtype);  // the header accepts only these
    info.shape = std::move(entry.shape);
    info.offset = entry.offset;
    info.size = entry.size;
    state->names.push_back(name);
    state->tensors.emplace(name, std::move(info));
  }
  return SafetensorsFile(std::move(state));
}

const std::string& SafetensorsFile::path() const {
  return state_->path;
}
const std::vector<std::string>& SafetensorsFile::names() const {
  return state_->names;
}
bool SafetensorsFile::has(const std::string& name) const {
  return state_->tensors.count(name) > 0;
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return state_->metadata;
}
const std::uint8_t* SafetensorsFile::mapping_data() const {
  return state_->map.data();
}
std::size_t SafetensorsFile::mapping_size() const {
  return state_->map.size();
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = state_->tensors.find(name);
  if (it == state_->tensors.end())
    fail_tensor(state_->path, name,
                "not in this file (it holds " + std::to_string(state_->tensors.size()) +
                    " tensors; wrong checkpoint or a name that needs mapping?)");
  return it->second;
}

torch::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& ti = info(name);
  const std::uint8_t* p = state_->map.data() + ti.offset;
  const auto options = torch::TensorOptions().dtype(ti.dtype);
  const auto itemsize = c10::elementSize(ti.dtype);
  if (reinterpret_cast<std::uintptr_t>(p) % itemsize == 0) {
    // The deleter owns a reference to the mapping: the tensor outlives this object safely.
    std::shared_ptr<const State> keep = state_;
    return torch::from_blob(
        const_cast<std::uint8_t*>(p), ti.shape, [keep](void*) {}, options);
  }
  torch::Tensor copy = torch::empty(ti.shape, options);
  if (ti.size > 0) std::memcpy(copy.data_ptr(), p, ti.size);
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

// A temporary file beside `target` that replaces it on commit() and disappears otherwise.
class TempFile {
 public:
  explicit TempFile(std::string target)
      : target_(std::move(target)), tmp_(target_ + ".tmp-XXXXXX") {
    fd_ = ::mkstemp(tmp_.data());
    if (fd_ < 0) fail(target_, "cannot create a temporary file beside it: " + sys_error());
    ::fchmod(fd_, static_cast<mode_t>(default_file_mode()));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      // Linux writes at most ~2 GiB per call.
      const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, 1u << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail(tmp_, "cannot write: " + sys_error());
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  void commit() {
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
      const std::string why = sys_error();
      ::close(fd);
      fail(tmp_, "cannot flush to disk: " + why);
    }
    if (::close(fd) != 0) fail(tmp_, "cannot close: " + sys_error());
    if (::rename(tmp_.c_str(), target_.c_str()) != 0)
      fail(target_, "cannot rename the temporary file over it: " + sys_error());
    committed_ = true;
    // Make the rename itself durable.
    const auto slash = target_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : target_.substr(0, slash + 1);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string target_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

struct PlannedTensor {
  const std::string* name;
  const torch::Tensor* source;
  torch::ScalarType dtype;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

torch::ScalarType target_dtype(const torch::Tensor& t, std::optional<torch::ScalarType> dtype) {
  return dtype && at::isFloatingType(t.scalar_type()) ? *dtype : t.scalar_type();
}

// Checks every tensor before the first byte is written, and lays out the data section.
std::vector<PlannedTensor> plan(const std::string& path, const NamedTensors& tensors,
                                std::optional<torch::ScalarType> dtype) {
  std::vector<PlannedTensor> planned;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      fail_tensor(path, name, "reserved or empty tensor name");
    if (!t.defined()) fail_tensor(path, name, "undefined tensor (nothing to save)");
    const torch::ScalarType type = target_dtype(t, dtype);
    if (!find_dtype(type))
      fail_tensor(path, name,
                  std::string("dtype ") + c10::toString(type) +
                      " cannot be stored (supported: " + supported_dtypes() + ")");
    planned.push_back({&name, &t, type});
  }
  std::sort(planned.begin(), planned.end(), [](const PlannedTensor& a, const PlannedTensor& b) {
    const int oa = find_dtype(a.dtype)->order, ob = find_dtype(b.dtype)->order;
    return oa != ob ? oa > ob : *a.name < *b.name;
  });
  for (std::size_t i = 1; i < planned.size(); ++i)
    if (*planned[i].name == *planned[i - 1].name)
      fail_tensor(path, *planned[i].name, "given twice");
  std::uint64_t offset = 0;
  for (auto& p : planned) {
    p.begin = offset;
    offset += safetensors_byte_size(*p.source, p.dtype);
    p.end = offset;
  }
  return planned;
}

// The header with its length prefix, padded with spaces so the data section starts 8-aligned.
std::string header_bytes(const std::string& path, const std::vector<PlannedTensor>& planned,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  header["__metadata__"] = nlohmann::ordered_json::object();
  if (!metadata.count("format")) header["__metadata__"]["format"] = "pt";
  for (const auto& [k, v] : metadata) header["__metadata__"][k] = v;
  for (const auto& p : planned) {
    nlohmann::ordered_json entry;
    entry["dtype"] = safetensors_dtype_name(p.dtype);
    entry["shape"] = p.source->sizes().vec();
    entry["data_offsets"] = {p.begin, p.end};
    header[*p.name] = std::move(entry);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, "cannot encode the header (" + json_error_text(e.what()) +
                   "; tensor names and metadata must be UTF-8)");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}

void write_tensor(const std::string& path, TempFile& file, const PlannedTensor& p) {
  torch::Tensor cpu;
  try {
    // One converted tensor at a time; a no-op for a contiguous CPU tensor of the right dtype.
    cpu = p.source->to(torch::kCPU, p.dtype).contiguous();
  } catch (const c10::Error& e) {
    fail_tensor(path, *p.name,
                std::string("cannot be copied to the CPU as ") + safetensors_dtype_name(p.dtype) +
                    ": " + e.what_without_backtrace());
  }
  const auto bytes = static_cast<std::uint64_t>(cpu.numel()) * cpu.element_size();
  if (bytes != p.end - p.begin) fail_tensor(path, *p.name, "changed size while being saved");
  if (bytes > 0) file.write(cpu.data_ptr(), bytes);
}

}  // namespace

std::uint64_t safetensors_byte_size(const torch::Tensor& tensor,
                                    std::optional<torch::ScalarType> dtype) {
  return static_cast<std::uint64_t>(tensor.numel()) * c10::elementSize(target_dtype(tensor, dtype));
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata,
                       std::optional<torch::ScalarType> dtype) {
  const std::vector<PlannedTensor> planned = plan(path, tensors, dtype);
  const std::string header = header_bytes(path, planned, metadata);
  TempFile file(path);
  file.write(header.data(), header.size());
  for (const auto& p : planned) write_tensor(path, file, p);
  file.commit();
}

}  // namespace studio::trainer
