#pragma once
// Page 6: the per-GPU memory estimate (studio::estimate_memory) of the current config as a
// stacked bar against the GPU's memory (a GiB box, 80 by default), "fits" or "does not fit by
// X GiB", the estimate's assumptions, and a button that sets the smallest SP size that fits on
// the Parallelism page. Below it, the longest cutoff_len that fits (studio::longest_fitting_cutoff)
// and what each long-sequence option buys: the longest cutoff_len with that option switched,
// beside switches for offload_activations and tiled_mlp, so that the effect shows live. Last,
// the length planner (studio::plan_lengths): the longest cutoff_len against 1-64 GPUs for each
// SP mode and memory saving, drawn with the published points of 360-LLaMA-Factory and ALST, and
// listed in a table; choosing a point (a click on the chart, or a cell and "Use") sets that
// configuration. Estimating (and reading the DeepSpeed JSON) runs off the GUI thread.
#include <memory>
#include <optional>
#include <vector>

#include "studio/config/length_plan.h"
#include "studio/config/memory_estimate.h"
#include "studio/ui/wizard/wizard_page.h"

class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTabWidget;
class QTableWidget;

namespace studio::ui {

class LengthPlanChart;
class MemoryBar;
template <class Result>
class LatestJob;

// One long-sequence option and the longest cutoff_len with it switched the other way.
struct OptionGain {
  QString option;   // e.g. "offload_activations"
  bool on = false;  // in the current config
  std::optional<int64_t> longestSwitched;
};

struct MemoryOutcome {
  std::optional<studio::MemoryEstimate> estimate;
  studio::LengthPlan plan;  // the length planner for this model, stage and GPU memory
  std::optional<int> smallestFittingSp;
  std::optional<int64_t> longestCutoff;  // nullopt: none fits
  std::vector<OptionGain> gains;
  QString deepspeedError;  // the DeepSpeed JSON could not be read: estimated without ZeRO
};

class MemoryPage : public WizardPage {
  Q_OBJECT

 public:
  static constexpr double kDefaultGpuGiB = 80.0;

  explicit MemoryPage(RunDraft* draft, QWidget* parent = nullptr);
  ~MemoryPage() override;

  QDoubleSpinBox* gpuMemoryBox() const { return gpu_; }
  MemoryBar* bar() const { return bar_; }
  QPushButton* smallestSpButton() const { return smallest_; }
  // "fits ..." / "does not fit by X GiB ..."; empty while there is no estimate.
  QString verdictText() const;
  QString detailsText() const;
  // "Longest cutoff_len that fits: ..." and the table of what each option buys.
  QString longestText() const;
  QTableWidget* gainsTable() const { return gains_; }
  // The length planner: its chart, its table (a row per line, a column per GPU count; each
  // cell the longest cutoff_len) and the button that sets the selected cell's configuration.
  LengthPlanChart* planChart() const { return planChart_; }
  QTableWidget* planTable() const { return planTable_; }
  QPushButton* planUseButton() const { return planUse_; }
  // Below the bar: "Longest sequence", "Length planner" and "Assumptions" tabs.
  QTabWidget* tabs() const { return tabs_; }
  // GPUs a node the planner assumes (the Parallelism page's world when it has more).
  static constexpr int kPlanGpusPerNode = 8;
  // Sets the configuration of the plan's `point` of `line`: the SP mode and size, the ZeRO and
  // offload keys, tiling, cutoff_len, and the world (GPUs a node x nodes).
  void applyPlanPoint(int line, int point);
  const std::optional<MemoryOutcome>& outcome() const { return outcome_; }
  bool isBusy() const;

 signals:
  void estimated();  // the estimate of the current inputs is on screen

 private:
  void request();
  void show(const MemoryOutcome& outcome);
  void applySmallest();
  void showPlan(const studio::LengthPlan& plan);

  QDoubleSpinBox* gpu_;
  MemoryBar* bar_;
  QLabel* verdict_;
  QLabel* details_;
  QPlainTextEdit* notes_;  // the estimate's assumptions, one per line
  QPushButton* smallest_;
  QLabel* longest_;
  QTableWidget* gains_;
  LengthPlanChart* planChart_;
  QTableWidget* planTable_;
  QPushButton* planUse_;
  QTabWidget* tabs_;
  std::unique_ptr<LatestJob<MemoryOutcome>> job_;
  std::optional<MemoryOutcome> outcome_;
};

}  // namespace studio::ui
