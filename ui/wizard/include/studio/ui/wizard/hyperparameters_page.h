#pragma once
// Page 5: optimisation, checkpointing and evaluation settings with LLaMA-Factory's defaults (the
// widgets start from RunConfig{}), and output_dir.
#include "studio/ui/wizard/wizard_page.h"

class QLineEdit;

namespace studio::ui {

class HyperparametersPage : public WizardPage {
  Q_OBJECT

 public:
  explicit HyperparametersPage(RunDraft* draft, QWidget* parent = nullptr);

  QLineEdit* outputDirEdit() const { return output_; }

 private:
  QWidget* buildOptimisation();
  QWidget* buildCheckpoints();
  void browseOutput();

  QLineEdit* output_ = nullptr;
};

}  // namespace studio::ui
