#pragma once
// The exception thrown when a CUDA call or a kernel launch fails. Free of CUDA headers so that
// plain C++ callers (the trainer, tests) can catch it without pulling in the CUDA runtime.

#include <stdexcept>
#include <string>

namespace studio::kernels {

class KernelError : public std::runtime_error {
 public:
  // statement: the source text of the failing call; file/line: where it was checked;
  // error_name/error_text: cudaGetErrorName/cudaGetErrorString; code: the cudaError_t value.
  KernelError(std::string statement, std::string file, int line, std::string error_name,
              std::string error_text, int code);

  const std::string& statement() const noexcept { return statement_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  const std::string& error_name() const noexcept { return error_name_; }
  const std::string& error_text() const noexcept { return error_text_; }
  int code() const noexcept { return code_; }

 private:
  std::string statement_;
  std::string file_;
  int line_;
  std::string error_name_;
  std::string error_text_;
  int code_;
};

}  // namespace studio::kernels
