#pragma once
// Hugging Face tokenizers as the test oracle: runs tests/reference/hf_tokenize.py (the Python
// package `tokenizers`, the Rust library itself) with the project's Python environment
// (STUDIO_PYTHON) and reads its answers. The tests fail, never skip, when the package is missing:
// scripts/setup.sh installs it.
#include <QByteArray>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace studio::test {

struct HfAnswer {
  std::vector<int32_t> ids;
  std::string decoded;       // decode(ids, skip_special_tokens = false)
  std::string decoded_skip;  // decode(ids, skip_special_tokens = true)
};

// Empty when the reference can run, else what is missing and how to install it.
QString hf_reference_problem();

// One request per text, encoded with or without special tokens; texts that are not valid UTF-8
// are sent as raw bytes ({"base64": ...}). Requests of both kinds can go in one call.
nlohmann::json encode_requests(const std::vector<std::string>& texts, bool add_special_tokens);

// Runs the reference on `tokenizer_json`. On failure returns nullopt and sets `error`.
std::optional<std::vector<HfAnswer>> hf_answers(const QString& tokenizer_json,
                                                const nlohmann::json& requests, QString& error);
// hf_tokenize.js --info: {"vocab_size", "vocab_size_with_added"}.
std::optional<nlohmann::json> hf_info(const QString& tokenizer_json, QString& error);

// `count` strings drawn with a fixed seed from a mixed alphabet: scripts, emoji pieces,
// combining marks, odd whitespace, digits, contractions and fragments of special tokens.
std::vector<std::string> random_texts(std::size_t count, uint32_t seed);

QString fixtures_dir();  // tests/fixtures/tokenizers
std::string ids_text(const std::vector<int32_t>& ids);

}  // namespace studio::test
