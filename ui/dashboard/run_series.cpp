#include "studio/ui/dashboard/run_series.h"

#include <algorithm>
#include <cmath>

#include "studio/ui/dashboard/ema_smoother.h"

namespace studio::ui {

namespace {

std::size_t index(Metric metric) { return static_cast<std::size_t>(metric); }

// Index of the first element >= key in an ascending vector.
std::size_t lowerBound(const std::vector<double>& sorted, double key) {
  return static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), key) -
                                  sorted.begin());
}

const std::vector<double>& byMode(XAxisMode mode, const std::vector<double>& steps,
                                  const std::vector<double>& relative,
                                  const std::vector<double>& wall) {
  switch (mode) {
    case XAxisMode::RelativeTime: return relative;
    case XAxisMode::WallTime: return wall;
    case XAxisMode::Step: break;
  }
  return steps;
}

}  // namespace

RunSeries::RunSeries() { clear(); }

void RunSeries::ingest(const std::vector<Event>& events) {
  for (const Event& event : events) {
    if (const auto* step = event.get<StepEvent>())
      addStep(*step);
    else if (const auto* eval = event.get<EvalEvent>())
      addEval(*eval);
    else if (const auto* start = event.get<StartEvent>())
      addStart(*start);
    else if (const auto* end = event.get<EndEvent>())
      addEnd(*end);
  }
}

void RunSeries::clear() {
  steps_.clear();
  wall_.clear();
  relative_.clear();
  for (auto& column : metrics_) column.clear();
  gpus_.clear();
  evalSteps_.clear();
  evalWall_.clear();
  evalRelative_.clear();
  evalLoss_.clear();
  facts_ = RunFacts{};
  origin_ = kNoValue;
  changes_ = SeriesChanges{};
  changes_.facts = true;
}

const std::vector<double>& RunSeries::x(XAxisMode mode) const {
  return byMode(mode, steps_, relative_, wall_);
}

const std::vector<double>& RunSeries::values(Metric metric) const {
  return metrics_[index(metric)];
}

const std::vector<double>& RunSeries::evalX(XAxisMode mode) const {
  return byMode(mode, evalSteps_, evalRelative_, evalWall_);
}

bool RunSeries::isDpo() const {
  return facts_.stage == "dpo" || has(Metric::RewardsChosen) || has(Metric::RewardsRejected) ||
         has(Metric::RewardsMargins) || has(Metric::RewardsAccuracies);
}

SeriesChanges RunSeries::takeChanges() {
  const SeriesChanges taken = changes_;
  changes_ = SeriesChanges{};
  changes_.rowsFrom = size();
  changes_.evalsFrom = evalCount();
  return taken;
}

std::vector<double> RunSeries::ema(const std::vector<double>& y, double weight) {
  EmaSmoother smoother(weight);
  std::vector<double> out;
  out.reserve(y.size());
  for (double v : y) out.push_back(smoother.next(v));
  return out;
}

void RunSeries::addStart(const StartEvent& start) {
  if (facts_.starts == 0) {
    facts_.firstStartTime = start.time;
    if (!std::isfinite(origin_)) origin_ = start.time;
  }
  ++facts_.starts;
  facts_.stage = start.stage;
  facts_.worldSize = start.world_size;
  facts_.sequenceParallelSize = start.sequence_parallel_size;
  facts_.sequenceParallelMode = start.sequence_parallel_mode;
  facts_.model = start.model;
  // A resume after an end (a failed run started again) is running again.
  facts_.ended = false;
  facts_.endState.clear();
  facts_.endReason.clear();
  changes_.facts = true;
}

void RunSeries::addEnd(const EndEvent& end) {
  facts_.ended = true;
  facts_.endState = end.state;
  facts_.endReason = end.reason;
  changes_.facts = true;
  changes_.ended = true;
}

double RunSeries::timeOrigin(double wall, double elapsed) {
  // Without a start event (a stream read from a saved cursor) the run started `elapsed`
  // seconds before its first step we see.
  if (!std::isfinite(origin_) && std::isfinite(wall))
    origin_ = std::isfinite(elapsed) ? wall - elapsed : wall;
  return origin_;
}

