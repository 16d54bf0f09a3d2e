#include "studio/ui/wizard/parallelism_page.h"

#include <algorithm>

#include <QComboBox>
#include <QFileDialog>
#include <QCheckBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "studio/config/sp_picture.h"
#include "studio/config/validate.h"
#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/sp_choice.h"
#include "studio/ui/wizard/sp_layout_view.h"

namespace studio::ui {

using studio::RunConfig;
using studio::SpMode;

namespace {

QString explain(SpMode mode) {
  switch (mode) {
    case SpMode::ZigzagRing:
      return ParallelismPage::tr(
          "zigzag-ring: key/value blocks travel around a ring of GPUs while attention is "
          "computed; any size that divides the world works, and zigzag chunks balance the causal "
          "work.");
    case SpMode::Ulysses:
      return ParallelismPage::tr(
          "ulysses: all-to-all swaps the sequence split for a head split, so each GPU attends "
          "over the whole sequence for some heads; the size must divide the attention heads.");
    case SpMode::Usp:
      return ParallelismPage::tr(
          "usp: Ulysses inside groups and a ring across them (Ulysses degree x ring degree = SP "
          "size): for sizes beyond the head count or spanning nodes.");
  }
  return {};
}

QSpinBox* countBox(const QString& name, int maximum) {
  auto* box = new QSpinBox;
  box->setObjectName(name);
  box->setRange(1, maximum);
  return box;
}

}  // namespace

ParallelismPage::ParallelismPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft,
                 {QStringLiteral("sequence_parallel_size"), QStringLiteral("sequence_parallel_mode"),
                  QStringLiteral("sequence_parallel_ulysses_degree"),
                  QStringLiteral("sequence_parallel_ring_degree"), QStringLiteral("deepspeed"),
                  QStringLiteral("zero_stage"), QStringLiteral("offload_optimizer"),
                  QStringLiteral("offload_param"), QStringLiteral("neat_packing")},
                 parent),
      nodes_(countBox(QStringLiteral("nnodes"), 4096)),
      gpus_(countBox(QStringLiteral("nproc_per_node"), 1024)),
      mode_(bindings()->choice("sequence_parallel_mode", &RunConfig::sequence_parallel_mode,
                               {SpMode::ZigzagRing, SpMode::Ulysses, SpMode::Usp})),
      explanation_(new QLabel),
      size_(new QComboBox),
      excluded_(new QLabel),
      splitLabel_(new QLabel(tr("Ulysses x ring:"))),
      split_(new QComboBox),
      deepspeed_(bindings()->optionalText("deepspeed", &RunConfig::deepspeed)),
      zeroStage_(bindings()->optionalInteger("zero_stage", &RunConfig::zero_stage, 3,
                                             tr("the deepspeed JSON's (none without one)"))),
      offloadOptimizer_(bindings()->flag("offload_optimizer", &RunConfig::offload_optimizer,
                                         tr("masters, AdamW states and gradient pieces in CPU memory"))),
      offloadParam_(bindings()->flag("offload_param", &RunConfig::offload_param,
                                     tr("ZeRO-3 weight pieces in CPU memory"))),
      layout_(new SpLayoutView) {
  setTitle(tr("Parallelism"));
  setSubTitle(tr("GPUs, and how many of them share one sequence (sequence parallelism)."));
  size_->setObjectName(QStringLiteral("sequence_parallel_size"));
  split_->setObjectName(QStringLiteral("usp_split"));
  explanation_->setObjectName(QStringLiteral("modeExplanation"));
  excluded_->setObjectName(QStringLiteral("excludedSizes"));
  for (QLabel* label : {explanation_, excluded_}) {
    label->setWordWrap(true);
    label->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);  // the form's full width
  }
  deepspeed_->setPlaceholderText(tr("none (no ZeRO)"));
  auto* browse = new QPushButton(tr("B&rowse..."));
  auto* dsRow = new QHBoxLayout;
  dsRow->addWidget(deepspeed_, 1);
  dsRow->addWidget(browse);

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  form->addRow(tr("Nodes:"), nodes_);
  form->addRow(tr("GPUs per node:"), gpus_);
  form->addRow(tr("sequence_parallel_mode:"), mode_);
  form->addRow(QString(), explanation_);
  form->addRow(tr("sequence_parallel_size:"), size_);
  form->addRow(QString(), excluded_);
  form->addRow(splitLabel_, split_);
  form->addRow(tr("deepspeed:"), dsRow);
  // ZeRO without a JSON (docs/SHARDING.md): the memory page shows what each choice buys.
  form->addRow(tr("zero_stage:"), zeroStage_);
  form->addRow(tr("offload_optimizer:"), offloadOptimizer_);
  form->addRow(tr("offload_param:"), offloadParam_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(layout_, 1);
  layout->addWidget(messagesWidget());

  auto world = [this] { this->draft()->setWorld(gpus_->value(), nodes_->value()); };
  connect(nodes_, &QSpinBox::valueChanged, this, world);
  connect(gpus_, &QSpinBox::valueChanged, this, world);
  // usp needs Ulysses x ring = SP size: switching to it picks the split the heads allow.
  connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
    const RunConfig& c = this->draft()->config();
    if (c.sequence_parallel_mode != SpMode::Usp ||
        c.sequence_parallel_ulysses_degree * c.sequence_parallel_ring_degree ==
            c.sequence_parallel_size)
      return;
    sizeChosen();
  });
  connect(size_, &QComboBox::currentIndexChanged, this, &ParallelismPage::sizeChosen);
  connect(split_, &QComboBox::currentIndexChanged, this, &ParallelismPage::splitChosen);
  connect(browse, &QPushButton::clicked, this, &ParallelismPage::browseDeepSpeed);
  connect(draft, &RunDraft::changed, this, &ParallelismPage::rebuild);
  connect(draft, &RunDraft::validated, this, &ParallelismPage::rebuild);
  rebuild();
  refresh();
}

