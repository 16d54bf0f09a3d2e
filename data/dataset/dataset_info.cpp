// Parsing dataset_info.json the way LLaMA-Factory's parser.py reads it.
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "studio/base/json_file.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/data/dataset_info.h"

namespace studio::data {
namespace {

using nlohmann::json;

const std::set<std::string> kHubKeys = {"hf_hub_url", "ms_hub_url", "om_hub_url", "script_url",
                                        "cloud_file_name"};
const std::set<std::string> kNoEffectKeys = {"split", "folder", "subset", "num_samples"};
const std::set<std::string> kRefusedColumns = {"images", "videos", "audios"};

std::string where(const std::string& file, const std::string& name) {
  return file + ": dataset '" + name + "'";
}

std::string string_field(const json& obj, const std::string& key, const std::string& ctx) {
  const json& v = obj.at(key);
  if (!v.is_string()) throw DatasetError(ctx + ": '" + key + "' must be a string");
  return v.get<std::string>();
}

void read_columns(const json& entry, DatasetAttr& a, const std::string& ctx) {
  if (!entry.contains("columns")) return;
  const json& cols = entry.at("columns");
  if (!cols.is_object()) throw DatasetError(ctx + ": 'columns' must be an object");
  const std::map<std::string, std::string*> slots = {
      {"prompt", &a.prompt},   {"query", &a.query},   {"response", &a.response},
      {"history", &a.history}, {"messages", &a.messages}, {"system", &a.system},
      {"tools", &a.tools},     {"chosen", &a.chosen}, {"rejected", &a.rejected},
      {"kto_tag", &a.kto_tag}};
  for (const auto& [key, value] : cols.items()) {
    if (kRefusedColumns.count(key))
      throw DatasetError(ctx + ": column '" + key +
                         "' is not supported (multimodal data is not trained here)");
    auto it = slots.find(key);
    if (it == slots.end()) {
      a.warnings.push_back(ctx + ": unknown column role '" + key + "' ignored");
      continue;
    }
    if (!value.is_string()) throw DatasetError(ctx + ": column '" + key + "' must name a column");
    *it->second = value.get<std::string>();
    a.columns[key] = *it->second;
  }
}

void read_tags(const json& entry, DatasetAttr& a, const std::string& ctx) {
  if (!entry.contains("tags")) return;
  const json& tags = entry.at("tags");
  if (!tags.is_object()) throw DatasetError(ctx + ": 'tags' must be an object");
  const std::map<std::string, std::string*> slots = {
      {"role_tag", &a.role_tag},         {"content_tag", &a.content_tag},
      {"user_tag", &a.user_tag},         {"assistant_tag", &a.assistant_tag},
      {"observation_tag", &a.observation_tag}, {"function_tag", &a.function_tag},
      {"system_tag", &a.system_tag}};
  for (const auto& [key, value] : tags.items()) {
    auto it = slots.find(key);
    if (it == slots.end()) {
      a.warnings.push_back(ctx + ": unknown tag '" + key + "' ignored");
      continue;
    }
    if (!value.is_string()) throw DatasetError(ctx + ": tag '" + key + "' must be a string");
    *it->second = value.get<std::string>();
    a.tags_given = true;
  }
}

DatasetAttr parse_entry(const std::string& name, const json& entry, const std::string& file) {
  const std::string ctx = where(file, name);
  if (!entry.is_object()) throw DatasetError(ctx + ": the entry must be an object");
  DatasetAttr a;
  a.name = name;
  a.entry_json = entry.dump();
  for (const auto& key : kHubKeys)
    if (entry.contains(key) && !entry.contains("file_name"))
      throw DatasetError(ctx + ": '" + key +
                         "' datasets are not downloaded here; download the files and set "
                         "'file_name'");
  if (!entry.contains("file_name"))
    throw DatasetError(ctx + ": no 'file_name' (the data file, relative to the dataset_dir)");
  a.file_name = string_field(entry, "file_name", ctx);
  if (entry.contains("formatting")) {
    const std::string f = string_field(entry, "formatting", ctx);
    if (f == "alpaca") {
      a.formatting = Formatting::Alpaca;
    } else if (f == "sharegpt" || f == "openai") {
      a.formatting = Formatting::Sharegpt;
    } else {
      throw DatasetError(ctx + ": formatting '" + f + "' is unknown (allowed: alpaca, sharegpt, openai)");
    }
    if (f == "openai") {  // LF's OpenAI converter: sharegpt with role/content messages
      a.messages = "messages";
      a.use_openai_tags();
      a.tags_given = true;
    }
  }
  if (entry.contains("ranking")) {
    if (!entry.at("ranking").is_boolean()) throw DatasetError(ctx + ": 'ranking' must be true or false");
    a.ranking = entry.at("ranking").get<bool>();
  }
  for (const auto& key : kNoEffectKeys)
    if (entry.contains(key)) a.warnings.push_back(ctx + ": '" + key + "' has no effect here");
  read_columns(entry, a, ctx);
  read_tags(entry, a, ctx);
  return a;
}

// A v1 dataset YAML entry as the attributes the converters read.
DatasetAttr v1_attr(const V1DatasetEntry& e) {
  DatasetAttr a;
  a.name = e.name;
  a.file_name = e.path;
  a.v1 = true;
  a.size = e.size;
  a.tools = "tools";  // rows with tool definitions are refused, not trained without them
  if (e.converter == "alpaca") {
    a.formatting = Formatting::Alpaca;
    a.system = "system";
  } else if (e.converter == "sharegpt") {
    a.formatting = Formatting::Sharegpt;
  } else if (e.converter == "pair") {
    a.formatting = Formatting::V1Pair;
    a.ranking = true;
  } else {
    a.formatting = Formatting::V1Messages;  // rows say whether they hold pairs
  }
  a.entry_json = json{{"llamafactory_v1", {{"path", e.path}, {"converter", e.converter},
                                            {"size", e.size ? json(*e.size) : json()}}}}
                     .dump();
  return a;
}

// The folder beside a v1 dataset file (or data path): where its tokenized cache goes.
std::string beside(const std::string& path) {
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  return (dir / ".studio_cache").string();
}

}  // namespace

DatasetInfo DatasetInfo::for_config(const RunConfig& cfg) {
  if (!cfg.is_v1()) {
    DatasetInfo info = read(cfg.dataset_dir);
    info.train_ = cfg.dataset;
    info.eval_ = cfg.eval_dataset;
    info.data_dir_ = cfg.dataset_dir;
    info.cache_dir_ = (std::filesystem::path(cfg.dataset_dir) / ".studio_cache").string();
    return info;
  }
  DatasetInfo info;
  auto add = [&](const std::string& key, const std::string& value, std::vector<std::string>& into) {
    const V1DatasetList list = read_v1_datasets(value, "", true);
    std::string errors = list.error.empty() ? "" : key + ": " + list.error + "\n";
    for (const Diagnostic& d : list.problems)
      if (d.severity == Severity::Error) errors += d.format() + "\n";
    if (!errors.empty()) throw DatasetError(errors.substr(0, errors.size() - 1));
    if (info.file_.empty()) {
      info.file_ = list.yaml.empty() ? value : list.yaml;
      info.cache_dir_ = beside(info.file_);
    }
    for (const V1DatasetEntry& e : list.entries) {
      DatasetAttr a = v1_attr(e);
      auto [it, fresh] = info.v1_.emplace(e.name, a);
      if (!fresh && it->second.entry_json != a.entry_json)
        throw DatasetError("dataset '" + e.name + "' is named in train_dataset and eval_dataset "
                           "with different settings: rename one of them");
      into.push_back(e.name);
    }
  };
  add("train_dataset", cfg.v1.train_dataset, info.train_);
  if (cfg.v1.eval_dataset && cfg.evaluates()) add("eval_dataset", *cfg.v1.eval_dataset, info.eval_);
  return info;
}

std::string DatasetAttr::describe_column(const std::string& role) const {
  auto it = columns.find(role);
  if (it != columns.end()) return "columns mapping: " + role + " -> " + it->second;
  const std::map<std::string, const std::string*> defaults = {
      {"prompt", &prompt},   {"query", &query},     {"response", &response},
      {"history", &history}, {"messages", &messages}, {"system", &system},
      {"tools", &tools},     {"chosen", &chosen},   {"rejected", &rejected},
      {"kto_tag", &kto_tag}};
  auto d = defaults.find(role);
  const std::string column = d == defaults.end() ? role : *d->second;
  return "columns mapping: " + role + " -> " + column + " (default)";
}

DatasetInfo DatasetInfo::read(const std::string& dataset_dir) {
  DatasetInfo info;
  info.file_ = (std::filesystem::path(dataset_dir) / "dataset_info.json").string();
  json doc;
  std::string error;
  if (!read_json_file(info.file_, doc, error))
    throw DatasetError(error + " (dataset_dir '" + dataset_dir + "' must hold dataset_info.json)");
  if (!doc.is_object()) throw DatasetError(info.file_ + ": must be a JSON object of datasets");
  for (const auto& [name, entry] : doc.items()) info.entries_.emplace(name, entry.dump());
  return info;
}

DatasetAttr DatasetInfo::find(const std::string& name) const {
  if (auto v1 = v1_.find(name); v1 != v1_.end()) return v1->second;
  auto it = entries_.find(name);
  if (it != entries_.end()) return parse_entry(name, json::parse(it->second), file_);
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  throw DatasetError("dataset '" + name + "' is not in " + file_ + " (it has: " +
                     (known.empty() ? "none" : known) + ")");
}

std::vector<std::string> DatasetInfo::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  for (const auto& [name, attr] : v1_) out.push_back(name);
  return out;
}

}  // namespace studio::data
