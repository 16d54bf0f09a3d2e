#pragma once
// The plotted series of one run, built from its events (docs/events.md). A plain model: no
// widgets, no files; the dashboard feeds it what an EventTailer read and draws from it.
//
// Rows are the run's step events in step order, one per step: a resumed run re-emits the steps
// after its last checkpoint, and a step that is already present replaces its row and drops the
// rows after it (the old timeline), as TensorBoard shows a resumed run. Every metric column is
// parallel to the rows; NaN marks a step without a value, which a chart draws as a gap. A value
// the run wrote as NaN, Infinity or -Infinity (a diverged step, StepEvent::not_finite) is not a
// gap: notFiniteAt() counts such steps per row, and a chart marks the row and draws its curve
// on through the finite rows around it.
//
// Memory and drawing stay bounded however long the run: at most kMaxRows rows are kept. When
// they are full, neighbouring rows are merged in pairs and each row from then on covers twice as
// many consecutive steps (stepsPerRow()). A merged row sits at its last step and time; it holds
// the mean of its steps' finite values (loss, lr, grad norm, tokens/s, RSS, rewards) and, for
// memory, the highest allocated and reserved (a peak is never averaged away) with the last
// capacity. The newest row fills up step by step, changing in place (rowsFrom then points at
// it). A resume whose step falls inside a merged row drops that row with the rows after it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "studio/runs/events.h"

namespace studio::ui {

// What the x axis of a chart measures.
enum class XAxisMode {
  Step,          // the global optimizer step
  RelativeTime,  // seconds since the run's first start event
  WallTime,      // seconds since the Unix epoch (the events' `time`)
};

// The per-step scalars of a run. Rewards* come from preference stages (DPO, a reward model's
// scores, KTO), Kl from KTO.
enum class Metric {
  Loss,
  LearningRate,
  GradNorm,
  TokensPerSec,
  RssMib,  // resident memory of the engine process; written by CPU runs
  RewardsChosen,
  RewardsRejected,
  RewardsMargins,
  RewardsAccuracies,
  ModelTflops,  // model FLOPs per second and rank (docs/events.md, MFU)
  Mfu,          // model_tflops / the device's peak, 0..1
  Kl,           // KTO's KL estimate
  // The slowest rank's busy time (compute + data) over the ranks' mean (stragglerOf): 1 when
  // balanced; NaN on steps without rank_times or with one rank.
  Straggler,
};
inline constexpr std::size_t kMetricCount = 13;

// A step's rank_times (docs/events.md, "Where the time goes") as the dashboard draws them.
struct RankTimeRow {
  double step = 0;
  double wall = kNoValue;
  double relative = kNoValue;
  std::vector<RankTime> ranks;  // in rank order
};
// The slowest rank of a step by busy time (compute + data: what a rank does itself, with no
// one to wait for) and its busy time over the ranks' mean. rank -1 and NaN with fewer than two
// ranks or no finite busy time.
struct Straggler {
  int rank = -1;
  double ratio = kNoValue;
};
Straggler stragglerOf(const std::vector<RankTime>& ranks);

// Memory of one rank, in MiB, parallel to the rows (NaN where a step did not report the rank).
struct GpuSeries {
  int rank = 0;
  std::vector<double> allocated;
  std::vector<double> reserved;
  std::vector<double> total;  // the device's capacity
  // NVML (GPU runs with the driver's library): utilisation %, power draw and limit in W; NaN
  // where not reported. Merged rows keep the highest of their steps, as memory does.
  std::vector<double> util;
  std::vector<double> power;
  std::vector<double> powerLimit;
  // Whether a finite utilisation or power reading ever arrived (kept as a flag so that the
  // dashboard's updates do not scan the columns).
  bool activity = false;
  bool hasActivity() const { return activity; }
};

// What the start and end events say about the run.
// A restart of the whole world by the launcher (studio-train train --max-restarts).
struct RestartMark {
  int attempt = 0;
  int failedRank = -1;
  std::string reason;
  std::string resumeFrom;  // "" when it started over
  double step = 0;         // the step it resumed from
  double wall = kNoValue;  // unix time
  double relative = kNoValue;  // seconds since the run's origin
};

struct RunFacts {
  int starts = 0;                  // start events seen: 1, plus one per resume
  double firstStartTime = kNoValue;  // `time` of the first start event: relative time 0
  std::string stage;               // "sft", "dpo", ...
  int worldSize = 0;
  int sequenceParallelSize = 0;
  std::string sequenceParallelMode;
  ModelSummary model;
  std::int64_t totalSteps = 0;  // of the whole run (0: not said)
  std::string deviceName;       // rank 0's device ("cpu" on CPU runs)
  double peakTflops = kNoValue; // its peak for MFU; NaN when not known
  // The memory series come from nvidia-smi samples of the run's host (addDeviceSample): per GPU
  // index, every process on it; "" when the run reports its own memory.
  std::string sampledHost;
  std::vector<RestartMark> restarts;  // in the order they happened
  // Checkpoints written (checkpoint events), in step order; a resume drops those at or after
  // its first step (the old timeline's). Times as for evaluations: the last row's at or
  // before the step.
  struct CheckpointMark {
    double step = 0;
    double wall = kNoValue;
    double relative = kNoValue;
    std::string path;
  };
  std::vector<CheckpointMark> checkpoints;
  bool ended = false;  // the last event of the run so far is an end event
  std::string endState;   // "finished", "failed", "stopped"
  std::string endReason;
};

// What changed since the previous RunSeries::takeChanges(). Rows before rowsFrom (and
// evaluations before evalsFrom) are exactly as they were then; a consumer that had drawn N rows
// appends [N, size()) when rowsFrom >= N and redraws everything otherwise.
struct SeriesChanges {
  std::size_t rowsFrom = 0;
  std::size_t evalsFrom = 0;
  bool facts = false;  // a start or an end event arrived
  bool ended = false;  // an end event arrived
};

class RunSeries {
 public:
  // Rows kept at most; a run of more steps is drawn from merged rows (see above).
  static constexpr std::size_t kDefaultMaxRows = 16384;

