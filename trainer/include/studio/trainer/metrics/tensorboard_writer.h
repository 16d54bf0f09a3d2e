#pragma once
// TensorBoard event files, as TensorBoard, torch.utils.tensorboard and Hugging Face's Trainer
// (report_to: tensorboard) write them: a file events.out.tfevents.SECONDS.HOST.PID.N of TFRecord
// records (length, masked CRC-32C of the length, an Event protocol buffer, its masked CRC-32C),
// the first saying the file version ("brain.Event:2"), the others one scalar each (a Summary
// value with a tag and a simple_value). Written by hand: no protobuf library is needed for these
// few fields. Errors come back as messages naming the file; nothing here throws.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace studio {

// CRC-32C (Castagnoli), as TFRecord uses it, and its masked form.
std::uint32_t crc32c(std::string_view bytes);
std::uint32_t masked_crc32c(std::string_view bytes);

// One TFRecord around `payload`.
std::string tfrecord(std::string_view payload);
// An Event proto: the file version record, and a scalar at a step.
std::string tensorboard_version_event(double wall_time);
std::string tensorboard_scalar_event(const std::string& tag, std::int64_t step, double value,
                                     double wall_time);

// Hugging Face's default logging_dir: OUTPUT_DIR/runs/<Mon><DD>_<HH-MM-SS>_<host> (local time).
std::string default_logging_dir(const std::string& output_dir, double unix_time,
                                const std::string& host);

class TensorBoardWriter {
 public:
  TensorBoardWriter() = default;
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Creates `dir` (and its parents) and a new event file in it. "" or the error.
  std::string open(const std::string& dir, double wall_time);
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  // One scalar; NaN and infinite values are skipped (TensorBoard would plot them as gaps anyway
  // but some readers choke on them). "" or the error.
  std::string scalar(const std::string& tag, std::int64_t step, double value, double wall_time);
  // What was written reaches the file (TensorBoard reads it while the run goes on).
  std::string flush();
  std::string close();

 private:
  std::string write(const std::string& record);

  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace studio
