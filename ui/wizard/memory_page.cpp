#include "studio/ui/wizard/memory_page.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "latest_job.h"
#include "studio/config/validate.h"
#include "studio/ui/base/local_path.h"
#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/length_plan_chart.h"
#include "studio/ui/wizard/memory_bar.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/sp_choice.h"

namespace studio::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString gib(double bytes) {
  return QString::fromStdString(studio::format_gib(bytes));
}

// 1048576 -> "1,048,576"
QString tokens(int64_t n) {
  QString digits = QString::number(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, QLatin1Char(','));
  return digits;
}

// The long-sequence options the page weighs, each switched the other way in `c`.
std::vector<std::pair<QString, bool>> switch_options(const studio::RunConfig& c,
                                                     const studio::ZeroRequest& z) {
  std::vector<std::pair<QString, bool>> out = {
      {QStringLiteral("gradient_checkpointing"), c.gradient_checkpointing},
      {QStringLiteral("offload_activations"), c.offload_activations},
      {QStringLiteral("tiled_mlp"), c.tiled_mlp},
  };
  // ZeRO-3 with both offloads: offered where the run does not have it yet.
  if (!(z.stage == 3 && z.offload_param))
    out.emplace_back(QStringLiteral("zero_stage 3 + offload"), false);
  return out;
}

studio::RunConfig switched(studio::RunConfig c, const QString& option) {
  if (option == QLatin1String("gradient_checkpointing")) {
    c.gradient_checkpointing = !c.gradient_checkpointing;
    // Offloaded activations are checkpointed ones: without checkpointing, none.
    if (!c.gradient_checkpointing) c.offload_activations = false;
  } else if (option == QLatin1String("offload_activations")) {
    c.offload_activations = !c.offload_activations;
    if (c.offload_activations) c.gradient_checkpointing = true;
  } else if (option == QLatin1String("tiled_mlp")) {
    c.tiled_mlp = !c.tiled_mlp;
  } else {
    c.zero_stage = 3;
    c.offload_optimizer = c.offload_param = true;
  }
  return c;
}

}  // namespace

