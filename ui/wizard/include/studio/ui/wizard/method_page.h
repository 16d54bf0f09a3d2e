#pragma once
// Page 3: the training method. SFT, pt (continued pre-training), rm (a reward model), or DPO or
// KTO with their settings: pref_beta, pref_loss (sigmoid, ipo, hinge, orpo, simpo, kto_pair; dpo
// only), pref_ftx, simpo_gamma (simpo only), dpo_label_smoothing (sigmoid only),
// kto_chosen_weight and kto_rejected_weight (kto only), an optional reference model folder and
// precompute_ref_logps (not for orpo and simpo, which build no reference). The preference
// settings are enabled only for stages dpo and kto. The Adapters group picks finetuning_type
// (full, lora, freeze) and shows the LoRA keys only for lora, the freeze keys only for freeze.
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
  QWidget* loraFields() const { return lora_; }
  QWidget* freezeFields() const { return freeze_; }

 private:
  QGroupBox* buildAdapters();
  void updateEnabled();
  void browseReference();

  QComboBox* stage_;
  QComboBox* loss_;
  QDoubleSpinBox* smoothing_;
  QDoubleSpinBox* gamma_;
  QDoubleSpinBox* chosenWeight_;
  QDoubleSpinBox* rejectedWeight_;
  QComboBox* finetuning_;
  QLineEdit* reference_;
  QPushButton* browse_;
  QCheckBox* precompute_ = nullptr;
  QGroupBox* dpo_;
  QWidget* lora_;    // the LoRA keys, shown for finetuning_type lora
  QWidget* freeze_;  // the freeze keys, shown for finetuning_type freeze
};

}  // namespace studio::ui
