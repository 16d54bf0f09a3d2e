#pragma once
// Page 3: the training method. SFT, pt (continued pre-training), or DPO with its settings:
// pref_beta, pref_loss (sigmoid, ipo, hinge, orpo, simpo, kto_pair), pref_ftx, simpo_gamma (simpo
// only), dpo_label_smoothing (sigmoid only), an optional reference model folder and
// precompute_ref_logps (not for orpo and simpo, which build no reference). The DPO settings are
// enabled only for stage dpo.
#include "studio/ui/wizard/wizard_page.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QPushButton;
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
  QDoubleSpinBox* gamma_;
  QLineEdit* reference_;
  QPushButton* browse_;
  QCheckBox* precompute_ = nullptr;
  QGroupBox* dpo_;
};

}  // namespace studio::ui
