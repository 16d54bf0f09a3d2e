// Reading tokenizer.json and tokenizer_config.json into a Tokenizer.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "json_node.h"
#include "studio/base/json_file.h"
#include "tokenizer_impl.h"

namespace studio::data {

namespace {

using detail::JsonNode;
namespace fs = std::filesystem;

nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  nlohmann::json out;
  JsonSyntaxError syntax;
  if (!parse_json_text(text, out, syntax))
    throw TokenizerError(origin + ":" + std::to_string(syntax.line) + ":" +
                         std::to_string(syntax.column) + ": malformed JSON: " + syntax.what);
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw TokenizerError(file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A special token in tokenizer_config.json: null, a string, or an AddedToken object.
std::optional<std::string> config_token(const JsonNode& node) {
  if (node.is_null()) return std::nullopt;
  if (node.raw().is_string()) return node.string();
  return node["content"].string();
}

std::optional<int32_t> config_token_id(const Tokenizer& tokenizer, const JsonNode& node) {
  const auto name = config_token(node);
  if (!name) return std::nullopt;
  const auto id = tokenizer.token_to_id(*name);
  if (!id) node.fail("'" + *name + "' is not a token of " + tokenizer.source());
  return id;
}

// bos/eos/pad ids, and add_bos_token/add_eos_token overriding the template's ends.
void apply_config(Tokenizer::Impl& impl, const Tokenizer& view, const JsonNode& config) {
  config.require_object();
  impl.bos = config_token_id(view, config["bos_token"]);
  impl.eos = config_token_id(view, config["eos_token"]);
  impl.pad = config_token_id(view, config["pad_token"]);
  const auto frame_end = [](const JsonNode& flag, const std::optional<int32_t>& id,
                            std::vector<int32_t>& end) {
    if (flag.is_null()) return;
    end.clear();
    if (flag.boolean() && id) end.push_back(*id);
  };
  frame_end(config["add_bos_token"], impl.bos, impl.special_frame.before);
  impl.add_bos_token = config["add_bos_token"].boolean_or(false) && impl.bos.has_value();
  frame_end(config["add_eos_token"], impl.eos, impl.special_frame.after);
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, const std::string& origin,
                               std::string_view tokenizer_config_json) {
  const nlohmann::json document = parse_json(tokenizer_json, origin);
  const JsonNode root(document, origin);
  root.require_object();
  auto impl = std::make_shared<Impl>();
  impl->source = origin;
  impl->model = detail::BpeModel::from_json(root["model"]);
  impl->normalizer = detail::normalizer_from_json(root["normalizer"]);
  impl->pre_tokenizer = detail::pre_tokenizer_from_json(root["pre_tokenizer"]);
  impl->special_frame = detail::post_processor_from_json(root["post_processor"]);
  impl->decoder = detail::decoder_from_json(root["decoder"]);
  const detail::BpeModel& model = *impl->model;
  const detail::Normalizer* normalizer = impl->normalizer.get();
  impl->added.load(
      root["added_tokens"], [&model](std::string_view token) { return model.token_to_id(token); },
      model.size(),
      [normalizer](const std::string& content) {
        detail::Piece piece{content, true};
        if (normalizer) normalizer->normalize(piece);
        return piece.text;
      });
  if (!tokenizer_config_json.empty()) {
    const std::string config_origin =
        (fs::path(origin).parent_path() / "tokenizer_config.json").string();
    const nlohmann::json config = parse_json(tokenizer_config_json, config_origin);
    apply_config(*impl, Tokenizer(impl), JsonNode(config, config_origin));
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& path) {
  fs::path file(path);
  std::error_code error;
  if (fs::is_directory(file, error)) file /= "tokenizer.json";
  if (!fs::is_regular_file(file, error)) {
    throw TokenizerError(file.string() +
                         ": no such file (expected a tokenizer.json or a model "
                         "folder holding one)");
  }
  const fs::path config = file.parent_path() / "tokenizer_config.json";
  const std::string config_text =
      fs::is_regular_file(config, error) ? read_text(config) : std::string();
  return from_json(read_text(file), file.string(), config_text);
}

}  // namespace studio::data
