#include "studio/ui/wizard/memory_page.h"

#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "latest_job.h"
#include "studio/ui/local_path.h"
#include "studio/config/validate.h"
#include "studio/ui/wizard/memory_bar.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/sp_choice.h"

namespace studio::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString gib(double bytes) {
  return QString::fromStdString(studio::format_gib(bytes));
}

}  // namespace

MemoryPage::MemoryPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft, {}, parent),
      gpu_(new QDoubleSpinBox),
      bar_(new MemoryBar),
      verdict_(new QLabel),
      details_(new QLabel),
      notes_(new QPlainTextEdit),
      smallest_(new QPushButton(tr("&Smallest SP size that fits"))),
      job_(std::make_unique<LatestJob<MemoryOutcome>>(
          this, [this](const MemoryOutcome& o) { show(o); })) {
  setTitle(tr("Memory"));
  setSubTitle(tr("What one GPU will hold, estimated from the model's shape and the settings."));
  gpu_->setObjectName(QStringLiteral("gpuMemory"));
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
  notes_->setReadOnly(true);
  notes_->setMaximumHeight(notes_->fontMetrics().height() * 6);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("GPU memory:")));
  top->addWidget(gpu_);
  top->addStretch(1);
  top->addWidget(smallest_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(bar_, 1);
  layout->addWidget(verdict_);
  layout->addWidget(details_);
  layout->addWidget(notes_);
  layout->addWidget(messagesWidget());

  connect(gpu_, &QDoubleSpinBox::valueChanged, this, &MemoryPage::request);
  connect(draft, &RunDraft::validated, this, &MemoryPage::request);
  connect(smallest_, &QPushButton::clicked, this, &MemoryPage::applySmallest);
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
    return out;
  });
}

void MemoryPage::show(const MemoryOutcome& outcome) {
  if (!draft()->model()) return;  // the model went away while this was estimated
  outcome_ = outcome;
  const studio::MemoryEstimate& e = *outcome.estimate;
  bar_->setEstimate(e);
  const double total = e.bytes.total();
  verdict_->setText(e.fits() ? tr("Fits: %1 of %2 per GPU (%3 to spare).")
                                   .arg(gib(total), gib(e.capacity_bytes),
                                        gib(e.capacity_bytes - total))
                             : tr("Does not fit by %1: %2 needed per GPU, %3 there.")
                                   .arg(gib(total - e.capacity_bytes), gib(total),
                                        gib(e.capacity_bytes)));
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
  details_->setText(details);
  QStringList notes;
  if (!outcome.deepspeedError.isEmpty())
    notes << tr("deepspeed: %1; estimated without ZeRO.").arg(outcome.deepspeedError);
  for (const std::string& n : e.notes) notes << QString::fromStdString(n);
  notes_->setPlainText(notes.join(QLatin1Char('\n')));

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

void MemoryPage::applySmallest() {
  if (!outcome_ || !outcome_->smallestFittingSp || !draft()->model()) return;
  const int sp = *outcome_->smallestFittingSp;
  const studio::ModelInfo model = *draft()->model();
  draft()->assign([&](studio::RunConfig& c) { setSpSize(c, &model, sp); });
}

QString MemoryPage::verdictText() const {
  return verdict_->text();
}

QString MemoryPage::detailsText() const { return details_->text(); }

}  // namespace studio::ui