// Everything here depends on the world, the mode and the model, so it is rebuilt from the draft.
void ParallelismPage::rebuild() {
  const RunConfig& c = draft()->config();
  const auto& model = draft()->model();
  {
    const QSignalBlocker a(nodes_), b(gpus_);
    nodes_->setValue(draft()->nodes());
    gpus_->setValue(draft()->processesPerNode());
  }
  explanation_->setText(explain(c.sequence_parallel_mode));

  const SpChoices choices = spChoices(c, model ? &*model : nullptr, draft()->worldSize());
  {
    const QSignalBlocker block(size_);
    size_->clear();
    for (int sp : choices.valid) size_->addItem(QString::number(sp), sp);
    const int current = static_cast<int>(c.sequence_parallel_size);
    if (size_->findData(current) < 0)
      size_->addItem(tr("%1 (not valid here)").arg(current), current);
    size_->setCurrentIndex(size_->findData(current));
  }
  QStringList left;
  for (const auto& e : choices.excluded) left << tr("%1: %2").arg(e.size).arg(e.reason);
  excluded_->setText(left.isEmpty() ? QString()
                                    : tr("Not offered for %1 - %2.")
                                          .arg(QString::fromUtf8(
                                              studio::to_string(c.sequence_parallel_mode).data()))
                                          .arg(left.join(QStringLiteral("; "))));
  excluded_->setVisible(!left.isEmpty());
  rebuildSplits();
  if (model)
    layout_->setPicture(studio::sp_picture(c, *model, draft()->processesPerNode(), draft()->nodes()),
                        model->num_layers);
  else
    layout_->clearPicture();
}

void ParallelismPage::rebuildSplits() {
  const RunConfig& c = draft()->config();
  const bool usp = c.sequence_parallel_mode == SpMode::Usp;
  splitLabel_->setVisible(usp);
  split_->setVisible(usp);
  const QSignalBlocker block(split_);
  split_->clear();
  if (!usp) return;
  const auto& model = draft()->model();
  const int sp = static_cast<int>(std::max<int64_t>(1, c.sequence_parallel_size));
  for (int u : studio::divisors(sp)) {
    split_->addItem(tr("%1 x %2").arg(u).arg(sp / u), u);
    // Splits the heads do not allow stay visible but cannot be chosen.
    if (model && studio::ulysses_heads(*model, u) != studio::UlyssesHeads::Ok) {
      auto* items = qobject_cast<QStandardItemModel*>(split_->model());
      items->item(split_->count() - 1)->setEnabled(false);
    }
  }
  const int u = static_cast<int>(c.sequence_parallel_ulysses_degree);
  if (u * c.sequence_parallel_ring_degree == sp && split_->findData(u) >= 0) {
    split_->setCurrentIndex(split_->findData(u));
  } else {
    split_->addItem(tr("%1 x %2 (does not make %3)")
                        .arg(u)
                        .arg(c.sequence_parallel_ring_degree)
                        .arg(sp),
                    -1);
    split_->setCurrentIndex(split_->count() - 1);
  }
}

void ParallelismPage::sizeChosen() {
  const int sp = size_->currentData().toInt();
  const auto& model = draft()->model();
  draft()->edit([&](RunConfig& c) { setSpSize(c, model ? &*model : nullptr, sp); });
}

void ParallelismPage::splitChosen() {
  const int u = split_->currentData().toInt();
  if (u < 1) return;
  draft()->edit([&](RunConfig& c) {
    c.sequence_parallel_ulysses_degree = u;
    c.sequence_parallel_ring_degree = std::max<int64_t>(1, c.sequence_parallel_size) / u;
  });
}

std::vector<int> ParallelismPage::offeredSpSizes() const {
  const auto& model = draft()->model();
  return spChoices(draft()->config(), model ? &*model : nullptr, draft()->worldSize()).valid;
}

bool ParallelismPage::selectSpSize(int size) {
  const int index = size_->findData(size);
  if (index < 0) return false;
  size_->setCurrentIndex(index);
  return true;
}

QString ParallelismPage::excludedNote() const {
  return excluded_->text();
}

QString ParallelismPage::modeExplanation() const {
  return explanation_->text();
}

void ParallelismPage::browseDeepSpeed() {
  const QString file = QFileDialog::getOpenFileName(
      this, tr("DeepSpeed config"), draft()->baseDir(), tr("JSON (*.json);;All files (*)"));
  if (!file.isEmpty()) deepspeed_->setText(file);
}

}  // namespace studio::ui
