// What a LLaMA-Factory v1 file leaves to its command, its model and its world: the dataset YAML,
// the stage, the chat template, gradient accumulation and DeepSpeed's precision; and the checks
// validate runs on them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checker.h"
#include "yaml_load.h"
#include "studio/config/config_schema.h"
#include "studio/base/json_file.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/model_facts/model_info.h"

namespace fs = std::filesystem;

namespace studio {
namespace {

fs::path under(const std::string& base_dir, const std::string& p) {
  const fs::path path(p);
  return path.is_absolute() || base_dir.empty() ? path : fs::path(base_dir) / path;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// One entry of a dataset YAML, checked as v1's data engine and loader plugin would use it.
class DatasetYamlReader {
 public:
  DatasetYamlReader(V1DatasetList& out, const std::string& base_dir, bool for_training)
      : out_(out), base_dir_(base_dir), for_training_(for_training) {}

  void read_entry(const YAML::Node& name, const YAML::Node& body) {
    V1DatasetEntry e;
    e.name = name.Scalar();
    e.pos[""] = yaml_pos(name);
    if (!body.IsMap())
      return problem(Severity::Error, yaml_pos(name), e.name,
                     "expected {path, source, converter, ...}");
    for (const auto& kv : body) {
      const std::string field = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      e.pos[field] = v.IsNull() ? yaml_pos(kv.first) : yaml_pos(v);
      const std::string where = e.name + "." + field;
      auto text = [&](std::string& into) {
        if (!v.IsScalar()) return problem(Severity::Error, e.pos[field], where, "expected text");
        into = v.Scalar();
      };
      if (field == "path") {
        text(e.path);
      } else if (field == "source") {
        text(e.source);
      } else if (field == "split") {
        text(e.split);
      } else if (field == "converter") {
        if (!v.IsNull()) text(e.converter);
      } else if (field == "size") {
        int64_t n = 0;
        if (v.IsNull()) continue;
        if (std::string err = yaml_whole(v, n); !err.empty())
          problem(Severity::Error, e.pos[field], where, err);
        else if (n < 1)
          problem(Severity::Error, e.pos[field], where, "expected a whole number of samples, >= 1");
        else
          e.size = n;
      } else if (field == "weight") {
        if (!v.IsNull())
          problem(Severity::Error, e.pos[field], where,
                  "resampling a dataset by weight is not implemented (v1 draws rows at random "
                  "with replacement); remove it, or cap the dataset with size");
      } else if (field == "streaming") {
        bool on = false;
        if (!v.IsNull() && yaml_bool(v, on) && on)
          problem(Severity::Warning, e.pos[field], where,
                  "no effect: studio-train reads and tokenizes the files ahead of training (and "
                  "caches them)");
      } else {
        problem(Severity::Warning, e.pos[field], where,
                "not a field of a v1 dataset entry (path, source, split, converter, size, "
                "weight, streaming); not used");
      }
    }
    check(e);
    out_.entries.push_back(std::move(e));
  }

  void check(const V1DatasetEntry& e) {
    auto at = [&](const std::string& field) {
      auto it = e.pos.find(field);
      return it == e.pos.end() ? e.pos.at("") : it->second;
    };
    if (e.path.empty())
      return problem(Severity::Error, at("path"), e.name + ".path", "required: the data file");
    if (e.converter != "" && e.converter != "alpaca" && e.converter != "sharegpt" &&
        e.converter != "pair")
      problem(Severity::Error, at("converter"), e.name + ".converter",
              "'" + e.converter + "' is not a v1 converter", "alpaca | sharegpt | pair");
    std::error_code ec;
    const fs::path local = under(base_dir_, e.path);
    if (e.source == "hf_hub" || e.source == "ms_hub") {
      std::string msg = e.source +
                        " datasets are downloaded by LLaMA-Factory, never by "
                        "studio-train: save the rows as a JSON or JSON-lines file, then give its "
                        "path with source: local";
      if (fs::exists(local, ec)) msg += " (" + local.string() + " is here: add source: local)";
      return problem(Severity::Error, at("source"), e.name + ".source", msg);
    }
    if (e.source != "local")
      return problem(Severity::Error, at("source"), e.name + ".source",
                     "'" + e.source + "' is not a source", "hf_hub | ms_hub | local");
    if (e.split != "train")
      problem(Severity::Error, at("split"), e.name + ".split",
              "a local file has one split, train (the Hugging Face datasets loader names it so)");
    if (!fs::exists(local, ec)) {
      problem(for_training_ ? Severity::Error : Severity::Warning, at("path"), e.name + ".path",
              "no such file or folder: " + local.string() +
                  " (v1 reads paths relative to the working directory)");
      return;
    }
    const std::string ext = fs::is_directory(local, ec) ? "" : local.extension().string();
    if (!ext.empty() && ext != ".json" && ext != ".jsonl")
      problem(Severity::Error, at("path"), e.name + ".path",
              ext + " files are not read: studio-train reads JSON and JSON lines");
  }

  void problem(Severity sev, SourcePos p, std::string key, std::string msg,
               std::string allowed = {}) {
    out_.problems.push_back(
        {sev, out_.yaml, p.line, p.column, std::move(key), std::move(msg), std::move(allowed)});
  }

 private:
  V1DatasetList& out_;
  const std::string& base_dir_;
  bool for_training_;
};

// The chat-template text a model folder carries: tokenizer_config.json's chat_template (a string,
// or a list of named ones of which "default" is used), else chat_template.jinja.
std::optional<std::string> chat_template_text(const fs::path& dir) {
  nlohmann::json tc;
  std::string error;
  std::error_code ec;
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec) &&
      read_json_file((dir / "tokenizer_config.json").string(), tc, error) && tc.is_object() &&
      tc.contains("chat_template")) {
    const auto& t = tc["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array())
      for (const auto& named : t)
        if (named.is_object() && named.value("name", "") == "default" &&
            named.contains("template") && named["template"].is_string())
          return named["template"].get<std::string>();
  }
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  return std::nullopt;
}

// A model family's chat template that a named template renders alike: the same text for system,
// user and assistant turns and the same tokens learned (v1 learns what follows the generation
// prompt, enable_thinking off). Told apart by config.json's model_type and strings its Jinja
// source must (and must not) hold; docs/LLAMAFACTORY.md says how each was compared.
struct FamilyTemplate {
  std::string_view name;    // studio-train's template
  std::string_view family;  // for messages
  std::vector<std::string_view> model_types;
  std::vector<std::string_view> has;
  std::vector<std::string_view> lacks;
};

const std::vector<FamilyTemplate>& family_templates() {
  static const std::vector<FamilyTemplate> all = {
      // An empty thought block closes the generation prompt when enable_thinking is off, so the
      // block is prompt, not answer, as qwen3 renders with enable_thinking false.
      {"qwen3",
       "Qwen3 (thinking switch)",
       {"qwen3", "qwen3_moe"},
       {"<|im_start|>", "enable_thinking", "<think>\\n\\n</think>\\n\\n"},
       {}},
      {"qwen3_nothink",
       "Qwen3 Instruct-2507",
       {"qwen3", "qwen3_moe"},
       {"<|im_start|>"},
       {"<think>"}},
      {"qwen",
       "Qwen2.5",
       {"qwen2"},
       {"<|im_start|>", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
       {"<think>"}},
  };
  return all;
}

bool holds(const std::string& text, std::string_view s) {
  return text.find(s) != std::string::npos;
}

std::string model_type_of(const fs::path& dir) {
  std::string error;
  auto info = read_model_info(dir.string(), error);
  return info ? info->model_type : std::string();
}

}  // namespace

V1DatasetList read_v1_datasets(const std::string& value, const std::string& base_dir,
                               bool for_training) {
  V1DatasetList out;
  std::error_code ec;
  const fs::path local = under(base_dir, value);
  if (ends_with(value, ".yaml") || ends_with(value, ".yml")) {
    if (!fs::is_regular_file(local, ec)) {
      out.error = "'" + value + "' is not a file here (" + local.string() +
                  "); LLaMA-Factory v1 "
                  "would download it from the Hugging Face hub (REPO/FILE.yaml), studio-train "
                  "downloads nothing: fetch it and give its local path";
      return out;
    }
    out.yaml = local.string();
    YAML::Node root;
    try {
      root = detail::load_yaml_file(out.yaml);
    } catch (const YAML::ParserException& e) {
      out.problems.push_back({Severity::Error, out.yaml, e.mark.line + 1, e.mark.column + 1, "",
                              detail::yaml_error_message(e), {}});
      return out;
    } catch (const YAML::Exception& e) {
      out.problems.push_back({Severity::Error, out.yaml, 1, 1, "", e.what(), {}});
      return out;
    }
    if (!root.IsMap() || root.size() == 0) {
      out.problems.push_back({Severity::Error,
                              out.yaml,
                              1,
                              1,
                              "",
                              "a v1 dataset file maps names to {path, source, converter, ...}",
                              {}});
      return out;
    }
    DatasetYamlReader reader(out, base_dir, for_training);
    for (const auto& kv : root) reader.read_entry(kv.first, kv.second);
    return out;
  }
  if (fs::exists(local, ec)) {  // v1: {"default": {"path": value, "source": "local"}}
    V1DatasetEntry e;
    e.name = "default";
    e.path = value;
    e.source = "local";
    out.entries.push_back(e);
    return out;
  }
  out.error = "'" + value + "' is neither a dataset YAML nor a file or folder here (" +
              local.string() +
              "): LLaMA-Factory v1 would load it as a Hugging Face dataset id, "
              "studio-train downloads nothing: save the rows as a JSON-lines file and name it "
              "(or a dataset YAML listing it)";
  return out;
}

namespace {

// One dataset value (train_dataset or eval_dataset) relocated; `role` names the rewritten YAML.
void relocate_one(std::string& value, const std::string& role, const std::string& base_dir,
                  const std::function<std::string(const std::string&)>& place,
                  const std::function<std::string(const std::string&, const std::string&)>& write) {
  std::error_code ec;
  const fs::path local = under(base_dir, value);
  const bool yaml = ends_with(value, ".yaml") || ends_with(value, ".yml");
  if (!fs::exists(local, ec)) return;  // a hub id, or a file only the target has
  const std::string absolute = fs::absolute(local, ec).lexically_normal().string();
  if (!yaml) {
    value = place(absolute);
    return;
  }
  YAML::Node root;
  try {
    root = detail::load_yaml_file(absolute);
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument(absolute + ":" + std::to_string(e.mark.line + 1) + ": " +
                                detail::yaml_error_message(e));
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(absolute + ": " + e.what());
  }
  if (!root.IsMap())
    throw std::invalid_argument(absolute + ": a v1 dataset file maps names to {path, source, ...}");
  for (auto kv : root) {
    YAML::Node entry = kv.second;
    if (!entry.IsMap() || !entry["path"] || !entry["path"].IsScalar()) continue;
    const std::string source = entry["source"] && entry["source"].IsScalar()
                                   ? entry["source"].Scalar()
                                   : std::string("hf_hub");
    if (source != "local") continue;
    const fs::path data = under(base_dir, entry["path"].Scalar());
    if (!fs::exists(data, ec)) continue;  // validation names it at its line
    entry["path"] = place(fs::absolute(data, ec).lexically_normal().string());
  }
  YAML::Emitter out;
  out << root;
  value = write(role + ".yaml", "# " + absolute + ", with its local paths relocated\n" +
                                    std::string(out.c_str()) + "\n");
}

}  // namespace

void relocate_v1_datasets(
    RunConfig& cfg, const std::string& base_dir,
    const std::function<std::string(const std::string&)>& place,
    const std::function<std::string(const std::string&, const std::string&)>& write_yaml) {
  if (!cfg.is_v1()) return;
  if (!cfg.v1.train_dataset.empty())
    relocate_one(cfg.v1.train_dataset, "train_dataset", base_dir, place, write_yaml);
  if (cfg.v1.eval_dataset && !cfg.v1.eval_dataset->empty())
    relocate_one(*cfg.v1.eval_dataset, "eval_dataset", base_dir, place, write_yaml);
}

TemplateChoice template_for_model(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const std::optional<std::string> jinja = chat_template_text(dir);
  if (!jinja)
    return {"chatml",
            "the tokenizer has no chat template, so LLaMA-Factory v1 renders with its "
            "ChatML fallback, which template chatml renders alike"};
  const std::string type = model_type_of(dir);
  for (const auto& f : family_templates()) {
    if (std::find(f.model_types.begin(), f.model_types.end(), type) == f.model_types.end())
      continue;
    const bool all = std::all_of(f.has.begin(), f.has.end(),
                                 [&](std::string_view s) { return holds(*jinja, s); });
    const bool none = std::none_of(f.lacks.begin(), f.lacks.end(),
                                   [&](std::string_view s) { return holds(*jinja, s); });
    if (all && none)
      return {std::string(f.name), "the model's chat template is " + std::string(f.family) +
                                       "'s (model_type " + type + "), which template " +
                                       std::string(f.name) + " renders alike"};
  }
  std::string known;
  for (const auto& f : family_templates())
    known += (known.empty() ? "" : ", ") + std::string(f.family);
  return {"", "the model's chat template (model_type " + (type.empty() ? "unknown" : type) +
                  ") is not one a named template is known to render alike (" + known +
                  ", and ChatML for a tokenizer without one)"};
}

void resolve_llamafactory_v1(RunConfig& cfg, const ValidateOptions& opt) {
  if (!cfg.is_v1()) return;
  // The stage v1 takes from its command: preference datasets ask for dpo.
  if (!cfg.source.has("stage") && cfg.stage == Stage::Sft && !cfg.v1.train_dataset.empty()) {
    const V1DatasetList list = read_v1_datasets(cfg.v1.train_dataset, opt.base_dir, false);
    const bool pairs = !list.entries.empty() &&
                       std::all_of(list.entries.begin(), list.entries.end(),
                                   [](const V1DatasetEntry& e) { return e.converter == "pair"; });
    if (pairs) cfg.stage = Stage::Dpo;
  }
  if (cfg.template_name.empty()) {
    std::string error;
    const std::string cache = cfg.cache_dir ? under(opt.base_dir, *cfg.cache_dir).string() : "";
    if (auto dir = resolve_model_dir(cfg.model_name_or_path, opt.base_dir, cfg.model_revision,
                                     cache, error))
      cfg.template_name = template_for_model(*dir).name;
  }
  if (const int world = opt.world_size(); world > 0 && cfg.v1.global_batch_size &&
                                          cfg.sequence_parallel_size >= 1 &&
                                          world % cfg.sequence_parallel_size == 0) {
    const int64_t per_step = world / cfg.sequence_parallel_size * cfg.per_device_train_batch_size;
    if (per_step > 0 && *cfg.v1.global_batch_size % per_step == 0)
      cfg.gradient_accumulation_steps = *cfg.v1.global_batch_size / per_step;
  }
  // v1 with DeepSpeed: the JSON's bf16.enabled decides; left "auto" (or out) it is bf16.
  if (cfg.deepspeed) {
    std::string error;
    if (auto ds = read_deepspeed_json(under(opt.base_dir, *cfg.deepspeed).string(), error)) {
      auto fixed = [&](const char* k) -> std::optional<bool> {
        auto it = ds->fixed.find(k);
        return it == ds->fixed.end() ? std::nullopt : std::optional<bool>(it->second != 0);
      };
      const auto bf16 = fixed("bf16.enabled");
      const auto fp16 = fixed("fp16.enabled");
      cfg.bf16 = bf16 ? *bf16 : !(fp16 && !*fp16);
    }
  }
}

namespace detail {

void check_llamafactory_v1(const RunConfig& c, Checker& ck) {
  bool pair = false, conversation = false;
  auto read = [&](const std::string& key, const std::string& value) {
    const V1DatasetList list = read_v1_datasets(value, ck.base_dir(), ck.for_training());
    if (!list.error.empty()) ck.error(key, list.error);
    for (const auto& d : list.problems) ck.add_at(d);
    for (const auto& e : list.entries) {
      const bool pairs = e.converter == "pair";
      if (key == "train_dataset") (pairs ? pair : conversation) |= !e.converter.empty();
      const bool wrong = e.converter.empty() ? false : (c.stage == Stage::Dpo) != pairs;
      if (!wrong || list.yaml.empty()) continue;
      const SourcePos p = e.pos.count("converter") ? e.pos.at("converter") : e.pos.at("");
      ck.add_at({Severity::Error,
                 list.yaml,
                 p.line,
                 p.column,
                 e.name + ".converter",
                 pairs ? "pair gives preference pairs; this run's stage is sft (write stage: dpo "
                         "in the config for DPO, as llamafactory-cli dpo would run it)"
                       : e.converter + " gives conversations; stage dpo needs preference pairs "
                                       "(converter: pair)",
                 {}});
    }
  };
  if (!c.v1.train_dataset.empty()) read("train_dataset", c.v1.train_dataset);
  if (c.v1.eval_dataset) {
    read("eval_dataset", *c.v1.eval_dataset);
    if (!c.evaluates())
      ck.warn("eval_dataset",
              "LLaMA-Factory v1 reads it but does not evaluate; studio-train "
              "evaluates on it with eval_strategy: steps or epoch (its own key)");
  }
  if (!ck.given("stage") && c.stage == Stage::Dpo && pair && !conversation &&
      std::none_of(c.v1.written.begin(), c.v1.written.end(), [](const auto& w) {
        return w.key.rfind("pref_", 0) == 0 || w.key == "dpo_label_smoothing" ||
               w.key == "simpo_gamma" || w.key == "ld_alpha";
      }))
    ck.note("train_dataset",
            "stage dpo: the datasets are preference pairs (converter: pair); "
            "LLaMA-Factory v1 takes the stage from its command (llamafactory-cli "
            "dpo); write `stage: dpo` to say so in the file");

  if (!ck.given("template")) {
    std::string missing;
    const std::string dir = ck.model_dir(c.model_name_or_path, missing);
    if (!dir.empty()) {
      const TemplateChoice t = template_for_model(dir);
      if (t.name.empty())
        ck.error("model_name_or_path",
                 "which chat template to train with: " + t.why +
                     "; give `template:` "
                     "(studio-train's own key) the named template that renders like it "
                     "(docs/templates.md)",
                 find_field("template")->allowed);
      else
        ck.note("model_name_or_path", "chat template " + t.name + ": " + t.why);
    }
  }

  const int world = ck.world_size();
  const int64_t sp = c.sequence_parallel_size;
  if (world <= 0 || sp < 1 || world % sp != 0) return;  // the SP check says why
  const int64_t dp = world / sp;
  for (const auto& x : c.extra_keys) {
    int64_t n = 0;
    if (x.key == "dp_size" && yaml_whole(YAML::Load(x.value.text), n).empty() && n != dp)
      ck.error("dp_size",
               std::to_string(n) + " data-parallel ranks, but the world of " +
                   std::to_string(world) + " with cp_size " + std::to_string(sp) + " has " +
                   std::to_string(dp),
               std::to_string(dp));
  }
  if (!c.v1.global_batch_size) return;
  const int64_t global = *c.v1.global_batch_size;
  const int64_t per_step = dp * c.per_device_train_batch_size;
  if (per_step < 1) return;
  const std::string parts = std::to_string(dp) + " data-parallel ranks (world " +
                            std::to_string(world) + " / cp_size " + std::to_string(sp) +
                            ") x micro_batch_size " + std::to_string(c.per_device_train_batch_size);
  if (global % per_step != 0)
    ck.error("global_batch_size",
             std::to_string(global) + " is not a multiple of " + parts + " = " +
                 std::to_string(per_step),
             "multiples of " + std::to_string(per_step));
  else
    ck.note("global_batch_size", "gradient_accumulation_steps " +
                                     std::to_string(global / per_step) + " = " +
                                     std::to_string(global) + " / (" + parts + ")");
}

}  // namespace detail
}  // namespace studio
