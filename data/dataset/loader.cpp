// Resolving the datasets of a run config and tokenizing each one, or reading it from the cache.
#include "loader.h"

#include <algorithm>
#include <filesystem>

#include "cache.h"
#include "content_hash.h"
#include "feedback.h"
#include "parallel.h"
#include "part_loader.h"
#include "studio/data/chat_template.h"

namespace studio::data::detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCacheVersion = "studio-data-cache 1";

constexpr const char* kind_name(const TokenizedSample*) { return "sft"; }
constexpr const char* kind_name(const PairSample*) { return "dpo"; }
constexpr const char* kKtoKind = "kto";

// A key the run config does not type (LLaMA-Factory's enable_thinking), as YAML wrote it.
std::optional<bool> yaml_bool(const RunConfig& cfg, const std::string& key) {
  for (const ExtraKey& k : cfg.extra_keys) {
    if (k.key != key) continue;
    std::string v = k.value.text;
    v.erase(std::remove_if(v.begin(), v.end(), [](char c) { return c == ' ' || c == '\n'; }), v.end());
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    if (v == "true" || v == "yes" || v == "on") return true;
    if (v == "false" || v == "no" || v == "off") return false;
  }
  return std::nullopt;
}

EncodeOptions encode_options(const RunConfig& cfg, const DatasetOptions& opt) {
  EncodeOptions e;
  e.cutoff_len = cfg.cutoff_len;
  e.train_on_prompt = cfg.train_on_prompt;
  e.mask_history = cfg.mask_history;
  e.enable_thinking = opt.enable_thinking.value_or(yaml_bool(cfg, "enable_thinking").value_or(true));
  return e;
}

// A file, or every visible file of a folder in name order (as LF reads a folder).
std::vector<std::string> resolve_files(const DatasetAttr& attr, const std::string& dataset_dir) {
  const fs::path path = fs::path(dataset_dir) / attr.file_name;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path.string()};
  if (!fs::is_directory(path, ec))
    throw DatasetError("dataset '" + attr.name + "': " + path.string() +
                       " does not exist (file_name in dataset_info.json is relative to dataset_dir)");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.is_regular_file() && entry.path().filename().string().rfind('.', 0) != 0)
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw DatasetError("dataset '" + attr.name + "': folder " + path.string() + " has no files");
  return files;
}

std::string file_stem_safe(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return s;
}

class Cache {
 public:
  // `stage_settings`: what else changes the tokens (stage pt's text encoding), one line each.
  Cache(const RunConfig& cfg, const Tokenizer& tok, const DatasetOptions& opt,
        const EncodeOptions& enc, const std::string& default_dir,
        const std::string& stage_settings = {})
      : enabled_(opt.use_cache), overwrite_(cfg.overwrite_cache),
        dir_(opt.cache_dir.empty() ? default_dir : opt.cache_dir),
        index_((fs::path(dir_) / "file_hashes.json").string()) {
    if (!enabled_) return;
    std::error_code ec;
    if (!fs::is_regular_file(tok.source(), ec)) {  // an in-memory tokenizer has no stable identity
      enabled_ = false;
      if (opt.on_warning) opt.on_warning("no cache: the tokenizer was not loaded from a file");
      return;
    }
    settings_ = std::string(kCacheVersion) + "\ntemplate=" + cfg.template_name +
                "\ntokenizer=" + index_.hash(tok.source());
    const fs::path config = fs::path(tok.source()).parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) settings_ += "\ntokenizer_config=" + index_.hash(config.string());
    settings_ += "\ncutoff_len=" + std::to_string(enc.cutoff_len) +
                 "\ntrain_on_prompt=" + std::to_string(enc.train_on_prompt) +
                 "\nmask_history=" + std::to_string(enc.mask_history) +
                 "\nenable_thinking=" + std::to_string(enc.enable_thinking) +
                 "\nmax_samples=" + (cfg.max_samples ? std::to_string(*cfg.max_samples) : "none") +
                 "\nskip_bad_rows=" + std::to_string(opt.skip_bad_rows) + "\n" + stage_settings;
  }

  bool enabled() const { return enabled_; }

  // The key covers the dataset entry, its files' contents and every setting that changes tokens.
  std::string key(const DatasetAttr& attr, const std::vector<std::string>& files, const char* kind) {
    std::string k = settings_ + "kind=" + kind + "\nentry=" + attr.entry_json + "\n";
    for (const std::string& f : files) k += fs::path(f).filename().string() + "=" + index_.hash(f) + "\n";
    return k;
  }

  std::string path(const std::string& name, const char* kind, const std::string& key) const {
    return (fs::path(dir_) / (prefix(name, kind) + hash_string(key).substr(0, 16) + ".bin")).string();
  }

  template <class Sample>
  bool read(const std::string& file, const std::string& key, Part<Sample>& part) const {
    return !overwrite_ && read_cache(file, key, part);
  }

  // Earlier caches of the same dataset are removed: long-context data makes big files.
  template <class Sample>
  std::string write(const std::string& name, const char* kind, const std::string& file,
                    const std::string& key, const Part<Sample>& part) const {
    std::string error = write_cache(file, key, part);
    if (!error.empty()) return error;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string n = entry.path().filename().string();
      if (n.rfind(prefix(name, kind), 0) == 0 && entry.path().extension() == ".bin" &&
          entry.path() != fs::path(file))
        fs::remove(entry.path(), ec);
    }
    return {};
  }

  void save_index() const {
    if (enabled_) index_.save();
  }

 private:
  static std::string prefix(const std::string& name, const char* kind) {
    return file_stem_safe(name) + "." + kind + ".";
  }

  bool enabled_;
  bool overwrite_;
  std::string dir_;
  FileHashIndex index_;
  std::string settings_;
};

