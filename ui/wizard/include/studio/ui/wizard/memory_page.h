#pragma once
// Page 6: the per-GPU memory estimate (studio::estimate_memory) of the current config as a
// stacked bar against the GPU's memory (a GiB box, 80 by default), "fits" or "does not fit by
// X GiB", the estimate's assumptions, and a button that sets the smallest SP size that fits on
// the Parallelism page. Below it, the longest cutoff_len that fits (studio::longest_fitting_cutoff)
// and what each long-sequence option buys: the longest cutoff_len with that option switched,
// beside switches for offload_activations and tiled_mlp, so that the effect shows live.
// Estimating (and reading the DeepSpeed JSON) runs off the GUI thread.
#include <memory>
#include <optional>
#include <vector>

#include "studio/config/memory_estimate.h"
#include "studio/ui/wizard/wizard_page.h"

class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTableWidget;

namespace studio::ui {

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
  const std::optional<MemoryOutcome>& outcome() const { return outcome_; }
  bool isBusy() const;

 signals:
  void estimated();  // the estimate of the current inputs is on screen

 private:
  void request();
  void show(const MemoryOutcome& outcome);
  void applySmallest();

  QDoubleSpinBox* gpu_;
  MemoryBar* bar_;
  QLabel* verdict_;
  QLabel* details_;
  QPlainTextEdit* notes_;  // the estimate's assumptions, one per line
  QPushButton* smallest_;
  QLabel* longest_;
  QTableWidget* gains_;
  std::unique_ptr<LatestJob<MemoryOutcome>> job_;
  std::optional<MemoryOutcome> outcome_;
};

}  // namespace studio::ui