  explicit RunSeries(std::size_t maxRows = kDefaultMaxRows);

  // Adds events in stream order. Kinds without series (log, checkpoint, unknown) are ignored.
  void ingest(const std::vector<Event>& events);
  // A sample of the host's GPUs (nvidia_smi.h) for a run whose events carry no memory: it joins
  // the last row (the highest reading of a row's samples is kept). Ignored once the run's own
  // events report memory, and while there is no row yet. Returns whether it was used.
  bool addDeviceSample(const std::string& host, const std::vector<GpuMemory>& gpus);
  // Forgets everything, e.g. when the events file was replaced by a new run.
  void clear();

  // Number of rows (distinct steps kept, or groups of stepsPerRow() steps once merged).
  std::size_t size() const { return steps_.size(); }
  // Consecutive steps a full row covers: 1 until the rows first reach maxRows().
  std::size_t stepsPerRow() const { return stride_; }
  std::size_t maxRows() const { return maxRows_; }
  bool empty() const { return steps_.empty(); }
  const std::vector<double>& steps() const { return steps_; }
  const std::vector<double>& relativeTime() const { return relative_; }
  const std::vector<double>& wallTime() const { return wall_; }
  const std::vector<double>& x(XAxisMode mode) const;

  // size() values, or none when the run never had a finite value of the metric (an SFT run has
  // no rewards, a GPU run no RSS): charts then leave the metric out.
  const std::vector<double>& values(Metric metric) const;
  bool has(Metric metric) const { return !values(metric).empty(); }
  // How many of a row's steps wrote the metric as NaN, Infinity or -Infinity (0 for most). The
  // row's value is the mean of its finite values, or the non-finite one when it has none.
  std::uint32_t notFiniteAt(Metric metric, std::size_t row) const;
  // Whether any row has such a step.
  bool hasNotFinite(Metric metric) const {
    const auto& column = notFinite_[static_cast<std::size_t>(metric)];
    return std::any_of(column.begin(), column.end(), [](std::uint32_t n) { return n > 0; });
  }

