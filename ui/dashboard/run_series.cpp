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

RunSeries::RunSeries(std::size_t maxRows) : maxRows_(std::max<std::size_t>(2, maxRows & ~std::size_t{1})) {
  clear();
}

void RunSeries::ingest(const std::vector<Event>& events) {
  for (const Event& event : events) {
    if (const auto* step = event.get<StepEvent>())
      event.amends ? amendStep(*step) : addStep(*step);
    else if (const auto* eval = event.get<EvalEvent>())
      addEval(*eval);
    else if (const auto* start = event.get<StartEvent>())
      addStart(*start);
    else if (const auto* end = event.get<EndEvent>())
      addEnd(*end);
    else if (const auto* restart = event.get<RestartEvent>())
      addRestart(*restart);
    else if (const auto* checkpoint = event.get<CheckpointEvent>())
      addCheckpoint(*checkpoint);
  }
}

void RunSeries::clear() {
  steps_.clear();
  wall_.clear();
  relative_.clear();
  for (auto& column : metrics_) column.clear();
  for (auto& column : finite_) column.clear();
  for (auto& column : notFinite_) column.clear();
  rowSteps_.clear();
  stride_ = 1;
  gpus_.clear();
  rankTimes_.clear();
  evalSteps_.clear();
  evalWall_.clear();
  evalRelative_.clear();
  evalLoss_.clear();
  evalAccuracy_.clear();
  evalAccuracyCount_ = 0;
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

std::uint32_t RunSeries::notFiniteAt(Metric metric, std::size_t row) const {
  const std::vector<std::uint32_t>& column = notFinite_[index(metric)];
  return row < column.size() ? column[row] : 0;
}

void RunSeries::countNotFinite(Metric metric, std::size_t row) {
  std::vector<std::uint32_t>& column = notFinite_[index(metric)];
  if (column.size() <= row) column.resize(row + 1, 0);
  ++column[row];
}

const std::vector<double>& RunSeries::evalX(XAxisMode mode) const {
  return byMode(mode, evalSteps_, evalRelative_, evalWall_);
}

bool RunSeries::isDpo() const {
  return facts_.stage == "dpo" || has(Metric::RewardsChosen) || has(Metric::RewardsRejected) ||
         has(Metric::RewardsMargins) || has(Metric::RewardsAccuracies) || has(Metric::Kl);
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

namespace {

// Every per-step scalar a StepEvent carries, with the series it goes to: one list for adding,
// merging and amending rows alike.
// f(metric, value, whether the step wrote it as NaN, Infinity or -Infinity).
template <class F>
void forEachStepMetric(const StepEvent& step, F&& f) {
  auto written = [&](StepValue v) { return step.written_not_finite(v); };
  f(Metric::Loss, step.loss, written(StepValue::Loss));
  f(Metric::LearningRate, step.lr, written(StepValue::Lr));
  f(Metric::GradNorm, step.grad_norm, written(StepValue::GradNorm));
  f(Metric::TokensPerSec, step.tokens_per_sec, written(StepValue::TokensPerSec));
  f(Metric::RssMib, step.rss_mib, std::isinf(step.rss_mib));
  const DpoMetrics dpo = step.dpo.value_or(DpoMetrics{});
  f(Metric::RewardsChosen, dpo.rewards_chosen, written(StepValue::RewardsChosen));
  f(Metric::RewardsRejected, dpo.rewards_rejected, written(StepValue::RewardsRejected));
  f(Metric::RewardsMargins, dpo.rewards_margins, written(StepValue::RewardsMargins));
  f(Metric::RewardsAccuracies, dpo.rewards_accuracies, written(StepValue::RewardsAccuracies));
  f(Metric::ModelTflops, step.model_tflops, written(StepValue::ModelTflops));
  f(Metric::Mfu, step.mfu, written(StepValue::Mfu));
  f(Metric::Kl, dpo.kl, written(StepValue::Kl));
  f(Metric::Straggler, stragglerOf(step.rank_times).ratio, false);
}

}  // namespace

Straggler stragglerOf(const std::vector<RankTime>& ranks) {
  Straggler out;
  double sum = 0, most = -1;
  int counted = 0;
  for (const RankTime& r : ranks) {
    const double busy = r.compute_s + r.data_s;
    if (!std::isfinite(busy)) continue;
    sum += busy;
    ++counted;
    if (busy > most) most = busy, out.rank = r.rank;
  }
  if (counted < 2 || !(sum > 0)) return Straggler{};
  out.ratio = most / (sum / counted);
  return out;
}

const RankTimeRow* RunSeries::rankTimesAt(double step) const {
  auto it = std::upper_bound(rankTimes_.begin(), rankTimes_.end(), step,
                             [](double s, const RankTimeRow& row) { return s < row.step; });
  return it == rankTimes_.begin() ? nullptr : &*std::prev(it);
}

void RunSeries::addCheckpoint(const CheckpointEvent& checkpoint) {
  const double key = static_cast<double>(checkpoint.step);
  auto& marks = facts_.checkpoints;
  while (!marks.empty() && marks.back().step >= key) marks.pop_back();
  const std::size_t after = static_cast<std::size_t>(
      std::upper_bound(steps_.begin(), steps_.end(), key) - steps_.begin());
  RunFacts::CheckpointMark mark;
  mark.step = key;
  mark.wall = after > 0 ? wall_[after - 1] : kNoValue;
  mark.relative = after > 0 ? relative_[after - 1] : kNoValue;
  mark.path = checkpoint.path;
  marks.push_back(std::move(mark));
  changes_.facts = true;
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
  facts_.totalSteps = start.total_steps;
  facts_.deviceName = start.device_name;
  facts_.peakTflops = start.peak_tflops;
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

void RunSeries::addRestart(const RestartEvent& restart) {
  RestartMark mark;
  mark.attempt = restart.attempt;
  mark.failedRank = restart.failed_rank;
  mark.reason = restart.reason;
  mark.resumeFrom = restart.resume_from;
  mark.step = static_cast<double>(restart.step);
  mark.wall = restart.time;
  mark.relative = std::isfinite(origin_) ? restart.time - origin_ : kNoValue;
  facts_.restarts.push_back(std::move(mark));
  changes_.facts = true;
}

double RunSeries::timeOrigin(double wall, double elapsed) {
  // Without a start event (a stream read from a saved cursor) the run started `elapsed`
  // seconds before its first step we see.
  if (!std::isfinite(origin_) && std::isfinite(wall))
    origin_ = std::isfinite(elapsed) ? wall - elapsed : wall;
  return origin_;
}

double RunSeries::relativeTime(const StepEvent& step) {
  // A log without wall times (LLaMA-Factory's trainer_log.jsonl) still has the run's elapsed
  // seconds: relative time is then that.
  if (!std::isfinite(step.time)) return step.elapsed;
  return step.time - timeOrigin(step.time, step.elapsed);
}

void RunSeries::addStep(const StepEvent& step) {
  if (step.total_steps > 0 && step.total_steps != facts_.totalSteps) {
    facts_.totalSteps = step.total_steps;  // LLaMA-Factory's lines say it on every step
    changes_.facts = true;
  }
  const double key = static_cast<double>(step.step);
  if (!steps_.empty() && key <= steps_.back()) {
    truncateRows(lowerBound(steps_, key));
    truncateEvals(lowerBound(evalSteps_, key));
    auto& marks = facts_.checkpoints;
    const std::size_t before = marks.size();
    while (!marks.empty() && marks.back().step >= key) marks.pop_back();
    changes_.facts = changes_.facts || marks.size() != before;
  }
  while (!rankTimes_.empty() && rankTimes_.back().step >= key) rankTimes_.pop_back();
  if (!step.rank_times.empty()) {
    if (rankTimes_.size() == kMaxRankTimeRows)
      rankTimes_.erase(rankTimes_.begin(), rankTimes_.begin() + kMaxRankTimeRows / 4);
    rankTimes_.push_back({key, step.time, relativeTime(step), step.rank_times});
  }
  if (stride_ > 1 && !steps_.empty() && rowSteps_.back() < stride_) {
    mergeStep(step);
    return;
  }
  if (steps_.size() == maxRows_) mergePairs();
  if (stride_ > 1) rowSteps_.push_back(1);
  steps_.push_back(key);
  wall_.push_back(step.time);
  relative_.push_back(relativeTime(step));

  forEachStepMetric(step, [this](Metric m, double v, bool notFinite) {
    pushMetric(m, v, notFinite);
  });
  pushGpus(step.gpus);
}

bool RunSeries::addDeviceSample(const std::string& host, const std::vector<GpuMemory>& gpus) {
  if (steps_.empty() || gpus.empty()) return false;
  const bool ownMemory =
      facts_.sampledHost.empty() &&
      std::any_of(gpus_.begin(), gpus_.end(), [](const GpuSeries& g) {
        return std::any_of(g.allocated.begin(), g.allocated.end(),
                           [](double v) { return std::isfinite(v); });
      });
  if (ownMemory) return false;
  if (facts_.sampledHost != host) {
    facts_.sampledHost = host;
    changes_.facts = true;
  }
  const std::size_t row = steps_.size() - 1;
  auto higher = [](double& kept, double v) {
    if (std::isfinite(v) && !(kept >= v)) kept = v;
  };
  for (const GpuMemory& g : gpus) {
    GpuSeries& column = gpuColumn(g.rank, /*rowPushed=*/true);
    higher(column.allocated[row], g.allocated_mib);
    if (std::isfinite(g.total_mib)) column.total[row] = g.total_mib;
    higher(column.util[row], g.util_percent);
    higher(column.power[row], g.power_w);
    column.activity = column.activity || std::isfinite(g.util_percent) || std::isfinite(g.power_w);
    if (std::isfinite(g.power_limit_w)) column.powerLimit[row] = g.power_limit_w;
  }
  changes_.rowsFrom = std::min(changes_.rowsFrom, row);
  return true;
}

void RunSeries::amendStep(const StepEvent& step) {
  const double key = static_cast<double>(step.step);
  // A row is kept by its last step; a merged row (stride > 1) covers the steps up to it.
  const std::size_t row = lowerBound(steps_, key);
  if (row == steps_.size() || (stride_ == 1 && steps_[row] != key)) return;  // not read
  auto fill = [&](Metric metric, double value, bool notFinite) {
    std::vector<double>& column = metrics_[index(metric)];
    if (notFinite) {
      // A diverged step's value the log lacked: the row is marked, unless it already has one.
      if (notFiniteAt(metric, row) > 0) return;
      if (column.empty()) column.assign(steps_.size(), kNoValue);
      if (std::isfinite(column[row]) && stride_ == 1) return;
      if (stride_ == 1) column[row] = value;
      countNotFinite(metric, row);
      return;
    }
    if (!std::isfinite(value)) return;
    if (stride_ > 1) {
      // Added to the row's mean like one more step's value, while fewer of the row's steps
      // have one than it holds (the log lacked it); a row whose every step had it is kept.
      std::vector<std::uint32_t>& finite = finite_[index(metric)];
      if (!column.empty() && finite.size() != steps_.size()) finite.resize(steps_.size(), 0);
      if (!column.empty() && row < rowSteps_.size() && finite[row] >= rowSteps_[row]) return;
      mergeMetric(metric, row, value, 1);
      return;
    }
    if (column.empty()) column.assign(steps_.size(), kNoValue);
    if (!std::isfinite(column[row])) column[row] = value;
  };
  forEachStepMetric(step, fill);
  changes_.rowsFrom = std::min(changes_.rowsFrom, row);
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
  const double accuracy = eval.dpo ? eval.dpo->rewards_accuracies : kNoValue;
  evalAccuracy_.push_back(accuracy);
  evalAccuracyCount_ += std::isfinite(accuracy) ? 1 : 0;
}

void RunSeries::truncateRows(std::size_t rows) {
  if (!rowSteps_.empty()) rowSteps_.resize(rows);
  for (auto& column : finite_)
    if (column.size() > rows) column.resize(rows);
  for (auto& column : notFinite_)
    if (column.size() > rows) column.resize(rows);
  steps_.resize(rows);
  wall_.resize(rows);
  relative_.resize(rows);
  for (auto& column : metrics_)
    if (!column.empty()) column.resize(rows);
  for (GpuSeries& gpu : gpus_) {
    gpu.allocated.resize(rows);
    gpu.reserved.resize(rows);
    gpu.total.resize(rows);
    gpu.util.resize(rows);
    gpu.power.resize(rows);
    gpu.powerLimit.resize(rows);
  }
  changes_.rowsFrom = std::min(changes_.rowsFrom, rows);
}

void RunSeries::truncateEvals(std::size_t evals) {
  evalSteps_.resize(evals);
  evalWall_.resize(evals);
  evalRelative_.resize(evals);
  for (std::size_t i = evals; i < evalAccuracy_.size(); ++i)
    evalAccuracyCount_ -= std::isfinite(evalAccuracy_[i]) ? 1 : 0;
  evalLoss_.resize(evals);
  evalAccuracy_.resize(evals);
  changes_.evalsFrom = std::min(changes_.evalsFrom, evals);
}

void RunSeries::pushMetric(Metric metric, double value, bool notFinite) {
  std::vector<double>& column = metrics_[index(metric)];
  std::vector<std::uint32_t>& finite = finite_[index(metric)];
  if (notFinite) countNotFinite(metric, steps_.size() - 1);
  if (column.empty()) {
    // A metric the run never reported stays absent rather than a column of NaN.
    if (!std::isfinite(value) && !notFinite) {
      finite.clear();
      return;
    }
    column.assign(steps_.size() - 1, kNoValue);
    if (stride_ > 1) finite.assign(steps_.size() - 1, 0);
  }
  column.push_back(value);
  if (stride_ > 1) {
    finite.resize(steps_.size() - 1);
    finite.push_back(std::isfinite(value) ? 1 : 0);
  }
}

void RunSeries::mergeMetric(Metric metric, std::size_t row, double value, std::uint32_t count) {
  std::vector<double>& column = metrics_[index(metric)];
  std::vector<std::uint32_t>& finite = finite_[index(metric)];
  if (!std::isfinite(value) || count == 0) return;
  if (column.empty()) {
    column.assign(steps_.size(), kNoValue);
    finite.assign(steps_.size(), 0);
  }
  // The running mean of the row's finite values, weighted by how many each side holds.
  const std::uint32_t before = finite[row];
  const double mean = before == 0 ? value
                                  : column[row] + (value - column[row]) *
                                                      (static_cast<double>(count) /
                                                       static_cast<double>(before + count));
  column[row] = mean;
  finite[row] = before + count;
}

void RunSeries::mergeStep(const StepEvent& step) {
  const std::size_t row = steps_.size() - 1;
  steps_[row] = static_cast<double>(step.step);
  wall_[row] = step.time;
  relative_[row] = relativeTime(step);
  ++rowSteps_[row];
  forEachStepMetric(step, [this, row](Metric m, double v, bool notFinite) {
    if (notFinite) {
      if (metrics_[index(m)].empty()) {
        metrics_[index(m)].assign(steps_.size(), kNoValue);
        finite_[index(m)].assign(steps_.size(), 0);
      }
      countNotFinite(m, row);
    }
    mergeMetric(m, row, v, 1);
  });
  for (const GpuMemory& memory : step.gpus) {
    GpuSeries& column = gpuColumn(memory.rank, /*rowPushed=*/true);
    auto higher = [](double& kept, double v) {
      if (std::isfinite(v) && !(kept >= v)) kept = v;
    };
    higher(column.allocated[row], memory.allocated_mib);
    higher(column.reserved[row], memory.reserved_mib);
    if (std::isfinite(memory.total_mib)) column.total[row] = memory.total_mib;
    higher(column.util[row], memory.util_percent);
    higher(column.power[row], memory.power_w);
    column.activity = column.activity || std::isfinite(memory.util_percent) ||
                      std::isfinite(memory.power_w);
    if (std::isfinite(memory.power_limit_w)) column.powerLimit[row] = memory.power_limit_w;
  }
  changes_.rowsFrom = std::min(changes_.rowsFrom, row);
}

void RunSeries::mergePairs() {
  const std::size_t n = steps_.size();
  if (rowSteps_.empty()) rowSteps_.assign(n, 1);
  for (std::size_t m = 0; m < kMetricCount; ++m) {
    if (metrics_[m].empty()) continue;
    if (finite_[m].size() != n) {
      finite_[m].resize(n);
      for (std::size_t i = 0; i < n; ++i) finite_[m][i] = std::isfinite(metrics_[m][i]) ? 1 : 0;
    }
  }
  const std::size_t half = (n + 1) / 2;
  for (auto& column : notFinite_) {
    if (column.empty()) continue;
    column.resize(n, 0);
    for (std::size_t i = 0; i < half; ++i) {
      const std::size_t a = 2 * i, b = a + 1;
      column[i] = column[a] + (b < n ? column[b] : 0);
    }
  }
  for (std::size_t i = 0; i < half; ++i) {
    const std::size_t a = 2 * i, b = std::min(a + 1, n - 1);
    const bool pair = b != a;
    steps_[i] = steps_[b];
    wall_[i] = wall_[b];
    relative_[i] = relative_[b];
    rowSteps_[i] = rowSteps_[a] + (pair ? rowSteps_[b] : 0);
    for (std::size_t m = 0; m < kMetricCount; ++m) {
      std::vector<double>& column = metrics_[m];
      if (column.empty()) continue;
      std::vector<std::uint32_t>& finite = finite_[m];
      const std::uint32_t ca = finite[a], cb = pair ? finite[b] : 0;
      double v = kNoValue;
      if (ca + cb > 0)
        v = ((ca ? column[a] * ca : 0.0) + (cb ? column[b] * cb : 0.0)) /
            static_cast<double>(ca + cb);
      column[i] = v;
      finite[i] = ca + cb;
    }
    for (GpuSeries& gpu : gpus_) {
      auto higher = [&](std::vector<double>& col) {
        const double x = col[a], y = col[b];
        col[i] = !std::isfinite(x) ? y : !std::isfinite(y) ? x : std::max(x, y);
      };
      higher(gpu.allocated);
      higher(gpu.reserved);
      gpu.total[i] = std::isfinite(gpu.total[b]) ? gpu.total[b] : gpu.total[a];
      higher(gpu.util);
      higher(gpu.power);
      gpu.powerLimit[i] = std::isfinite(gpu.powerLimit[b]) ? gpu.powerLimit[b] : gpu.powerLimit[a];
    }
  }
  stride_ *= 2;
  truncateRows(half);
  changes_.rowsFrom = 0;
}

GpuSeries& RunSeries::gpuColumn(int rank, bool rowPushed) {
  auto it = std::lower_bound(gpus_.begin(), gpus_.end(), rank,
                             [](const GpuSeries& g, int r) { return g.rank < r; });
  if (it == gpus_.end() || it->rank != rank) {
    GpuSeries fresh;
    fresh.rank = rank;
    // Rows before this one (the current row is pushed by the caller) had no reading of it;
    // merging into the last row, that row too starts without one.
    const std::size_t before = rowPushed ? steps_.size() : steps_.size() - 1;
    fresh.allocated.assign(before, kNoValue);
    fresh.reserved.assign(before, kNoValue);
    fresh.total.assign(before, kNoValue);
    fresh.util.assign(before, kNoValue);
    fresh.power.assign(before, kNoValue);
    fresh.powerLimit.assign(before, kNoValue);
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
    column.util.push_back(memory.util_percent);
    column.power.push_back(memory.power_w);
    column.activity = column.activity || std::isfinite(memory.util_percent) ||
                      std::isfinite(memory.power_w);
    column.powerLimit.push_back(memory.power_limit_w);
  }
  for (GpuSeries& column : gpus_) {
    if (column.allocated.size() == steps_.size()) continue;
    column.allocated.push_back(kNoValue);
    column.reserved.push_back(kNoValue);
    column.total.push_back(kNoValue);
    column.util.push_back(kNoValue);
    column.power.push_back(kNoValue);
    column.powerLimit.push_back(kNoValue);
  }
}


}  // namespace studio::ui