MemoryPage::MemoryPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft,
                 {QStringLiteral("offload_activations"), QStringLiteral("tiled_mlp"),
                  QStringLiteral("tiled_mlp_budget_mib")},
                 parent),
      gpu_(new QDoubleSpinBox),
      bar_(new MemoryBar),
      verdict_(new QLabel),
      details_(new QLabel),
      notes_(new QPlainTextEdit),
      smallest_(new QPushButton(tr("&Smallest SP size that fits"))),
      longest_(new QLabel),
      gains_(new QTableWidget(0, 3)),
      planChart_(new LengthPlanChart),
      planTable_(new QTableWidget(0, 0)),
      planUse_(new QPushButton(tr("&Use this point"))),
      tabs_(new QTabWidget),
      job_(std::make_unique<LatestJob<MemoryOutcome>>(
          this, [this](const MemoryOutcome& o) { show(o); })) {
  setTitle(tr("Memory"));
  setSubTitle(tr("What one GPU will hold, estimated from the model's shape and the settings."));
  gpu_->setObjectName(QStringLiteral("gpuMemory"));
  gpu_->setAccessibleName(tr("GPU memory"));
  gpu_->setRange(1, 4096);
  gpu_->setDecimals(0);
  gpu_->setSuffix(tr(" GiB"));
  gpu_->setValue(kDefaultGpuGiB);
  smallest_->setObjectName(QStringLiteral("smallestSp"));
  verdict_->setObjectName(QStringLiteral("verdict"));
  QFont bold = verdict_->font();
  bold.setBold(true);
  verdict_->setFont(bold);
  for (QLabel* label : {verdict_, details_}) {
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  }
  notes_->setObjectName(QStringLiteral("notes"));
  notes_->setAccessibleName(tr("Memory notes"));
  notes_->setReadOnly(true);

  longest_->setObjectName(QStringLiteral("longest"));
  longest_->setWordWrap(true);
  gains_->setObjectName(QStringLiteral("optionGains"));
  gains_->setAccessibleName(tr("What each option saves"));
  gains_->setHorizontalHeaderLabels({tr("Option"), tr("Now"), tr("Longest cutoff_len switched")});
  gains_->horizontalHeader()->setStretchLastSection(true);
  gains_->verticalHeader()->hide();
  gains_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  gains_->setSelectionMode(QAbstractItemView::NoSelection);
  gains_->setMaximumHeight(gains_->fontMetrics().height() * 8);
  auto* longGroup = new QGroupBox(tr("Longest sequence"));
  auto* longLayout = new QVBoxLayout(longGroup);
  auto* switches = new QHBoxLayout;
  FieldBindings* b = bindings();
  switches->addWidget(b->flag("offload_activations", &studio::RunConfig::offload_activations,
                              tr("offload_activations")));
  switches->addWidget(b->flag("tiled_mlp", &studio::RunConfig::tiled_mlp, tr("tiled_mlp")));
  switches->addStretch(1);
  longLayout->addLayout(switches);
  longLayout->addWidget(longest_);
  longLayout->addWidget(gains_);

  planTable_->setObjectName(QStringLiteral("planTable"));
  planTable_->setAccessibleName(tr("Longest cutoff_len by way of running and number of GPUs"));
  planTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  planTable_->setSelectionMode(QAbstractItemView::SingleSelection);
  planTable_->setSelectionBehavior(QAbstractItemView::SelectItems);
  planTable_->setMaximumHeight(planTable_->fontMetrics().height() * 16);
  planUse_->setObjectName(QStringLiteral("planUse"));
  planUse_->setEnabled(false);
  auto* planGroup = new QGroupBox(tr("Length planner: the longest cutoff_len against the number "
                                     "of GPUs (%1 a node)")
                                      .arg(kPlanGpusPerNode));
  auto* planLayout = new QVBoxLayout(planGroup);
  planLayout->addWidget(planChart_, 2);
  planLayout->addWidget(planTable_, 1);
  auto* planButtons = new QHBoxLayout;
  planButtons->addStretch(1);
  planButtons->addWidget(planUse_);
  planLayout->addLayout(planButtons);

  auto* top = new QHBoxLayout;
  auto* gpuLabel = new QLabel(tr("&GPU memory:"));
  gpuLabel->setBuddy(gpu_);
  top->addWidget(gpuLabel);
  top->addWidget(gpu_);
  top->addStretch(1);
  top->addWidget(smallest_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(bar_, 1);
  layout->addWidget(verdict_);
  layout->addWidget(details_);
  // The longest sequence, the planner and the assumptions share the space below the bar.
  tabs_->setObjectName(QStringLiteral("memoryTabs"));
  tabs_->addTab(longGroup, tr("&Longest sequence"));
  tabs_->addTab(planGroup, tr("Length &planner"));
  tabs_->addTab(notes_, tr("&Assumptions"));
  layout->addWidget(tabs_, 2);
  layout->addWidget(messagesWidget());

  connect(gpu_, &QDoubleSpinBox::valueChanged, this, &MemoryPage::request);
  connect(draft, &RunDraft::validated, this, &MemoryPage::request);
  connect(smallest_, &QPushButton::clicked, this, &MemoryPage::applySmallest);
  connect(planChart_, &LengthPlanChart::pointChosen, this, &MemoryPage::applyPlanPoint);
  connect(planTable_, &QTableWidget::currentCellChanged, this, [this](int row, int column) {
    const bool fits = outcome_ && row >= 0 && column >= 0 &&
                      row < int(outcome_->plan.lines.size()) &&
                      column < int(outcome_->plan.gpu_counts.size()) &&
                      outcome_->plan.lines[size_t(row)].points[size_t(column)].longest;
    planUse_->setEnabled(fits);
  });
  connect(planUse_, &QPushButton::clicked, this,
          [this] { applyPlanPoint(planTable_->currentRow(), planTable_->currentColumn()); });
  connect(planTable_, &QTableWidget::cellActivated, this, &MemoryPage::applyPlanPoint);
  request();
  refresh();
}

MemoryPage::~MemoryPage() = default;

bool MemoryPage::isBusy() const {
  return job_->busy();
}

// Runs after each validation, which brings the model for the current config.
void MemoryPage::request() {
  const auto& model = draft()->model();
  if (!model) {
    outcome_.reset();
    bar_->clearEstimate();
    verdict_->clear();
    details_->setText(tr("The estimate needs the model's config.json (Model page)."));
    notes_->clear();
    longest_->clear();
    gains_->setRowCount(0);
    planChart_->clearPlan();
    planTable_->setRowCount(0);
    planUse_->setEnabled(false);
    smallest_->setEnabled(false);
    return;
  }
  const studio::RunConfig cfg = draft()->config();
  const studio::ModelInfo info = *model;
  studio::EstimateOptions opt;
  opt.nproc_per_node = draft()->processesPerNode();
  opt.nnodes = draft()->nodes();
  opt.gpu_capacity_bytes = gpu_->value() * kGiB;
  const std::string deepspeed = cfg.deepspeed ? localPath(draft()->resolve(*cfg.deepspeed)) : "";
  job_->request([cfg, info, opt, deepspeed]() mutable {
    MemoryOutcome out;
    if (!deepspeed.empty()) {
      std::string error;
      opt.deepspeed = studio::read_deepspeed_json(deepspeed, error);
      out.deepspeedError = QString::fromStdString(error);
    }
    out.estimate = studio::estimate_memory(cfg, info, opt);
    out.smallestFittingSp = studio::smallest_fitting_sp(cfg, info, opt);
    out.longestCutoff = studio::longest_fitting_cutoff(cfg, info, opt);
    for (const auto& [option, on] : switch_options(cfg, studio::zero_request(cfg, opt.deepspeed)))
      out.gains.push_back(
          {option, on, studio::longest_fitting_cutoff(switched(cfg, option), info, opt)});
    out.plan = studio::plan_lengths(cfg, info, opt, kPlanGpusPerNode, 64);
    return out;
  });
}

void MemoryPage::show(const MemoryOutcome& outcome) {
  if (!draft()->model()) return;  // the model went away while this was estimated
  outcome_ = outcome;
  const studio::MemoryEstimate& e = *outcome.estimate;
  bar_->setEstimate(e);
  const double total = e.bytes.total();
  verdict_->setText(
      e.fits() ? tr("Fits: %1 of %2 per GPU (%3 to spare).")
                     .arg(gib(total), gib(e.capacity_bytes), gib(e.capacity_bytes - total))
               : tr("Does not fit by %1: %2 needed per GPU, %3 there.")
                     .arg(gib(total - e.capacity_bytes), gib(total), gib(e.capacity_bytes)));
  QString details = tr("World size %1, sequence parallel %2 (Ulysses %3 x ring %4), %5 tokens per "
                       "GPU per micro-batch, ZeRO stage %6: %7 bytes of model state per parameter "
                       "on the GPU.")
                        .arg(e.world_size)
                        .arg(e.sp_size)
                        .arg(e.ulysses_degree)
                        .arg(e.ring_degree)
                        .arg(e.tokens_per_rank)
                        .arg(e.zero_stage)
                        .arg(e.bytes_per_param, 0, 'g', 3);
  if (e.offloaded_bytes > 0)
    details += tr(" Offloaded to host memory: %1 per rank.").arg(gib(e.offloaded_bytes));
  if (e.host_activation_bytes > 0)
    details += tr(" Activations in host memory: %1 per rank.").arg(gib(e.host_activation_bytes));
  if (e.checkpoint_host_bytes_rank0 > 0)
    details += tr(" While a checkpoint is written: %1 of host memory on rank 0, %2 on each other "
                  "rank.")
                   .arg(gib(e.checkpoint_host_bytes_rank0), gib(e.checkpoint_host_bytes_other));
  details += tr(" Each process also holds about %1 of host memory of its own (LibTorch's libraries "
                "and operator registry, memory the C library keeps after frees), not counted "
                "above.")
                 .arg(gib(e.process_host_bytes));
  details_->setText(details);
  const int64_t cutoff = draft()->config().cutoff_len;
  longest_->setText(
      outcome.longestCutoff
          ? tr("Longest cutoff_len that fits in %1: %2 tokens (now %3).")
                .arg(gib(e.capacity_bytes), tokens(*outcome.longestCutoff), tokens(cutoff))
          : tr("Not even the shortest cutoff_len the estimate tries (1024 tokens, or "
               "the SP padding) fits in %1 with these settings.")
                .arg(gib(e.capacity_bytes)));
  gains_->setRowCount(static_cast<int>(outcome.gains.size()));
  for (int row = 0; row < gains_->rowCount(); ++row) {
    const OptionGain& g = outcome.gains[static_cast<size_t>(row)];
    const QString longest = g.longestSwitched ? tokens(*g.longestSwitched) : tr("none fits");
    QString change;
    if (g.longestSwitched && outcome.longestCutoff && *outcome.longestCutoff > 0)
      change =
          tr(" (x%1)").arg(double(*g.longestSwitched) / double(*outcome.longestCutoff), 0, 'f', 2);
    gains_->setItem(row, 0, new QTableWidgetItem(g.option));
    gains_->setItem(row, 1, new QTableWidgetItem(g.on ? tr("on") : tr("off")));
    gains_->setItem(row, 2,
                    new QTableWidgetItem((g.on ? tr("off: ") : tr("on: ")) + longest + change));
  }
  gains_->resizeColumnsToContents();
  QStringList notes;
  if (!outcome.deepspeedError.isEmpty())
    notes << tr("deepspeed: %1; estimated without ZeRO.").arg(outcome.deepspeedError);
  for (const std::string& n : e.notes) notes << QString::fromStdString(n);
  notes_->setPlainText(notes.join(QLatin1Char('\n')));

  showPlan(outcome.plan);

  const int current = static_cast<int>(draft()->config().sequence_parallel_size);
  const auto& best = outcome.smallestFittingSp;
  smallest_->setEnabled(best && *best != current);
  smallest_->setToolTip(
      !best ? tr("No SP size this world allows fits in %1 GiB: add GPUs, enable ZeRO (deepspeed) "
                 "or gradient_checkpointing, or shorten cutoff_len.")
                  .arg(gpu_->value())
      : *best == current ? tr("SP %1 is already the smallest size that fits.").arg(current)
                         : tr("Sets sequence_parallel_size to %1.").arg(*best));
  emit estimated();
}

void MemoryPage::showPlan(const studio::LengthPlan& plan) {
  planChart_->setPlan(plan);
  const int row = planTable_->currentRow(), column = planTable_->currentColumn();
  planTable_->setRowCount(static_cast<int>(plan.lines.size()));
  planTable_->setColumnCount(static_cast<int>(plan.gpu_counts.size()));
  QStringList columns, rows;
  for (int g : plan.gpu_counts) columns << tr("%n GPU(s)", nullptr, g);
  for (size_t l = 0; l < plan.lines.size(); ++l) {
    rows << QString::fromStdString(plan.lines[l].option.label());
    for (size_t k = 0; k < plan.lines[l].points.size(); ++k) {
      const studio::PlanPoint& p = plan.lines[l].points[k];
      auto* item = new QTableWidgetItem(p.longest ? tokens(*p.longest) : tr("none"));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(p.longest ? tr("SP %1 (Ulysses %2) on %3 node(s)%4")
                                       .arg(p.sp)
                                       .arg(p.ulysses_degree)
                                       .arg(p.nodes)
                                       .arg(p.sp != p.gpus
                                                ? tr("; the heads allow no larger SP group, the "
                                                     "other GPUs are data parallel")
                                                : QString())
                                 : tr("Not even 1,024 tokens fit this way."));
      planTable_->setItem(int(l), int(k), item);
    }
  }
  planTable_->setHorizontalHeaderLabels(columns);
  planTable_->setVerticalHeaderLabels(rows);
  planTable_->resizeColumnsToContents();
  if (row >= 0 && column >= 0 && row < planTable_->rowCount() && column < planTable_->columnCount())
    planTable_->setCurrentCell(row, column);
}

void MemoryPage::applyPlanPoint(int line, int point) {
  if (!outcome_ || line < 0 || point < 0 || line >= int(outcome_->plan.lines.size())) return;
  const studio::PlanLine& l = outcome_->plan.lines[size_t(line)];
  if (point >= int(l.points.size()) || !l.points[size_t(point)].longest) return;
  const studio::PlanPoint p = l.points[size_t(point)];
  const studio::PlanOption option = l.option;
  draft()->setWorld(std::min(p.gpus, kPlanGpusPerNode), p.nodes);
  draft()->assign([&](studio::RunConfig& c) { c = studio::config_for(c, option, p); });
}

void MemoryPage::applySmallest() {
  if (!outcome_ || !outcome_->smallestFittingSp || !draft()->model()) return;
  const int sp = *outcome_->smallestFittingSp;
  const studio::ModelInfo model = *draft()->model();
  draft()->assign([&](studio::RunConfig& c) { setSpSize(c, &model, sp); });
}

QString MemoryPage::verdictText() const {
  return verdict_->text();
}

QString MemoryPage::detailsText() const {
  return details_->text();
}

QString MemoryPage::longestText() const {
  QString out = longest_->text();
  for (int row = 0; row < gains_->rowCount(); ++row)
    out += QLatin1Char('\n') + gains_->item(row, 0)->text() + QLatin1Char(' ') +
           gains_->item(row, 1)->text() + QStringLiteral(" -> ") + gains_->item(row, 2)->text();
  return out;
}

}  // namespace studio::ui
