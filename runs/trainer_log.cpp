// LLaMA-Factory's trainer_log.jsonl, read as the studio's step and eval events, with the same
// tolerance as events.jsonl (event_fields.h).
#include "event_fields.h"
#include "studio/runs/events.h"

namespace studio {

using namespace event_fields;

namespace {

// A field in GiB (LLaMA-Factory's vram_*) as MiB.
void get_gib_as_mib(const Fields& f, const char* key, double& out) {
  double gib = kNoValue;
  f.get(key, gib);
  if (!std::isnan(gib)) out = gib * 1024.0;
}

// A step with DPO metrics: one of them has a value, or was written as a non-finite one.
bool dpo_seen(const DpoMetrics& dpo, const StepEvent& step) {
  constexpr std::uint32_t kDpoBits =
      static_cast<std::uint32_t>(StepValue::RewardsChosen) |
      static_cast<std::uint32_t>(StepValue::RewardsRejected) |
      static_cast<std::uint32_t>(StepValue::RewardsAccuracies) |
      static_cast<std::uint32_t>(StepValue::RewardsMargins) |
      static_cast<std::uint32_t>(StepValue::LogpsChosen) |
      static_cast<std::uint32_t>(StepValue::LogpsRejected) |
      static_cast<std::uint32_t>(StepValue::Kl);
  return !std::isnan(dpo.rewards_chosen) || !std::isnan(dpo.rewards_rejected) ||
         !std::isnan(dpo.rewards_accuracies) || !std::isnan(dpo.rewards_margins) ||
         !std::isnan(dpo.logps_chosen) || !std::isnan(dpo.logps_rejected) ||
         !std::isnan(dpo.kl) ||
         (step.not_finite & kDpoBits) != 0;
}

}  // namespace

bool parse_trainer_log_line(std::string_view line, std::vector<Event>& out, std::string& error) {
  json j;
  if (!parse_json_line(line, j, error)) return false;
  if (!j.is_object()) {
    error = std::string("not a JSON object but ") + j.type_name();
    return false;
  }
  Issues issues;
  StepEvent step;
  double eval_loss = kNoValue;
  try {
    Fields f(j, "", &issues);
    f.get_required("current_steps", step.step);
    f.get("total_steps", step.total_steps);
    f.get("loss", step.loss, step, StepValue::Loss);
    f.get("lr", step.lr, step, StepValue::Lr);
    f.get("grad_norm", step.grad_norm, step, StepValue::GradNorm);
    f.get("epoch", step.epoch);
    f.get("throughput", step.tokens_per_sec, step, StepValue::TokensPerSec);
    f.get_duration("elapsed_time", step.elapsed);
    f.get("eval_loss", eval_loss);
    DpoMetrics dpo;
    f.get("reward", dpo.rewards_chosen, step, StepValue::RewardsChosen);
    f.get("accuracy", dpo.rewards_accuracies, step, StepValue::RewardsAccuracies);
    if (dpo_seen(dpo, step)) step.dpo = dpo;
    GpuMemory gpu;
    gpu.rank = 0;
    gpu.device = 0;
    get_gib_as_mib(f, "vram_allocated", gpu.allocated_mib);
    get_gib_as_mib(f, "vram_reserved", gpu.reserved_mib);
    if (!std::isnan(gpu.allocated_mib) || !std::isnan(gpu.reserved_mib)) step.gpus.push_back(gpu);
  } catch (const EventFormatError& e) {
    error = std::string("trainer_log line: ") + e.what();
    return false;
  }
  // A training log has a loss or a learning rate; the summary after training has neither (and
  // would otherwise replace the last step's point with an empty one).
  const bool train = j.contains("loss") || j.contains("lr");
  const std::int64_t at = step.step;
  if (train) {
    Event e;
    e.kind = EventKind::Step;
    e.raw = j;  // the line as LLaMA-Factory wrote it, named
    e.raw["event"] = "step";
    e.payload = std::move(step);
    e.issues = std::move(issues);
    out.push_back(std::move(e));
  }
  if (j.contains("eval_loss")) {
    Event e;
    e.kind = EventKind::Eval;
    EvalEvent eval{at, eval_loss};
    e.raw = j;
    e.raw["event"] = "eval";
    e.payload = eval;
    if (!train) e.issues = std::move(issues);
    out.push_back(std::move(e));
  }
  return true;
}

bool parse_trainer_state(std::string_view text, std::vector<Event>& out, std::string& error,
                         ReadProblems& problems) {
  json doc;
  JsonSyntaxError syntax;
  if (!parse_json_text(text, doc, syntax)) {
    error = "not valid JSON (a trainer_state.json being written, or damaged): " + syntax.describe();
    return false;
  }
  if (!doc.is_object()) {
    error = std::string("not a JSON object but ") + doc.type_name();
    return false;
  }
  const auto history = doc.find("log_history");
  if (history == doc.end() || !history->is_array()) {
    error = "no log_history array: not a Hugging Face Trainer state";
    return false;
  }
  std::int64_t total_steps = 0;
  if (const auto max = doc.find("max_steps"); max != doc.end() && max->is_number_integer())
    total_steps = max->get<std::int64_t>();
  std::uint64_t index = 0;
  for (const json& entry : *history) {
    ++index;
    const std::string where = "log_history[" + std::to_string(index - 1) + "]";
    if (!entry.is_object()) {
      problems.count_bad_line(index, where + ": not a JSON object but " + entry.type_name());
      continue;
    }
    Issues issues;
    StepEvent step;
    double eval_loss = kNoValue;
    try {
      Fields f(entry, "", &issues);
      f.get_required("step", step.step);
      f.get("loss", step.loss, step, StepValue::Loss);
      f.get("learning_rate", step.lr, step, StepValue::Lr);
      f.get("grad_norm", step.grad_norm, step, StepValue::GradNorm);
      f.get("epoch", step.epoch);
      f.get("eval_loss", eval_loss);
      DpoMetrics dpo;
      f.get("rewards/chosen", dpo.rewards_chosen, step, StepValue::RewardsChosen);
      f.get("rewards/rejected", dpo.rewards_rejected, step, StepValue::RewardsRejected);
      f.get("rewards/accuracies", dpo.rewards_accuracies, step, StepValue::RewardsAccuracies);
      f.get("rewards/margins", dpo.rewards_margins, step, StepValue::RewardsMargins);
      f.get("logps/chosen", dpo.logps_chosen, step, StepValue::LogpsChosen);
      f.get("logps/rejected", dpo.logps_rejected, step, StepValue::LogpsRejected);
      f.get("kl", dpo.kl, step, StepValue::Kl);  // KTOTrainer's
      if (dpo_seen(dpo, step)) step.dpo = dpo;
    } catch (const EventFormatError& e) {
      problems.count_bad_line(index, where + ": " + e.what());
      continue;
    }
    step.total_steps = total_steps;
    problems.count_issues(index, issues);
    // The closing summary (train_loss, train_runtime) has neither a loss nor a rate.
    const bool train = entry.contains("loss") || entry.contains("learning_rate");
    if (train) {
      Event e;
      e.kind = EventKind::Step;
      e.raw = entry;
      e.raw["event"] = "step";
      e.line = index;
      e.payload = step;
      e.issues = issues;
      out.push_back(std::move(e));
    }
    if (entry.contains("eval_loss")) {
      Event e;
      e.kind = EventKind::Eval;
      e.raw = entry;
      e.raw["event"] = "eval";
      e.line = index;
      e.payload = EvalEvent{step.step, eval_loss};
      if (!train) e.issues = std::move(issues);
      out.push_back(std::move(e));
    }
  }
  return true;
}

}  // namespace studio
