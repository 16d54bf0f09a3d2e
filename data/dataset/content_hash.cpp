#include "content_hash.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/base/whole_number.h"
#include "studio/data/dataset_info.h"

namespace studio::data::detail {
namespace {

constexpr uint64_t kP1 = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kP2 = 0xc2b2ae3d27d4eb4fULL;
constexpr uint64_t kP3 = 0x165667b19e3779f9ULL;
constexpr uint64_t kP4 = 0xd6e8feb86659fd93ULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t avalanche(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string to_hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

}  // namespace

void Hasher::mix(uint64_t word) {
  a_ = rotl(a_ ^ (word * kP1), 31) * kP2;
  b_ = rotl(b_ + word * kP3, 27) * kP4 + a_;
}

void Hasher::update(std::string_view bytes) {
  total_ += bytes.size();
  std::size_t i = 0;
  while (tail_len_ != 0 && i < bytes.size()) {  // finish a word begun by an earlier call
    tail_ |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i++])) << (8 * tail_len_);
    if (++tail_len_ == 8) {
      mix(tail_);
      tail_ = 0;
      tail_len_ = 0;
    }
  }
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);  // little-endian hosts only, as the cache files
    mix(word);
  }
  for (; i < bytes.size(); ++i, ++tail_len_)
    tail_ |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * tail_len_);
}

std::string Hasher::hex() const {
  uint64_t a = a_;
  uint64_t b = b_;
  if (tail_len_ != 0) {
    a = rotl(a ^ (tail_ * kP1), 31) * kP2;
    b = rotl(b + tail_ * kP3, 27) * kP4 + a;
  }
  a = avalanche(a ^ total_);
  b = avalanche(b + a);
  return to_hex(a) + to_hex(b);
}

std::string hash_string(std::string_view bytes) {
  Hasher h;
  h.update(bytes);
  return h.hex();
}

std::string hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError(path + ": cannot open");
  Hasher h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(std::string_view(buf.data(), static_cast<std::size_t>(in.gcount())));
  }
  if (in.bad()) throw DatasetError(path + ": read error");
  return h.hex();
}

FileHashIndex::FileHashIndex(std::string index_path) : index_path_(std::move(index_path)) {
  nlohmann::json doc;
  std::string error;
  if (!std::filesystem::exists(index_path_) || !read_json_file(index_path_, doc, error)) return;
  if (!doc.is_object()) return;
  // An entry that cannot be read is hashed again, as a missing one is.
  for (const auto& [path, e] : doc.items()) {
    int64_t size = 0, mtime = 0;
    if (!e.is_object() || !e.contains("size") || !e.contains("mtime") || !e.contains("hash") ||
        !e["hash"].is_string() || !json_whole(e["size"], size, {0, INT64_MAX}).empty() ||
        !json_whole(e["mtime"], mtime).empty())
      continue;
    entries_[path] = {static_cast<uint64_t>(size), mtime, e["hash"].get<std::string>()};
  }
}

std::string FileHashIndex::hash(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string key = fs::absolute(path, ec).lexically_normal().string();
  const uint64_t size = fs::file_size(path, ec);
  const int64_t mtime = ec ? 0 : static_cast<int64_t>(fs::last_write_time(path, ec).time_since_epoch().count());
  auto it = entries_.find(key);
  if (!ec && it != entries_.end() && it->second.size == size && it->second.mtime == mtime)
    return it->second.hash;
  Entry e{size, mtime, hash_file(path)};
  if (!ec) {
    entries_[key] = e;
    dirty_ = true;
  }
  return e.hash;
}

void FileHashIndex::save() const {
  if (!dirty_) return;
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [path, e] : entries_)
    doc[path] = {{"size", e.size}, {"mtime", e.mtime}, {"hash", e.hash}};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(index_path_).parent_path(), ec);
  write_file_atomic(index_path_, doc.dump(1));
}

}  // namespace studio::data::detail