void RunSeries::addStep(const StepEvent& step) {
  const double key = static_cast<double>(step.step);
  if (!steps_.empty() && key <= steps_.back()) {
    truncateRows(lowerBound(steps_, key));
    truncateEvals(lowerBound(evalSteps_, key));
  }
  steps_.push_back(key);
  wall_.push_back(step.time);
  relative_.push_back(step.time - timeOrigin(step.time, step.elapsed));

  pushMetric(Metric::Loss, step.loss);
  pushMetric(Metric::LearningRate, step.lr);
  pushMetric(Metric::GradNorm, step.grad_norm);
  pushMetric(Metric::TokensPerSec, step.tokens_per_sec);
  pushMetric(Metric::RssMib, step.rss_mib);
  const DpoMetrics dpo = step.dpo.value_or(DpoMetrics{});
  pushMetric(Metric::RewardsChosen, dpo.rewards_chosen);
  pushMetric(Metric::RewardsRejected, dpo.rewards_rejected);
  pushMetric(Metric::RewardsMargins, dpo.rewards_margins);
  pushMetric(Metric::RewardsAccuracies, dpo.rewards_accuracies);
  pushGpus(step.gpus);
}

void RunSeries::addEval(const EvalEvent& eval) {
  const double key = static_cast<double>(eval.step);
  if (!evalSteps_.empty() && key <= evalSteps_.back()) truncateEvals(lowerBound(evalSteps_, key));
  const std::size_t after = static_cast<std::size_t>(
      std::upper_bound(steps_.begin(), steps_.end(), key) - steps_.begin());
  evalSteps_.push_back(key);
  evalWall_.push_back(after > 0 ? wall_[after - 1] : kNoValue);
  evalRelative_.push_back(after > 0 ? relative_[after - 1] : kNoValue);
  evalLoss_.push_back(eval.loss);
}

void RunSeries::truncateRows(std::size_t rows) {
  steps_.resize(rows);
  wall_.resize(rows);
  relative_.resize(rows);
  for (auto& column : metrics_)
    if (!column.empty()) column.resize(rows);
  for (GpuSeries& gpu : gpus_) {
    gpu.allocated.resize(rows);
    gpu.reserved.resize(rows);
    gpu.total.resize(rows);
  }
  changes_.rowsFrom = std::min(changes_.rowsFrom, rows);
}

void RunSeries::truncateEvals(std::size_t evals) {
  evalSteps_.resize(evals);
  evalWall_.resize(evals);
  evalRelative_.resize(evals);
  evalLoss_.resize(evals);
  changes_.evalsFrom = std::min(changes_.evalsFrom, evals);
}

void RunSeries::pushMetric(Metric metric, double value) {
  std::vector<double>& column = metrics_[index(metric)];
  if (column.empty()) {
    // A metric the run never reported stays absent rather than a column of NaN.
    if (!std::isfinite(value)) return;
    column.assign(steps_.size() - 1, kNoValue);
  }
  column.push_back(value);
}

GpuSeries& RunSeries::gpuColumn(int rank) {
  auto it = std::lower_bound(gpus_.begin(), gpus_.end(), rank,
                             [](const GpuSeries& g, int r) { return g.rank < r; });
  if (it == gpus_.end() || it->rank != rank) {
    GpuSeries fresh;
    fresh.rank = rank;
    // Rows before this one (the current row is pushed by the caller) had no reading of it.
    const std::size_t before = steps_.size() - 1;
    fresh.allocated.assign(before, kNoValue);
    fresh.reserved.assign(before, kNoValue);
    fresh.total.assign(before, kNoValue);
    it = gpus_.insert(it, std::move(fresh));
  }
  return *it;
}

void RunSeries::pushGpus(const std::vector<GpuMemory>& gpus) {
  for (const GpuMemory& memory : gpus) {
    GpuSeries& column = gpuColumn(memory.rank);
    if (column.allocated.size() == steps_.size()) continue;  // the rank twice in one step
    column.allocated.push_back(memory.allocated_mib);
    column.reserved.push_back(memory.reserved_mib);
    column.total.push_back(memory.total_mib);
  }
  for (GpuSeries& column : gpus_) {
    if (column.allocated.size() == steps_.size()) continue;
    column.allocated.push_back(kNoValue);
    column.reserved.push_back(kNoValue);
    column.total.push_back(kNoValue);
  }
}

}  // namespace studio::ui
