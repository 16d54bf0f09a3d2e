#include "chat_tokenizers.h"

#include <QDir>
#include <QFile>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace studio::test {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every template token that is a special token in the models these templates are for.
const char* const kChatTokens[] = {
    "<|im_start|>", "<|im_end|>", "<|im_sep|>",          "<start_of_turn>",   "<end_of_turn>",
    "<|system|>",   "<|user|>",   "<|assistant|>",       "<|end|>",           "<|observation|>",
    "[gMASK]",      "<sop>",      "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};

}  // namespace

TokenizerFiles with_chat_tokens(const std::string& fixture, bool add) {
  const std::string dir = std::string(STUDIO_TEST_FIXTURES_DIR) + "/tokenizers/" + fixture;
  TokenizerFiles files;
  files.origin = dir + "/tokenizer.json";
  // ordered_json keeps the file's key order, so only the added tokens differ from the fixture.
  auto json = nlohmann::ordered_json::parse(read_file(files.origin));
  auto& added = json.at("added_tokens");
  int64_t next = 0;
  for (const auto& [token, id] : json.at("model").at("vocab").items())
    next = std::max(next, id.get<int64_t>() + 1);
  for (const auto& token : added) next = std::max(next, token.at("id").get<int64_t>() + 1);
  for (const char* content : kChatTokens) {
    if (!add) break;
    bool present = false;
    for (const auto& token : added) present = present || token.at("content") == content;
    if (present) continue;
    added.push_back({{"id", next++},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  files.tokenizer_json = json.dump();
  files.config_json = read_file(dir + "/tokenizer_config.json");
  return files;
}

bool write_tokenizer(const TokenizerFiles& files, const QString& dir) {
  if (!QDir().mkpath(dir)) return false;
  for (const auto& [name, text] : {std::pair{"tokenizer.json", &files.tokenizer_json},
                                   std::pair{"tokenizer_config.json", &files.config_json}}) {
    QFile out(dir + "/" + name);
    if (!out.open(QIODevice::WriteOnly) ||
        out.write(text->data(), static_cast<qint64>(text->size())) !=
            static_cast<qint64>(text->size()))
      return false;
  }
  return true;
}

}  // namespace studio::test
