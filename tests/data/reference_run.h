#pragma once
// What the data tests share: running a reference script of tests/reference (LLaMA-Factory's or
// Hugging Face's own code) and reading the message a call throws.
#include <QString>

#include <exception>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace studio::test {

// Runs `python` on tests/reference/`script` with `input` on stdin (HF_HUB_OFFLINE=1: local
// folders only) and parses what it prints. nullopt with `error` set when the interpreter does not
// start (scripts/setup.sh installs it), the script fails (its stderr), or prints no JSON. The
// tests fail, never skip, on that.
std::optional<nlohmann::json> run_reference(const QString& python, const QString& script,
                                            const std::string& input, QString& error);

// The message f() throws, or "(no error)".
template <class F>
QString error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return "(no error)";
}

}  // namespace studio::test
