// LLaMA-Factory's trainer_log.jsonl, read as the studio's step and eval events, with the same
// tolerance as events.jsonl (event_fields.h).
#include "event_fields.h"
#include "studio/config/events.h"

namespace studio {

using namespace event_fields;

namespace {

// A field in GiB (LLaMA-Factory's vram_*) as MiB.
void get_gib_as_mib(const Fields& f, const char* key, double& out) {
  double gib = kNoValue;
  f.get(key, gib);
  if (!std::isnan(gib)) out = gib * 1024.0;
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
    f.get("loss", step.loss);
    f.get("lr", step.lr);
    f.get("epoch", step.epoch);
    f.get("throughput", step.tokens_per_sec);
    f.get_duration("elapsed_time", step.elapsed);
    f.get("eval_loss", eval_loss);
    DpoMetrics dpo;
    f.get("reward", dpo.rewards_chosen);
    f.get("accuracy", dpo.rewards_accuracies);
    if (!std::isnan(dpo.rewards_chosen) || !std::isnan(dpo.rewards_accuracies)) step.dpo = dpo;
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

}  // namespace studio
