#include "studio/trainer/metrics/tensorboard_writer.h"

#include "studio/base/crc32c.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <unistd.h>

namespace studio {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// A length-delimited field (wire type 2).
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// The Event fields every record has: wall_time (1, double), step (2, int64).
std::string event_head(double wall_time, std::int64_t step) {
  std::string e;
  put_varint(e, (1 << 3) | 1);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &wall_time, sizeof bits);
  put_u64(e, bits);
  if (step != 0) {
    put_varint(e, (2 << 3) | 0);
    put_varint(e, static_cast<std::uint64_t>(step));
  }
  return e;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) { return crc32c_of(bytes); }

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string tfrecord(std::string_view payload) {
  std::string length;
  put_u64(length, payload.size());
  std::string out = length;
  put_u32(out, masked_crc32c(length));
  out.append(payload);
  put_u32(out, masked_crc32c(payload));
  return out;
}

std::string tensorboard_version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");  // file_version
  return e;
}

std::string tensorboard_scalar_event(const std::string& tag, std::int64_t step, double value,
                                     double wall_time) {
  std::string v;  // Summary.Value: tag (1), simple_value (2, float)
  put_bytes(v, 1, tag);
  put_varint(v, (2 << 3) | 5);
  const float f = static_cast<float>(value);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  put_u32(v, bits);
  std::string summary;  // Summary: value (1, repeated)
  put_bytes(summary, 1, v);
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);  // Event.summary
  return e;
}

std::string default_logging_dir(const std::string& output_dir, double unix_time,
                                const std::string& host) {
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm local{};
  ::localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &local);
  return (std::filesystem::path(output_dir) / "runs" / (std::string(stamp) + "_" + host)).string();
}

TensorBoardWriter::~TensorBoardWriter() { close(); }

std::string TensorBoardWriter::open(const std::string& dir, double wall_time) {
  close();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create the TensorBoard folder " + dir + ": " + ec.message();
  // A resumed run (or a second writer in the same second) gets a file of its own.
  for (int n = 0;; ++n) {
    const std::string name = "events.out.tfevents." +
                             std::to_string(static_cast<long long>(wall_time)) + "." + host_name() +
                             "." + std::to_string(::getpid()) + "." + std::to_string(n);
    path_ = (std::filesystem::path(dir) / name).string();
    if (!std::filesystem::exists(path_, ec)) break;
  }
  file_ = std::fopen(path_.c_str(), "wbx");
  if (!file_) return "cannot create " + path_ + ": " + std::strerror(errno);
  if (std::string e = write(tfrecord(tensorboard_version_event(wall_time))); !e.empty()) return e;
  return flush();
}

std::string TensorBoardWriter::write(const std::string& record) {
  if (!file_) return "the TensorBoard event file is not open";
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    return "cannot write " + path_ + ": " + std::strerror(errno);
  return {};
}

std::string TensorBoardWriter::scalar(const std::string& tag, std::int64_t step, double value,
                                      double wall_time) {
  if (!std::isfinite(value)) return {};
  return write(tfrecord(tensorboard_scalar_event(tag, step, value, wall_time)));
}

std::string TensorBoardWriter::flush() {
  if (file_ && std::fflush(file_) != 0) return "cannot write " + path_ + ": " + std::strerror(errno);
  return {};
}

std::string TensorBoardWriter::close() {
  if (!file_) return {};
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  return ok ? std::string() : "cannot write " + path_ + ": " + std::strerror(errno);
}

}  // namespace studio
