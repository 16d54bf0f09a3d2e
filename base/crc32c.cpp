#include "studio/base/crc32c.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace studio {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // Castagnoli, reflected

std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

std::uint32_t by_table(std::uint32_t c, const unsigned char* p, std::size_t n) {
  static const auto table = make_table();
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t by_instruction(std::uint32_t c,
                                                              const unsigned char* p,
                                                              std::size_t n) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  auto c32 = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
#if defined(__x86_64__)
  if (has_sse42()) return ~by_instruction(c, p, size);
#endif
  return ~by_table(c, p, size);
}

std::string file_crc32c(const std::string& path, std::uint64_t& size, std::uint32_t& crc) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "cannot read " + path + ": " + std::strerror(errno);
  std::vector<unsigned char> buf(std::size_t{8} << 20);
  size = 0;
  crc = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const std::string error = "cannot read " + path + ": " + std::strerror(errno);
      ::close(fd);
      return error;
    }
    if (got == 0) break;
    crc = crc32c_extend(crc, buf.data(), static_cast<std::size_t>(got));
    size += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
  return {};
}

}  // namespace studio