void check_stage(const DatasetAttr& attr, Stage stage) {
  const std::string ds = "dataset '" + attr.name + "'";
  const bool pairwise = stage == Stage::Dpo;
  if (stage == Stage::Pt) {
    if (attr.ranking)  // as LLaMA-Factory, which refuses ranking data outside its rm/dpo stages
      throw DatasetError(ds + " holds preference pairs (\"ranking\": true); "
                         "stage pt needs plain texts (a prompt column, e.g. \"columns\": "
                         "{\"prompt\": \"text\"})");
    if (attr.formatting != Formatting::Alpaca && attr.formatting != Formatting::Sharegpt)
      throw DatasetError(ds + " is LLaMA-Factory v1 data; stage pt reads "
                         "alpaca or sharegpt datasets (the text is the first prompt message)");
    return;
  }
  if (stage == Stage::Kto) {
    if (attr.formatting != Formatting::Alpaca && attr.formatting != Formatting::Sharegpt)
      throw DatasetError(ds + " is LLaMA-Factory v1 data; stage kto reads alpaca or sharegpt "
                         "datasets with a kto_tag column");
    if (attr.ranking)  // LLaMA-Factory refuses ranking data outside its rm/dpo stages
      throw DatasetError(ds + " holds preference pairs (\"ranking\": true); stage kto needs "
                         "one response per row and a kto_tag column (true: desirable, false: "
                         "undesirable)");
    if (attr.kto_tag.empty())
      throw DatasetError(ds + " has no kto_tag column: stage kto needs one in "
                         "dataset_info.json (\"columns\": {\"kto_tag\": \"label\"}), naming "
                         "the column whose true marks a row's response desirable and false "
                         "undesirable (without it LLaMA-Factory drops every row)");
    return;
  }
  if (attr.formatting == Formatting::V1Messages) return;  // its rows say which they hold
  if (pairwise && !attr.ranking)
    throw DatasetError(ds + " has no preference pairs; stages dpo and rm "
                       "need \"ranking\": true and chosen/rejected columns in dataset_info.json");
  if (!pairwise && attr.ranking)
    throw DatasetError(ds + " holds preference pairs (\"ranking\": true); "
                       "stage sft needs plain answers");
  if (pairwise && !attr.kto_tag.empty())  // LF's converters read such rows as KTO rows
    throw DatasetError(ds + " has both \"ranking\": true and a kto_tag column: a row is a "
                       "preference pair or a KTO example; remove one of them");
}

// The settings of one dataset: its files, its row limit, and the attr's warnings said.
PartSettings dataset_settings(const DatasetAttr& attr, PartSettings settings,
                              const std::string& dataset_dir, const DatasetOptions& opt) {
  settings.attr = &attr;
  settings.files = resolve_files(attr, dataset_dir);
  if (attr.size) settings.max_samples = std::min(settings.max_samples.value_or(*attr.size), *attr.size);
  if (attr.v1) settings.encode.enable_thinking = false;  // v1 learns no thought block
  for (const std::string& w : attr.warnings)
    if (opt.on_warning) opt.on_warning(w);
  return settings;
}

