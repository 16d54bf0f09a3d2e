#include "studio/ui/wizard/sweep_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QTableWidget>
#include <QVBoxLayout>

#include "latest_job.h"
#include "studio/config/sweep.h"

namespace studio::ui {
namespace {

enum Column { KeyColumn, ValuesColumn };

QString number(double v) { return QString::number(v, 'g', 6); }

// The work of one check, on QtConcurrent's pool: everything by value.
SweepCheck checkSweep(const studio::RunConfig& base, const QString& baseDir, int nproc,
                      bool forTraining, const QStringList& axes, bool list) {
  SweepCheck out;
  std::vector<studio::SweepPoint> points;
  try {
    studio::SweepSpec spec;
    spec.mode = list ? studio::SweepMode::List : studio::SweepMode::Grid;
    for (const QString& axis : axes) spec.axes.push_back(studio::parse_sweep_axis(axis.toStdString()));
    points = studio::expand_sweep(spec);
  } catch (const std::exception& e) {
    out.error = QString::fromStdString(e.what());
    return out;
  }
  studio::ValidateOptions vo;
  vo.nproc_per_node = nproc;
  vo.for_training = forTraining;  // as each point's studio-train train checks it, here
  vo.base_dir = baseDir.toStdString();
  for (const studio::SweepPoint& p : points) {
    out.points << QString::fromStdString(p.name);
    // The point's own folder does not exist yet, as when studio-train sweep checks it.
    const std::string folder = QDir(baseDir).filePath(QStringLiteral(".sweep-check/") +
                                                      QString::fromStdString(p.name))
                                   .toStdString();
    const studio::SweepPointConfig pc = studio::sweep_point_config(base, p, folder, vo);
    for (const studio::Diagnostic& d : pc.diagnostics)
      if (d.severity == studio::Severity::Error)
        out.problems << QString::fromStdString(p.name + ": " + d.format());
  }
  return out;
}

}  // namespace

SweepDialog::SweepDialog(const studio::RunConfig& base, const QString& baseDir, int nproc,
                         QWidget* parent, bool onThisMachine)
    : QDialog(parent),
      base_(base),
      baseDir_(baseDir),
      nproc_(std::max(1, nproc)),
      onThisMachine_(onThisMachine) {
  setWindowTitle(tr("Sweep"));
  setObjectName(QStringLiteral("sweepDialog"));
  job_ = std::make_unique<LatestJob<SweepCheck>>(this, [this](const SweepCheck& c) { showCheck(c); });

  auto* intro = new QLabel(
      onThisMachine
          ? tr("Each point is this config with the values below set, trained as a run of its own "
               "on %n process(es), in a folder of the sweep's.",
               nullptr, nproc_)
          : tr("Each point is this config with the values below set, trained as a run of its own "
               "on %n process(es): one task of a Slurm job array.",
               nullptr, nproc_));
  intro->setWordWrap(true);

  axes_ = new QTableWidget(0, 2);
  axes_->setObjectName(QStringLiteral("sweepAxes"));
  axes_->setAccessibleName(tr("Keys to vary"));
  axes_->setHorizontalHeaderLabels({tr("Key"), tr("Values (comma-separated)")});
  axes_->horizontalHeader()->setSectionResizeMode(KeyColumn, QHeaderView::ResizeToContents);
  axes_->horizontalHeader()->setStretchLastSection(true);
  axes_->verticalHeader()->hide();
  axes_->setTabKeyNavigation(false);  // Tab leaves the table; arrows move inside it
  axes_->setMinimumHeight(110);
  auto* keysLabel = new QLabel(tr("&Keys to vary:"));
  keysLabel->setBuddy(axes_);

  add_ = new QPushButton(tr("&Add key"));
  add_->setObjectName(QStringLiteral("sweepAddKey"));
  remove_ = new QPushButton(tr("&Remove key"));
  remove_->setObjectName(QStringLiteral("sweepRemoveKey"));
  connect(add_, &QPushButton::clicked, this, [this] {
    const int row = axes_->rowCount();
    axes_->insertRow(row);
    axes_->setItem(row, KeyColumn, new QTableWidgetItem(QString()));
    axes_->setItem(row, ValuesColumn, new QTableWidgetItem(QString()));
    axes_->setCurrentCell(row, KeyColumn);
    axes_->editItem(axes_->item(row, KeyColumn));
  });
  connect(remove_, &QPushButton::clicked, this, [this] {
    const int row = axes_->currentRow();
    if (row >= 0) axes_->removeRow(row);
    scheduleCheck();
  });
  auto* rowButtons = new QHBoxLayout;
  rowButtons->addWidget(add_);
  rowButtons->addWidget(remove_);
  rowButtons->addStretch(1);

  mode_ = new QComboBox;
  mode_->setObjectName(QStringLiteral("sweepMode"));
  mode_->addItem(tr("Every combination (grid)"), false);
  mode_->addItem(tr("The i-th values together (list)"), true);
  parallel_ = new QSpinBox;
  parallel_->setObjectName(QStringLiteral("sweepParallel"));
  parallel_->setRange(1, 64);
  parallel_->setToolTip(tr("Points trained at once. On GPUs each gets %n of them, so at most the "
                           "GPUs over that run at once; on the CPU they share the cores.",
                           nullptr, nproc_));
  name_ = new QLineEdit;
  name_->setObjectName(QStringLiteral("sweepName"));
  const QString output = QFileInfo(QString::fromStdString(base.output_dir)).fileName();
  name_->setText((output.isEmpty() ? QStringLiteral("run") : output) + QStringLiteral("-sweep"));
  auto* form = new QFormLayout;
  form->addRow(tr("&Points:"), mode_);
  form->addRow(tr("At &once:"), parallel_);
  form->addRow(tr("&Name:"), name_);

  points_ = new QListWidget;
  points_->setObjectName(QStringLiteral("sweepPoints"));
  points_->setAccessibleName(tr("The sweep's points"));
  points_->setMinimumHeight(120);
  summary_ = new QLabel;
  summary_->setObjectName(QStringLiteral("sweepSummary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
  start_ = buttons->addButton(tr("&Start Sweep"), QDialogButtonBox::AcceptRole);
  start_->setObjectName(QStringLiteral("sweepStart"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addWidget(keysLabel);
  layout->addWidget(axes_);
  layout->addLayout(rowButtons);
  layout->addLayout(form);
  layout->addWidget(new QLabel(tr("Points, each checked as its run will be:")));
  layout->addWidget(points_, 1);
  layout->addWidget(summary_);
  layout->addWidget(buttons);

  debounce_.setSingleShot(true);
  debounce_.setInterval(250);
  connect(&debounce_, &QTimer::timeout, this, &SweepDialog::runCheck);
  connect(axes_, &QTableWidget::itemChanged, this, &SweepDialog::scheduleCheck);
  connect(mode_, &QComboBox::currentIndexChanged, this, &SweepDialog::scheduleCheck);
  connect(name_, &QLineEdit::textChanged, this, &SweepDialog::scheduleCheck);

  // A start worth editing: the learning rate at a third, once and three times its value.
  const double lr = base.learning_rate;
  setAxes({QStringLiteral("learning_rate=%1,%2,%3").arg(number(lr / 3), number(lr), number(lr * 3))});
  resize(560, 520);
}

SweepDialog::~SweepDialog() = default;

void SweepDialog::setAxes(const QStringList& axes) {
  const QSignalBlocker block(axes_);
  axes_->setRowCount(0);
  for (const QString& axis : axes) {
    const int eq = axis.indexOf(QLatin1Char('='));
    const int row = axes_->rowCount();
    axes_->insertRow(row);
    axes_->setItem(row, KeyColumn, new QTableWidgetItem(eq < 0 ? axis : axis.left(eq)));
    axes_->setItem(row, ValuesColumn, new QTableWidgetItem(eq < 0 ? QString() : axis.mid(eq + 1)));
  }
  scheduleCheck();
}

QStringList SweepDialog::axisTexts() const {
  QStringList out;
  for (int row = 0; row < axes_->rowCount(); ++row) {
    const QTableWidgetItem* key = axes_->item(row, KeyColumn);
    const QTableWidgetItem* values = axes_->item(row, ValuesColumn);
    const QString k = key ? key->text().trimmed() : QString();
    const QString v = values ? values->text().trimmed() : QString();
    if (k.isEmpty() && v.isEmpty()) continue;  // a row just added
    out << k + QLatin1Char('=') + v;
  }
  return out;
}

SweepChoice SweepDialog::choice() const {
  SweepChoice c;
  c.axes = axisTexts();
  c.list = mode_->currentData().toBool();
  c.parallel = parallel_->value();
  c.name = name_->text().trimmed();
  return c;
}

bool SweepDialog::isChecking() const { return debounce_.isActive() || job_->busy(); }

void SweepDialog::scheduleCheck() {
  start_->setEnabled(false);
  summary_->setText(tr("Checking the points ..."));
  debounce_.start();
}

void SweepDialog::runCheck() {
  job_->request([base = base_, dir = baseDir_, nproc = nproc_, local = onThisMachine_,
                 axes = axisTexts(), list = mode_->currentData().toBool()] {
    return checkSweep(base, dir, nproc, local, axes, list);
  });
}

void SweepDialog::showCheck(const SweepCheck& check) {
  if (debounce_.isActive()) return;  // the table changed again: a newer check follows
  check_ = check;
  points_->clear();
  int invalid = 0;
  for (const QString& p : check.points) {
    auto* item = new QListWidgetItem(p, points_);
    QStringList its;
    for (const QString& problem : check.problems)
      if (problem.startsWith(p + QStringLiteral(": "))) its << problem;
    if (its.isEmpty()) continue;
    ++invalid;
    item->setIcon(style()->standardIcon(QStyle::SP_MessageBoxCritical));
    item->setToolTip(its.join(QLatin1Char('\n')));
  }
  if (!check.error.isEmpty()) {
    summary_->setText(check.error);
  } else if (!check.problems.isEmpty()) {
    summary_->setText(tr("%n point(s) cannot run; change the values:", nullptr, invalid) +
                      QStringLiteral("\n") + check.problems.join(QLatin1Char('\n')));
  } else {
    summary_->setText(tr("%n point(s), all valid.", nullptr, static_cast<int>(check.points.size())));
  }
  start_->setEnabled(check.error.isEmpty() && check.problems.isEmpty() && !check.points.isEmpty() &&
                     !name_->text().trimmed().isEmpty());
  emit checked();
}

}  // namespace studio::ui
