#include "studio/config/run_config.h"

#include <cctype>

#include <yaml-cpp/yaml.h>

#include "enum_names.h"
#include "studio/model_facts/model_info.h"

namespace studio {
namespace detail {
// LLaMA-Factory accepts these values; they would change what the run means, so they are errors.
const std::vector<std::string_view>& EnumInfo<Stage>::refused() {
  static const std::vector<std::string_view> v = {"ppo"};
  return v;
}
const std::vector<std::string_view>& EnumInfo<FinetuningType>::refused() {
  static const std::vector<std::string_view> v = {"oft"};
  return v;
}
const std::vector<std::string_view>& EnumInfo<PrefLoss>::refused() {
  static const std::vector<std::string_view> v = {"bco_pair", "sppo_hard", "nca_pair"};
  return v;
}
#define STUDIO_NOTHING_REFUSED(E)                                      \
  const std::vector<std::string_view>& EnumInfo<E>::refused() {        \
    static const std::vector<std::string_view> v;                      \
    return v;                                                          \
  }
STUDIO_NOTHING_REFUSED(LrScheduler)
STUDIO_NOTHING_REFUSED(FlashAttn)
STUDIO_NOTHING_REFUSED(EvalStrategy)
STUDIO_NOTHING_REFUSED(SpMode)
STUDIO_NOTHING_REFUSED(Batching)
#undef STUDIO_NOTHING_REFUSED
}  // namespace detail

std::string_view to_string(Stage v) { return detail::enum_name(v); }
std::string_view to_string(FinetuningType v) { return detail::enum_name(v); }
std::string_view to_string(LrScheduler v) { return detail::enum_name(v); }
std::string_view to_string(FlashAttn v) { return detail::enum_name(v); }
std::string_view to_string(PrefLoss v) { return detail::enum_name(v); }
std::string_view to_string(EvalStrategy v) { return detail::enum_name(v); }
std::string_view to_string(SpMode v) { return detail::enum_name(v); }
std::string_view to_string(Batching v) { return detail::enum_name(v); }


const std::vector<std::string>& known_templates() {
  // studio_data's template table (data/template/templates.cpp), in its order; tst_chat_template
  // checks the two agree (this layer cannot depend on that one).
  static const std::vector<std::string> names = {
      "qwen",   "qwen3",   "qwen3_nothink", "llama3",     "mistral",   "default",
      "alpaca", "empty",   "llama2",        "chatml",     "gemma",     "gemma2",
      "gemma3", "phi",     "phi4",          "glm4",       "deepseek3", "deepseekr1",
      "qwen3_5", "mistral_small", "ministral", "vicuna",  "yi", "qwen3_5_nothink", "qwen3_6"};
  return names;
}

std::vector<std::string> report_to_targets(const RunConfig& c, std::string* error) {
  std::vector<std::string> out;
  if (!c.report_to) return out;
  auto add = [&](std::string name) {
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name != "none" && !name.empty()) out.push_back(name);
  };
  try {
    const YAML::Node n = YAML::Load(c.report_to->text);
    if (n.IsScalar()) {
      add(n.as<std::string>());
    } else if (n.IsSequence()) {
      for (const auto& item : n) {
        if (!item.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "not a name");
        add(item.as<std::string>());
      }
    } else if (!n.IsNull()) {
      throw YAML::Exception(YAML::Mark::null_mark(), "not a name");
    }
  } catch (const YAML::Exception&) {
    if (error) *error = "expected a name or a list of names (tensorboard, none, all), got " +
                        c.report_to->text;
    out.clear();
  }
  return out;
}

bool reports_to_tensorboard(const RunConfig& c) {
  for (const std::string& t : report_to_targets(c))
    if (t == "tensorboard" || t == "all") return true;
  return false;
}

double moe_aux_coefficient(const RunConfig& c, const ModelInfo& m) {
  // LLaMA-Factory's DPO, reward-model and KTO trainers run the forward without labels, so
  // transformers adds no auxiliary loss there: neither does studio-train.
  if (!m.is_moe() || c.pairwise() || c.stage == Stage::Kto) return 0;
  if (c.moe_aux_loss_coef && *c.moe_aux_loss_coef > 0) return *c.moe_aux_loss_coef;
  return m.output_router_logits ? m.router_aux_loss_coef : 0;
}

double stop_grace_seconds(const RunConfig& c, double base) {
  return base + (c.save_on_stop ? static_cast<double>(c.ddp_timeout) : 0.0);
}

}  // namespace studio
