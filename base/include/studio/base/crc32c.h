#pragma once
// CRC-32C (Castagnoli), the checksum of TensorBoard's record framing and of the checkpoint
// manifest (checkpoint.h). With SSE 4.2 (every x86-64 server since 2008) the CPU's crc32
// instruction does it at several GB/s; elsewhere a table does it a byte at a time.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace studio {

// The CRC of `bytes` continued from `crc` (0 to start): crc32c_extend(crc32c_extend(0, a), b) is
// the CRC of a followed by b.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t crc32c_of(std::string_view bytes) {
  return crc32c_extend(0, bytes.data(), bytes.size());
}

// A whole file's size and CRC-32C, read in 8 MiB pieces. Returns "" or the error, naming the file.
std::string file_crc32c(const std::string& path, std::uint64_t& size, std::uint32_t& crc);

}  // namespace studio