template <class Sample>
Part<Sample> load_one(const DatasetAttr& attr, PartSettings settings, const char* kind,
                      Cache& cache, const std::string& dataset_dir, const DatasetOptions& opt) {
  settings = dataset_settings(attr, std::move(settings), dataset_dir, opt);
  std::string key;
  std::string file;
  Part<Sample> part;
  if (cache.enabled()) {
    key = cache.key(attr, settings.files, kind);
    file = cache.path(attr.name, kind, key);
    if (cache.read(file, key, part)) {
      part.stats.datasets_from_cache = 1;
      for (const std::string& w : part.stats.warnings)
        if (opt.on_warning) opt.on_warning(w);
      return part;
    }
  }
  part = tokenize_dataset<Sample>(settings);
  if (cache.enabled()) {
    const std::string error = cache.write(attr.name, kind, file, key, part);
    if (!error.empty() && opt.on_warning) opt.on_warning("cache not written: " + error);
  }
  return part;
}

PartSettings part_settings(const RunConfig& cfg, const DatasetOptions& options) {
  if (cfg.dataset.empty() && !cfg.is_v1())
    throw DatasetError("no dataset: set `dataset` to names from dataset_info.json");
  if (cfg.cutoff_len < 1) throw DatasetError("cutoff_len must be at least 1");
  PartSettings settings;
  settings.encode = encode_options(cfg, options);
  settings.max_samples = cfg.max_samples;
  settings.skip_bad_rows = options.skip_bad_rows;
  settings.workers = resolve_workers(
      options.num_workers > 0 ? options.num_workers
                              : static_cast<int>(cfg.preprocessing_num_workers.value_or(0)));
  settings.batch_rows = std::max<std::size_t>(options.batch_rows, 1);
  settings.on_warning = options.on_warning;
  return settings;
}

// Every dataset of `info`, each through the cache, checked against the stage first.
template <class Sample>
LoadedParts<Sample> load_all(const DatasetInfo& info, const PartSettings& settings, Stage stage,
                             const char* kind, Cache& cache, const DatasetOptions& options) {
  LoadedParts<Sample> out;
  auto load_list = [&](const std::vector<std::string>& names, std::vector<NamedPart<Sample>>& into) {
    for (const std::string& name : names) {
      const DatasetAttr attr = info.find(name);
      check_stage(attr, stage);
      into.push_back(
          {name, load_one<Sample>(attr, settings, kind, cache, info.data_dir(), options)});
    }
  };
  load_list(info.train(), out.train);
  load_list(info.eval(), out.eval);
  cache.save_index();
  return out;
}

// Stage kto: the datasets of one list are tokenized together (their rows pair across datasets
// within LF's map batches). Each is cached on its own, under a key that covers the whole list and
// its place in it; only when every one of them is in the cache is the cache used.
std::vector<NamedPart<FeedbackSample>> load_feedback_list(
    const DatasetInfo& info, const std::vector<std::string>& names, const PartSettings& settings,
    const RunConfig& cfg, Cache& cache, const DatasetOptions& options) {
  std::vector<DatasetAttr> attrs;
  for (const std::string& name : names) {
    attrs.push_back(info.find(name));
    check_stage(attrs.back(), Stage::Kto);
  }
  std::vector<PartSettings> sets;  // pointing into attrs, complete by now
  for (const DatasetAttr& a : attrs)
    sets.push_back(dataset_settings(a, settings, info.data_dir(), options));
  std::vector<NamedPart<FeedbackSample>> out;
  std::vector<std::string> keys;
  std::vector<std::string> files;
  if (cache.enabled()) {
    std::string list;
    for (std::size_t d = 0; d < attrs.size(); ++d)
      list += cache.key(attrs[d], sets[d].files, kKtoKind);
    for (std::size_t d = 0; d < attrs.size(); ++d) {
      keys.push_back(list + "position=" + std::to_string(d) + "\n");
      files.push_back(cache.path(attrs[d].name, kKtoKind, keys.back()));
    }
    for (std::size_t d = 0; d < attrs.size(); ++d) {
      Part<FeedbackSample> part;
      if (!cache.read(files[d], keys[d], part)) break;
      part.stats.datasets_from_cache = 1;
      out.push_back({names[d], std::move(part)});
    }
    if (out.size() == attrs.size()) {
      for (const auto& np : out)
        for (const std::string& w : np.part.stats.warnings)
          if (options.on_warning) options.on_warning(w);
      return out;
    }
    out.clear();
  }
  std::vector<Part<FeedbackSample>> parts = tokenize_feedback(sets, cfg);
  for (std::size_t d = 0; d < parts.size(); ++d) {
    if (cache.enabled()) {
      const std::string error = cache.write(attrs[d].name, kKtoKind, files[d], keys[d], parts[d]);
      if (!error.empty() && options.on_warning) options.on_warning("cache not written: " + error);
    }
    out.push_back({names[d], std::move(parts[d])});
  }
  return out;
}

