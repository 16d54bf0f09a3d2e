#include "studio/kernels/kernel_error.h"

#include <utility>

namespace studio::kernels {
namespace {

std::string describe(const std::string& statement, const std::string& file, int line,
                     const std::string& name, const std::string& text) {
  return file + ':' + std::to_string(line) + ": " + statement + " failed: " + name + ": " + text;
}

}  // namespace

KernelError::KernelError(std::string statement, std::string file, int line, std::string error_name,
                         std::string error_text, int code)
    : std::runtime_error(describe(statement, file, line, error_name, error_text)),
      statement_(std::move(statement)),
      file_(std::move(file)),
      line_(line),
      error_name_(std::move(error_name)),
      error_text_(std::move(error_text)),
      code_(code) {}

}  // namespace studio::kernels
