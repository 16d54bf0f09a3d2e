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
                  QStringLiteral("mask_history"), QStringLiteral("lora_rank"),
                  QStringLiteral("lora_alpha"), QStringLiteral("lora_dropout"),
                  QStringLiteral("lora_target"), QStringLiteral("additional_target"),
                  QStringLiteral("use_rslora"), QStringLiteral("use_dora"),
                  QStringLiteral("quantization_bit"), QStringLiteral("quantization_type"),
                  QStringLiteral("double_quantization"),
                  QStringLiteral("adapter_name_or_path"), QStringLiteral("create_new_adapter"),
                  QStringLiteral("freeze_trainable_layers"),
                  QStringLiteral("freeze_trainable_modules"),
                  QStringLiteral("freeze_extra_modules")},
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
      finetuning_(bindings()->choice("finetuning_type", &RunConfig::finetuning_type,
                                     {studio::FinetuningType::Full, studio::FinetuningType::Lora,
                                      studio::FinetuningType::Freeze})),
      reference_(bindings()->optionalText("ref_model", &RunConfig::ref_model)),
      browse_(new QPushButton(tr("B&rowse..."))),
      dpo_(new QGroupBox(tr("Preference (DPO, KTO)"))),
      lora_(new QWidget),
      freeze_(new QWidget) {
  setTitle(tr("Method"));
  setSubTitle(tr("SFT, DPO on chosen/rejected pairs (orpo, simpo: no reference), rm (a reward "
                 "model), kto (desirable or not) or pt (plain texts); every weight (full), "
                 "LoRA/QLoRA adapters (PEFT files) or some layers (freeze)."));
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
  layout->addWidget(buildAdapters());
  layout->addWidget(dpo_);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);

  connect(browse_, &QPushButton::clicked, this, &MethodPage::browseReference);
  connect(draft, &RunDraft::changed, this, &MethodPage::updateEnabled);
  updateEnabled();
  refresh();
}

QGroupBox* MethodPage::buildAdapters() {
  FieldBindings* b = bindings();
  auto* loraForm = new QFormLayout(lora_);
  loraForm->setContentsMargins(0, 0, 0, 0);
  loraForm->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  loraForm->addRow(tr("lora_rank:"), b->integer("lora_rank", &RunConfig::lora_rank, 1, 65536));
  QLineEdit* alpha = b->optionalNumber("lora_alpha", &RunConfig::lora_alpha);
  alpha->setPlaceholderText(tr("2 x rank"));
  loraForm->addRow(tr("lora_alpha:"), alpha);
  loraForm->addRow(tr("lora_dropout:"),
                   b->real("lora_dropout", &RunConfig::lora_dropout, 0, 1, 3));
  QLineEdit* target = b->list("lora_target", &RunConfig::lora_target);
  target->setPlaceholderText(tr("all"));
  loraForm->addRow(tr("lora_target:"), target);
  QLineEdit* additional = b->list("additional_target", &RunConfig::additional_target);
  additional->setPlaceholderText(tr("none (e.g. embed_tokens,lm_head)"));
  loraForm->addRow(tr("additional_target:"), additional);
  loraForm->addRow(b->flag("use_rslora", &RunConfig::use_rslora,
                           tr("use_rslora: scale by lora_alpha / sqrt(lora_rank)")));
  loraForm->addRow(b->flag("use_dora", &RunConfig::use_dora,
                           tr("use_dora: weight-decomposed LoRA (DoRA)")));
  // QLoRA: the base's linear weights in bitsandbytes' 4-bit format.
  loraForm->addRow(tr("quantization_bit:"),
                   b->optionalInteger("quantization_bit", &RunConfig::quantization_bit, 8,
                                      tr("none: the base at its own precision")));
  loraForm->addRow(tr("quantization_type:"),
                   b->textChoice("quantization_type", &RunConfig::quantization_type, {"nf4", "fp4"}));
  loraForm->addRow(b->flag("double_quantization", &RunConfig::double_quantization,
                           tr("double_quantization: the block scales in 8 bits too")));
  QLineEdit* adapters = b->list("adapter_name_or_path", &RunConfig::adapter_name_or_path);
  adapters->setPlaceholderText(tr("none: new adapters (PEFT folders, comma-separated)"));
  loraForm->addRow(tr("adapter_name_or_path:"), adapters);
  loraForm->addRow(b->flag("create_new_adapter", &RunConfig::create_new_adapter,
                           tr("create_new_adapter: merge those adapters into the base and "
                              "train a new one")));

  auto* freezeForm = new QFormLayout(freeze_);
  freezeForm->setContentsMargins(0, 0, 0, 0);
  freezeForm->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  freezeForm->addRow(tr("freeze_trainable_layers:"),
                     b->integer("freeze_trainable_layers", &RunConfig::freeze_trainable_layers,
                                -1000, 1000));
  QLineEdit* modules = b->list("freeze_trainable_modules", &RunConfig::freeze_trainable_modules);
  modules->setPlaceholderText(tr("all"));
  freezeForm->addRow(tr("freeze_trainable_modules:"), modules);
  QLineEdit* extra = b->list("freeze_extra_modules", &RunConfig::freeze_extra_modules);
  extra->setPlaceholderText(tr("none (e.g. embed_tokens,norm)"));
  freezeForm->addRow(tr("freeze_extra_modules:"), extra);

  auto* group = new QGroupBox(tr("Adapters"));
  auto* form = new QFormLayout(group);
  form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  form->addRow(tr("finetuning_type:"), finetuning_);
  form->addRow(lora_);
  form->addRow(freeze_);
  return group;
}

void MethodPage::updateEnabled() {
  const RunConfig& c = draft()->config();
  lora_->setVisible(c.finetuning_type == studio::FinetuningType::Lora);
  freeze_->setVisible(c.finetuning_type == studio::FinetuningType::Freeze);
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
