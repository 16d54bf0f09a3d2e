#pragma once
// Content hashes for the cache key: a fast 128-bit non-cryptographic hash (what matters is that
// an edited file changes its key), and a size + mtime index so an unchanged 1 GB file is not
// re-read on every load.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace studio::data::detail {

class Hasher {
 public:
  void update(std::string_view bytes);
  std::string hex() const;  // 32 hex digits of the bytes so far

 private:
  void mix(uint64_t word);
  uint64_t a_ = 0x243f6a8885a308d3ULL;
  uint64_t b_ = 0x13198a2e03707344ULL;
  uint64_t tail_ = 0;
  unsigned tail_len_ = 0;
  uint64_t total_ = 0;
};

std::string hash_string(std::string_view bytes);
// Throws DatasetError when the file cannot be read.
std::string hash_file(const std::string& path);

// Remembers (size, mtime) -> hash per file in a JSON file in the cache folder.
class FileHashIndex {
 public:
  explicit FileHashIndex(std::string index_path);
  std::string hash(const std::string& path);
  // Writes the index when it changed; a failure only costs re-hashing next time.
  void save() const;

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t mtime = 0;
    std::string hash;
  };
  std::string index_path_;
  std::map<std::string, Entry> entries_;
  bool dirty_ = false;
};

}  // namespace studio::data::detail