// What the stages that render conversations share: the chat template bound to the tokenizer,
// the settings that point at it, and the datasets.
struct ChatLoad {
  ChatLoad(const RunConfig& cfg, const Tokenizer& tokenizer, const DatasetOptions& options)
      : encoder(find_template(cfg.template_name), tokenizer),
        settings(part_settings(cfg, options)),
        info(DatasetInfo::for_config(cfg)) {
    if (cfg.train_on_prompt && encoder.chat_template().efficient_eos)
      throw TemplateError("template '" + cfg.template_name + "' does not support train_on_prompt");
    settings.encoder = &encoder;
  }
  ChatLoad(const ChatLoad&) = delete;
  ChatLoad& operator=(const ChatLoad&) = delete;

  const TemplateEncoder encoder;
  PartSettings settings;
  const DatasetInfo info;
};

}  // namespace

void require_stage(const RunConfig& cfg, Stage stage, const char* loader) {
  if (cfg.stage != stage)
    throw DatasetError(std::string(loader) + " reads stage " + std::string(to_string(stage)) +
                       "'s data; this config's stage is " + std::string(to_string(cfg.stage)));
}

std::string why_empty(const RunConfig& cfg, const DataStats& stats) {
  std::string names = cfg.is_v1() ? cfg.v1.train_dataset : "";
  for (const auto& n : cfg.dataset) names += (names.empty() ? "" : ",") + n;
  std::string msg = "dataset '" + names + "' gave no training samples";
  if (stats.skipped_invalid + stats.skipped_bad_rows == 0) return msg + " (the files have no rows)";
  msg += " (" + std::to_string(stats.skipped_invalid) + " conversations skipped, " +
         std::to_string(stats.skipped_bad_rows) + " bad rows skipped";
  if (!stats.warnings.empty()) msg += "; first: " + stats.warnings.front();
  return msg + ")";
}

template <class Sample>
LoadedParts<Sample> load_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                               const DatasetOptions& options) {
  const ChatLoad load(cfg, tokenizer, options);
  Cache cache(cfg, tokenizer, options, load.settings.encode, load.info.cache_dir());
  constexpr Stage stage = std::is_same_v<Sample, PairSample> ? Stage::Dpo : Stage::Sft;
  return load_all<Sample>(load.info, load.settings, stage,
                          kind_name(static_cast<const Sample*>(nullptr)), cache, options);
}

template LoadedParts<TokenizedSample> load_parts(const RunConfig&, const Tokenizer&, const DatasetOptions&);
template LoadedParts<PairSample> load_parts(const RunConfig&, const Tokenizer&, const DatasetOptions&);

LoadedParts<FeedbackSample> load_feedback_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                                                const DatasetOptions& options) {
  const ChatLoad load(cfg, tokenizer, options);
  // The rows pair within LF's map batches: their size and the shards change the KL sequences.
  const std::string batching =
      "preprocessing_batch_size=" + std::to_string(cfg.preprocessing_batch_size) +
      "\npreprocessing_num_workers=" +
      (cfg.preprocessing_num_workers ? std::to_string(*cfg.preprocessing_num_workers) : "none") +
      "\n";
  Cache cache(cfg, tokenizer, options, load.settings.encode, load.info.cache_dir(), batching);
  LoadedParts<FeedbackSample> out;
  out.train = load_feedback_list(load.info, load.info.train(), load.settings, cfg, cache, options);
  out.eval = load_feedback_list(load.info, load.info.eval(), load.settings, cfg, cache, options);
  cache.save_index();
  return out;
}

LoadedParts<TokenizedSample> load_text_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                                             const DatasetOptions& options,
                                             const TextEncoding& text) {
  PartSettings settings = part_settings(cfg, options);
  settings.text = &text;
  const DatasetInfo info = DatasetInfo::for_config(cfg);
  // The text encoding in the key keeps pt's caches apart from each other (packing or not, the
  // eos a template picks, bos); their kind, from sft's caches of the same dataset.
  const std::string stage_settings =
      "pt_prefix=" + text.prefix + "\npt_suffix=" + text.suffix + "\npt_truncate_to=" +
      (text.truncate_to ? std::to_string(*text.truncate_to) : "none") + "\n";
  Cache cache(cfg, tokenizer, options, settings.encode, info.cache_dir(), stage_settings);
  return load_all<TokenizedSample>(info, settings, Stage::Pt, "pt", cache, options);
}

}  // namespace studio::data::detail
