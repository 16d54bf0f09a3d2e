// The tokenizer: arbitrary bytes loaded as a tokenizer.json (input starting with 'L'), or
// encoded, invalid UTF-8 included, with each tokenizer the tests ship (any other input).
// Invariants: no crash, only TokenizerError, and every id an encoder gives decodes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "studio/data/tokenizer.h"

namespace {

using studio::data::Tokenizer;
using studio::data::TokenizerError;

void exercise(const Tokenizer& tok, std::string_view text) {
  for (const bool special : {false, true}) {
    std::vector<std::int32_t> ids;
    try {
      ids = tok.encode(text, special);
    } catch (const TokenizerError&) {
      continue;  // e.g. a byte no piece covers in a tokenizer without byte fallback
    }
    for (const std::int32_t id : ids)
      if (!tok.id_to_token(id)) {
        std::fprintf(stderr, "encode gave id %d, which has no token\n", id);
        std::abort();
      }
    try {
      (void)tok.decode(ids, special);
    } catch (const TokenizerError& e) {
      std::fprintf(stderr, "encoded ids do not decode: %s\n", e.what());
      std::abort();
    }
  }
}

const std::vector<Tokenizer>& shipped() {
  static const std::vector<Tokenizer> all = [] {
    std::vector<Tokenizer> out;
    for (const char* name : {"qwen2-style", "llama2-style", "llama3-style",
                             "mistral-metaspace-style", "tiny-byte-fallback", "tiny-added-tokens"})
      out.push_back(
          Tokenizer::load(std::string(STUDIO_SOURCE_DIR "/tests/fixtures/tokenizers/") + name));
    return out;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!bytes.empty() && bytes[0] == 'L') {
    try {
      const Tokenizer tok = Tokenizer::from_json(bytes.substr(1), "fuzz/tokenizer.json");
      exercise(tok, "Hello, world! 123 \xe4\xbd\xa0\xe5\xa5\xbd\n\t<|im_end|> ");
    } catch (const TokenizerError&) {
    }
    return 0;
  }
  for (const Tokenizer& tok : shipped()) exercise(tok, bytes);
  return 0;
}
