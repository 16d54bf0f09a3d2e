#pragma once
// Test tokenizers for the chat templates: the fixtures of tests/fixtures/tokenizers plus, as added
// special tokens, the template tokens they lack (Gemma's <end_of_turn>, Phi's <|end|>, GLM-4's
// <|user|>, Llama 3's <|eot_id|>, ...). Real models ship these tokens; without them LLaMA-Factory
// would add them as new embedding rows, a pairing studio_data refuses. Built in memory for the
// literal tests and written to a folder for LLaMA-Factory in the parity test.
#include <QString>

#include <string>

namespace studio::test {

struct TokenizerFiles {
  std::string origin;          // the fixture's tokenizer.json, for messages
  std::string tokenizer_json;  // with the added tokens
  std::string config_json;     // the fixture's tokenizer_config.json, unchanged
};

// `fixture` names a folder of tests/fixtures/tokenizers, e.g. "llama2-style"; with `add` false the
// files are the fixture's, unchanged.
TokenizerFiles with_chat_tokens(const std::string& fixture, bool add = true);

// Writes tokenizer.json and tokenizer_config.json into `dir` (created); false on failure.
bool write_tokenizer(const TokenizerFiles& files, const QString& dir);

}  // namespace studio::test
