#include "studio/ui/wizard/method_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/run_draft.h"

namespace studio::ui {

using studio::RunConfig;

MethodPage::MethodPage(RunDraft* draft, QWidget* parent)
    // The stage decides which datasets fit (preference pairs for DPO), so the dataset's
    // diagnostics show here too.
    : WizardPage(draft,
                 {QStringLiteral("stage"), QStringLiteral("dataset"), QStringLiteral("do_train"),
                  QStringLiteral("finetuning_type"), QStringLiteral("pref_beta"),
                  QStringLiteral("pref_loss"), QStringLiteral("pref_ftx"),
                  QStringLiteral("simpo_gamma"), QStringLiteral("dpo_label_smoothing"),
                  QStringLiteral("kto_chosen_weight"), QStringLiteral("kto_rejected_weight"),
                  QStringLiteral("ref_model"), QStringLiteral("precompute_ref_logps"),
                  QStringLiteral("neat_packing"), QStringLiteral("train_on_prompt"),
                  QStringLiteral("mask_history")},
                 parent),
      stage_(bindings()->choice("stage", &RunConfig::stage,
                                {studio::Stage::Sft, studio::Stage::Dpo, studio::Stage::Pt,
                                 studio::Stage::Rm, studio::Stage::Kto})),
      loss_(bindings()->choice("pref_loss", &RunConfig::pref_loss,
                               {studio::PrefLoss::Sigmoid, studio::PrefLoss::Ipo,
                                studio::PrefLoss::Hinge, studio::PrefLoss::Orpo,
                                studio::PrefLoss::Simpo, studio::PrefLoss::KtoPair})),
      smoothing_(bindings()->real("dpo_label_smoothing", &RunConfig::dpo_label_smoothing, 0, 1, 3)),
      gamma_(bindings()->real("simpo_gamma", &RunConfig::simpo_gamma, 0, 100, 3)),
      chosenWeight_(
          bindings()->real("kto_chosen_weight", &RunConfig::kto_chosen_weight, 0, 100, 3)),
      rejectedWeight_(
          bindings()->real("kto_rejected_weight", &RunConfig::kto_rejected_weight, 0, 100, 3)),
      reference_(bindings()->optionalText("ref_model", &RunConfig::ref_model)),
      browse_(new QPushButton(tr("B&rowse..."))),
      dpo_(new QGroupBox(tr("Preference (DPO, KTO)"))) {
  setTitle(tr("Method"));
  setSubTitle(tr("SFT on instruction data, DPO on chosen/rejected pairs (orpo and simpo need no "
                 "reference model), rm (a reward model on those pairs), kto (single responses "
                 "marked desirable or not) or pt (plain texts, every token learned). "
                 "Full-parameter training."));
  FieldBindings* b = bindings();
  reference_->setPlaceholderText(tr("none: a frozen copy of the initial model"));
  auto* refRow = new QHBoxLayout;
  refRow->addWidget(reference_, 1);
  refRow->addWidget(browse_);

  auto* dpoForm = new QFormLayout(dpo_);
  dpoForm->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  dpoForm->addRow(tr("pref_beta:"), b->real("pref_beta", &RunConfig::pref_beta, 0, 100, 3));
  dpoForm->addRow(tr("pref_loss:"), loss_);
  dpoForm->addRow(tr("pref_ftx:"), b->real("pref_ftx", &RunConfig::pref_ftx, 0, 100, 3));
  dpoForm->addRow(tr("simpo_gamma:"), gamma_);
  dpoForm->addRow(tr("dpo_label_smoothing:"), smoothing_);
  dpoForm->addRow(tr("kto_chosen_weight:"), chosenWeight_);
  dpoForm->addRow(tr("kto_rejected_weight:"), rejectedWeight_);
  dpoForm->addRow(tr("ref_model:"), refRow);
  precompute_ = b->flag("precompute_ref_logps", &RunConfig::precompute_ref_logps,
                        tr("precompute_ref_logps: reference log-probs in one pass before "
                           "training (no reference model in GPU memory)"));
  dpoForm->addRow(precompute_);

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  form->addRow(tr("stage:"), stage_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(dpo_);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);

  connect(browse_, &QPushButton::clicked, this, &MethodPage::browseReference);
  connect(draft, &RunDraft::changed, this, &MethodPage::updateEnabled);
  updateEnabled();
  refresh();
}

void MethodPage::updateEnabled() {
  const RunConfig& c = draft()->config();
  const bool dpo = c.stage == studio::Stage::Dpo, kto = c.stage == studio::Stage::Kto;
  dpo_->setEnabled(dpo || kto);
  loss_->setEnabled(dpo);
  smoothing_->setEnabled(dpo && c.pref_loss == studio::PrefLoss::Sigmoid);
  gamma_->setEnabled(dpo && c.pref_loss == studio::PrefLoss::Simpo);
  chosenWeight_->setEnabled(kto);
  rejectedWeight_->setEnabled(kto);
  // orpo and simpo build no reference model.
  const bool reference = c.uses_reference();
  reference_->setEnabled(reference);
  browse_->setEnabled(reference);
  precompute_->setEnabled(reference);
}

void MethodPage::browseReference() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Reference model folder"),
                                                        draft()->baseDir());
  if (!dir.isEmpty()) reference_->setText(dir);
}

}  // namespace studio::ui
