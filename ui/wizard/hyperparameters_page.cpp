#include "studio/ui/wizard/hyperparameters_page.h"

#include <climits>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/run_draft.h"

namespace studio::ui {

using studio::RunConfig;

HyperparametersPage::HyperparametersPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft,
                 {QStringLiteral("learning_rate"), QStringLiteral("num_train_epochs"),
                  QStringLiteral("max_steps"), QStringLiteral("per_device_train_batch_size"),
                  QStringLiteral("gradient_accumulation_steps"),
                  QStringLiteral("lr_scheduler_type"), QStringLiteral("lr_scheduler_kwargs"),
                  QStringLiteral("warmup_ratio"), QStringLiteral("warmup_steps"),
                  QStringLiteral("weight_decay"), QStringLiteral("max_grad_norm"),
                  QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("pure_bf16"),
                  QStringLiteral("gradient_checkpointing"), QStringLiteral("logging_steps"),
                  QStringLiteral("save_steps"), QStringLiteral("save_total_limit"),
                  QStringLiteral("eval_strategy"), QStringLiteral("eval_steps"),
                  QStringLiteral("per_device_eval_batch_size"), QStringLiteral("seed"),
                  QStringLiteral("output_dir"), QStringLiteral("overwrite_output_dir")},
                 parent) {
  setTitle(tr("Hyperparameters"));
  setSubTitle(tr("LLaMA-Factory's defaults, as its YAML keys name them."));
  output_ = bindings()->text("output_dir", &RunConfig::output_dir);
  output_->setPlaceholderText(tr("saves/my-run"));
  auto* browse = new QPushButton(tr("B&rowse..."));
  connect(browse, &QPushButton::clicked, this, &HyperparametersPage::browseOutput);
  auto* outRow = new QHBoxLayout;
  outRow->addWidget(new QLabel(tr("output_dir:")));
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse);
  auto* columns = new QHBoxLayout;
  columns->addWidget(buildOptimisation(), 1);
  columns->addWidget(buildCheckpoints(), 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(outRow);
  layout->addLayout(columns);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);
  refresh();
}

QWidget* HyperparametersPage::buildOptimisation() {
  FieldBindings* b = bindings();
  auto* group = new QGroupBox(tr("Optimisation"));
  auto* form = new QFormLayout(group);
  form->addRow(tr("learning_rate:"), b->number("learning_rate", &RunConfig::learning_rate));
  form->addRow(tr("num_train_epochs:"),
               b->real("num_train_epochs", &RunConfig::num_train_epochs, 0, 1e6, 2));
  QSpinBox* steps = b->integer("max_steps", &RunConfig::max_steps, -1, INT_MAX);
  steps->setSpecialValueText(tr("off (epochs)"));
  form->addRow(tr("max_steps:"), steps);
  form->addRow(tr("per_device_train_batch_size:"),
               b->integer("per_device_train_batch_size", &RunConfig::per_device_train_batch_size,
                          0, 1 << 16));
  form->addRow(tr("gradient_accumulation_steps:"),
               b->integer("gradient_accumulation_steps", &RunConfig::gradient_accumulation_steps,
                          0, 1 << 16));
  form->addRow(tr("lr_scheduler_type:"),
               b->choice("lr_scheduler_type", &RunConfig::lr_scheduler_type,
                         {studio::LrScheduler::Linear, studio::LrScheduler::Cosine,
                          studio::LrScheduler::Constant, studio::LrScheduler::ConstantWithWarmup,
                          studio::LrScheduler::CosineWithMinLr}));
  form->addRow(tr("warmup_ratio:"), b->real("warmup_ratio", &RunConfig::warmup_ratio, 0, 1, 3));
  form->addRow(tr("weight_decay:"), b->real("weight_decay", &RunConfig::weight_decay, 0, 10, 4));
  form->addRow(tr("max_grad_norm:"),
               b->real("max_grad_norm", &RunConfig::max_grad_norm, 0, 1e6, 2));
  auto* precision = new QHBoxLayout;
  precision->addWidget(b->flag("bf16", &RunConfig::bf16, tr("bf16")));
  precision->addWidget(b->flag("fp16", &RunConfig::fp16, tr("fp16")));
  precision->addWidget(b->flag("pure_bf16", &RunConfig::pure_bf16, tr("pure_bf16")));
  form->addRow(tr("precision:"), precision);
  form->addRow(b->flag("gradient_checkpointing", &RunConfig::gradient_checkpointing,
                       tr("gradient_checkpointing: recompute each layer in backward")));
  form->addRow(tr("seed:"), b->integer("seed", &RunConfig::seed, -1, INT_MAX));
  return group;
}

QWidget* HyperparametersPage::buildCheckpoints() {
  FieldBindings* b = bindings();
  auto* group = new QGroupBox(tr("Checkpoints and evaluation"));
  auto* form = new QFormLayout(group);
  form->addRow(b->flag("overwrite_output_dir", &RunConfig::overwrite_output_dir,
                       tr("overwrite_output_dir: allow a non-empty folder")));
  form->addRow(tr("logging_steps:"),
               b->integer("logging_steps", &RunConfig::logging_steps, 0, INT_MAX));
  form->addRow(tr("save_steps:"), b->integer("save_steps", &RunConfig::save_steps, 0, INT_MAX));
  form->addRow(tr("save_total_limit:"),
               b->optionalInteger("save_total_limit", &RunConfig::save_total_limit, INT_MAX,
                                  tr("keep all")));
  form->addRow(tr("eval_strategy:"),
               b->choice("eval_strategy", &RunConfig::eval_strategy,
                         {studio::EvalStrategy::No, studio::EvalStrategy::Steps,
                          studio::EvalStrategy::Epoch}));
  form->addRow(tr("eval_steps:"), b->optionalInteger("eval_steps", &RunConfig::eval_steps,
                                                     INT_MAX, tr("= logging_steps")));
  form->addRow(tr("per_device_eval_batch_size:"),
               b->integer("per_device_eval_batch_size", &RunConfig::per_device_eval_batch_size,
                          0, 1 << 16));
  return group;
}

void HyperparametersPage::browseOutput() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Output folder"),
                                                        draft()->baseDir());
  if (!dir.isEmpty()) output_->setText(dir);
}

}  // namespace studio::ui
