#pragma once
// Private to studio_config: collects a validation pass's diagnostics, each located at the key it
// is about (at its value, as the file spells the key). validate.cpp and llamafactory_v1.cpp share
// it.
#include <filesystem>
#include <string>
#include <vector>

#include "studio/config/config_schema.h"
#include "studio/config/diagnostic.h"
#include "studio/model_facts/hub_cache.h"
#include "studio/config/run_config.h"
#include "studio/config/validate.h"

namespace studio::detail {

class Checker {
 public:
  Checker(const RunConfig& cfg, const ValidateOptions& opt) : cfg_(cfg), opt_(opt) {}

  void error(const std::string& key, std::string msg, std::string allowed = {}) {
    add(Severity::Error, key, std::move(msg), std::move(allowed));
  }
  void warn(const std::string& key, std::string msg, std::string allowed = {}) {
    add(Severity::Warning, key, std::move(msg), std::move(allowed));
  }
  void note(const std::string& key, std::string msg) {
    add(Severity::Note, key, std::move(msg), {});
  }
  // A missing local path: an error at train time, a warning in `validate`.
  void missing(const std::string& key, std::string msg) {
    add(opt_.for_training ? Severity::Error : Severity::Warning, key, std::move(msg), {});
  }
  void require(bool ok, const std::string& key, const std::string& msg) {
    if (!ok) error(key, msg, allowed_of(key));
  }
  // A problem in another file the config names (a v1 dataset YAML), at its own place there.
  void add_at(Diagnostic d) { diags_.push_back(std::move(d)); }
  bool for_training() const { return opt_.for_training; }
  bool given(const std::string& key) const { return cfg_.source.has(key); }
  int world_size() const { return opt_.world_size(); }
  int line(const std::string& key) const {
    auto it = cfg_.source.key_pos.find(key);
    return it == cfg_.source.key_pos.end() ? 0 : it->second.line;
  }
  // " (line N)" naming where `key` is, for messages about another key; "" when not in the file.
  std::string at_line(const std::string& key) const {
    int l = line(key);
    return l > 0 ? " (line " + std::to_string(l) + ")" : "";
  }
  // The key table's `key` as the file spells it (a v1 file: micro_batch_size, cp_size, ...), for
  // naming another key inside a message.
  const std::string& spelled(const std::string& key) const { return cfg_.source.spelling(key); }
  std::filesystem::path resolve(const std::string& p) const {
    std::filesystem::path path(p);
    if (path.is_absolute() || opt_.base_dir.empty()) return path;
    return std::filesystem::path(opt_.base_dir) / path;
  }
  const std::string& base_dir() const { return opt_.base_dir; }
  // A model folder, or a hub id's snapshot in the local Hugging Face cache; "" with `error`.
  std::string model_dir(const std::string& value, std::string& error) const {
    const std::string cache = cfg_.cache_dir ? resolve(*cfg_.cache_dir).string() : std::string();
    return resolve_model_dir(value, opt_.base_dir, cfg_.model_revision, cache, error)
        .value_or(std::string());
  }
  std::vector<Diagnostic> take() { return std::move(diags_); }

 private:
  static std::string allowed_of(const std::string& key) {
    const FieldSpec* f = find_field(key);
    return f ? f->allowed : std::string();
  }
  void add(Severity sev, const std::string& key, std::string msg, std::string allowed) {
    auto it = cfg_.source.value_pos.find(key);
    SourcePos p = it == cfg_.source.value_pos.end() ? SourcePos{} : it->second;
    diags_.push_back({sev, cfg_.source.file, p.line, p.column, cfg_.source.spelling(key),
                      std::move(msg), std::move(allowed)});
  }
  const RunConfig& cfg_;
  const ValidateOptions& opt_;
  std::vector<Diagnostic> diags_;
};

// The checks of a LLaMA-Factory v1 config, resolved (llamafactory_v1_resolve.cpp): its dataset
// files, the stage and chat template chosen for it, global_batch_size and dp_size on the world.
void check_llamafactory_v1(const RunConfig& c, Checker& ck);

}  // namespace studio::detail
