#pragma once
// Page 3: the training method. SFT, or DPO with its settings: pref_beta, pref_loss (sigmoid, ipo,
// hinge), pref_ftx, dpo_label_smoothing (sigmoid only), an optional reference model folder and
// precompute_ref_logps. The DPO settings are enabled only for stage dpo.
#include "studio/ui/wizard/wizard_page.h"

class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLineEdit;

namespace studio::ui {

class MethodPage : public WizardPage {
  Q_OBJECT

 public:
  explicit MethodPage(RunDraft* draft, QWidget* parent = nullptr);

  QComboBox* stageBox() const { return stage_; }
  QGroupBox* dpoGroup() const { return dpo_; }

 private:
  void updateEnabled();
  void browseReference();

  QComboBox* stage_;
  QComboBox* loss_;
  QDoubleSpinBox* smoothing_;
  QLineEdit* reference_;
  QGroupBox* dpo_;
};

}  // namespace studio::ui
