#pragma once
// Page 6: the per-GPU memory estimate (studio::estimate_memory) of the current config as a
// stacked bar against the GPU's memory (a GiB box, 80 by default), "fits" or "does not fit by
// X GiB", the estimate's assumptions, and a button that sets the smallest SP size that fits on
// the Parallelism page. Estimating (and reading the DeepSpeed JSON) runs off the GUI thread.
#include <memory>
#include <optional>

#include "studio/config/memory_estimate.h"
#include "studio/ui/wizard/wizard_page.h"

class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace studio::ui {

class MemoryBar;
template <class Result>
class LatestJob;

struct MemoryOutcome {
  std::optional<studio::MemoryEstimate> estimate;
  std::optional<int> smallestFittingSp;
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
  std::unique_ptr<LatestJob<MemoryOutcome>> job_;
  std::optional<MemoryOutcome> outcome_;
};

}  // namespace studio::ui