  // Evaluations, in step order, one per step (a repeated step replaces the earlier one). Their
  // times are those of the last step row at or before the evaluated step (an eval event has no
  // time of its own); NaN when there is none.
  std::size_t evalCount() const { return evalSteps_.size(); }
  const std::vector<double>& evalX(XAxisMode mode) const;
  const std::vector<double>& evalLoss() const { return evalLoss_; }
  // A preference stage's accuracy over the evaluation pairs (rm, dpo), NaN where an eval event
  // has none; hasEvalAccuracy: whether any has.
  const std::vector<double>& evalAccuracy() const { return evalAccuracy_; }
  bool hasEvalAccuracy() const { return evalAccuracyCount_ > 0; }

  // One entry per rank that ever reported memory, by ascending rank.
  const std::vector<GpuSeries>& gpus() const { return gpus_; }
  // The steps that reported where each rank's time went, in step order: the newest
  // kMaxRankTimeRows (each row is a world's worth of numbers, so they are not merged like the
  // metrics but the oldest are dropped). rankTimesAt: the row of `step`, or the nearest
  // before it; nullptr when there is none.
  static constexpr std::size_t kMaxRankTimeRows = 4096;
  const std::vector<RankTimeRow>& rankTimes() const { return rankTimes_; }
  const RankTimeRow* rankTimesAt(double step) const;

  const RunFacts& facts() const { return facts_; }
  // A DPO run: its start event says so, or its steps carry rewards.
  bool isDpo() const;

  // Returns what changed since the last call (or since construction) and starts over. One
  // consumer per series: the dashboard that draws it.
  SeriesChanges takeChanges();

  // TensorBoard's debiased EMA of y (EmaSmoother over the whole vector): same size, NaN where y
  // is not finite.
  static std::vector<double> ema(const std::vector<double>& y, double weight);

 private:
  void addStart(const StartEvent& start);
  void addStep(const StepEvent& step);
  // Fills in the metrics a row read before lacks (Event::amends); a step not read is ignored.
  void amendStep(const StepEvent& step);
  void addEval(const EvalEvent& eval);
  void addEnd(const EndEvent& end);
  void addRestart(const RestartEvent& restart);
  void addCheckpoint(const CheckpointEvent& checkpoint);
  void truncateRows(std::size_t rows);
  void truncateEvals(std::size_t evals);
  void pushMetric(Metric metric, double value, bool notFinite);
  void countNotFinite(Metric metric, std::size_t row);
  void pushGpus(const std::vector<GpuMemory>& gpus);
  // The step joins the last row (which covers fewer than stride_ steps).
  void mergeStep(const StepEvent& step);
  void mergeMetric(Metric metric, std::size_t row, double value, std::uint32_t count);
  // Halves the rows: row i of the result holds old rows 2i and 2i+1.
  void mergePairs();
  GpuSeries& gpuColumn(int rank, bool rowPushed = false);
  double timeOrigin(double wall, double elapsed);
  double relativeTime(const StepEvent& step);

  std::vector<double> steps_;
  std::vector<double> wall_;
  std::vector<double> relative_;
  std::array<std::vector<double>, kMetricCount> metrics_;
  std::vector<GpuSeries> gpus_;
  std::vector<RankTimeRow> rankTimes_;

  std::vector<double> evalSteps_;
  std::vector<double> evalWall_;
  std::vector<double> evalRelative_;
  std::vector<double> evalLoss_;
  std::vector<double> evalAccuracy_;
  std::size_t evalAccuracyCount_ = 0;  // finite values in evalAccuracy_

  // Per row: the steps it covers, and per metric how many of them had a finite value (the
  // weight of its mean); empty while stride_ is 1 (nothing merged yet).
  std::vector<std::uint32_t> rowSteps_;
  std::array<std::vector<std::uint32_t>, kMetricCount> finite_;
  // Per row, per metric: steps written non-finite. Shorter than the rows (down to empty) where
  // the rows after have none.
  std::array<std::vector<std::uint32_t>, kMetricCount> notFinite_;
  std::size_t maxRows_;
  std::size_t stride_ = 1;

  RunFacts facts_;
  double origin_ = kNoValue;  // wall time of relative time 0
  SeriesChanges changes_;
};

}  // namespace studio::ui
