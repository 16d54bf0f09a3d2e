#include "studio/ui/shell/comparison_dialog.h"

#include <qcustomplot.h>

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFutureWatcher>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QMessageBox>
#include <QPainter>
#include <QPushButton>
#include <QSaveFile>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent>
#include <cmath>

namespace studio::ui {
namespace {

QString number(double v) { return std::isfinite(v) ? QString::number(v, 'g', 6) : QStringLiteral("-"); }

}  // namespace

ComparisonDialog::ComparisonDialog(const QStringList& runDirs, QWidget* chart, QWidget* parent)
    : QDialog(parent), chart_(chart), table_(new QTableWidget), summary_(new QLabel) {
  setWindowTitle(tr("Compare %1 runs").arg(runDirs.size()));
  setObjectName(QStringLiteral("comparisonDialog"));
  summary_->setObjectName(QStringLiteral("comparisonSummary"));
  summary_->setText(tr("Reading %1 runs ...").arg(runDirs.size()));
  summary_->setWordWrap(true);
  table_->setObjectName(QStringLiteral("comparisonTable"));
  table_->setAccessibleName(tr("Losses and differing config keys of the compared runs"));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  QPushButton* csv = buttons->addButton(tr("Export &CSV..."), QDialogButtonBox::ActionRole);
  csv->setObjectName(QStringLiteral("exportCsv"));
  QPushButton* png = buttons->addButton(tr("Export &PNG..."), QDialogButtonBox::ActionRole);
  png->setObjectName(QStringLiteral("exportPng"));
  for (QPushButton* b : {csv, png}) b->setEnabled(false);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
  connect(this, &ComparisonDialog::loaded, this, [csv, png] {
    csv->setEnabled(true);
    png->setEnabled(true);
  });
  auto exportWith = [this](const QString& filter, const QString& suffix, bool asCsv) {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Comparison"),
                                                      QStringLiteral("comparison.") + suffix, filter);
    if (path.isEmpty()) return;
    QString error;
    if (!(asCsv ? exportCsv(path, &error) : exportPng(path, &error)))
      QMessageBox::warning(this, tr("Export failed"), error);
  };
  connect(csv, &QPushButton::clicked, this,
          [exportWith, this] { exportWith(tr("CSV (*.csv)"), QStringLiteral("csv"), true); });
  connect(png, &QPushButton::clicked, this,
          [exportWith, this] { exportWith(tr("PNG image (*.png)"), QStringLiteral("png"), false); });

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(table_, 1);
  layout->addWidget(buttons);

  // Each run's whole events file is parsed: on a worker thread.
  auto* watcher = new QFutureWatcher<RunComparison>(this);
  connect(watcher, &QFutureWatcher<RunComparison>::finished, this, [this, watcher] {
    fill(watcher->result());
    watcher->deleteLater();
  });
  watcher->setFuture(QtConcurrent::run([runDirs] { return compareRuns(runDirs); }));
}

void ComparisonDialog::fill(const RunComparison& c) {
  comparison_ = c;
  if (!c.swept.isEmpty()) {
    fillSweep(c);
    return;
  }
  QStringList headers;
  for (const ComparedRun& r : c.runs) headers << r.name;
  const QStringList metrics{tr("final loss"), tr("best loss"), tr("final eval loss"),
                            tr("best eval loss"), tr("steps")};
  table_->setColumnCount(static_cast<int>(c.runs.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(metrics.size() + c.differing.size()));
  QStringList rowNames = metrics;
  rowNames << c.differing;
  table_->setVerticalHeaderLabels(rowNames);
  for (int col = 0; col < c.runs.size(); ++col) {
    const ComparedRun& r = c.runs[col];
    const QStringList values{number(r.finalLoss), number(r.bestLoss), number(r.finalEvalLoss),
                             number(r.bestEvalLoss), QString::number(r.steps)};
    for (int row = 0; row < values.size(); ++row) {
      auto* item = new QTableWidgetItem(values[row]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      QFont bold = item->font();
      bold.setBold(true);
      item->setFont(bold);
      table_->setItem(row, col, item);
    }
    for (int k = 0; k < c.differing.size(); ++k)
      table_->setItem(static_cast<int>(metrics.size()) + k, col,
                      new QTableWidgetItem(c.value(col, c.differing[k])));
  }
  QStringList unread;
  for (const ComparedRun& r : c.runs)
    if (!r.error.isEmpty()) unread << r.error;
  summary_->setText((c.differing.isEmpty()
                         ? tr("The runs' configs are the same (output_dir aside).")
                         : tr("%n config key(s) differ between the runs.", nullptr,
                              static_cast<int>(c.differing.size()))) +
                    (unread.isEmpty() ? QString() : QLatin1Char('\n') + unread.join(QLatin1Char('\n'))));
  loaded_ = true;
  emit loaded();
}

// A sweep's points as rows: the swept keys, then the losses, then any other key that differs.
void ComparisonDialog::fillSweep(const RunComparison& c) {
  setWindowTitle(tr("Sweep %1: %n point(s)", nullptr, static_cast<int>(c.runs.size())).arg(c.sweep));
  const QStringList metrics{tr("final loss"), tr("best loss"), tr("final eval loss"),
                            tr("best eval loss"), tr("steps")};
  QStringList headers = c.swept;
  headers << metrics;
  for (const QString& key : c.differing)
    if (!c.swept.contains(key)) headers << key;
  table_->setRowCount(static_cast<int>(c.runs.size()));
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  QStringList rowNames;
  for (const ComparedRun& r : c.runs) rowNames << r.name;
  table_->setVerticalHeaderLabels(rowNames);
  for (int row = 0; row < c.runs.size(); ++row) {
    const ComparedRun& r = c.runs[row];
    int col = 0;
    for (const QString& key : c.swept) {
      auto* item = new QTableWidgetItem(c.value(row, key));
      QFont bold = item->font();
      bold.setBold(true);
      item->setFont(bold);
      table_->setItem(row, col++, item);
    }
    for (const QString& v : {number(r.finalLoss), number(r.bestLoss), number(r.finalEvalLoss),
                             number(r.bestEvalLoss), QString::number(r.steps)}) {
      auto* item = new QTableWidgetItem(v);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(row, col++, item);
    }
    for (const QString& key : c.differing)
      if (!c.swept.contains(key)) table_->setItem(row, col++, new QTableWidgetItem(c.value(row, key)));
  }
  table_->setSortingEnabled(true);  // sort the points by a key or a loss
  QStringList unread;
  for (const ComparedRun& r : c.runs)
    if (!r.error.isEmpty()) unread << r.error;
  summary_->setText(tr("Sweep %1 over %2: one row per point.").arg(c.sweep, c.swept.join(QStringLiteral(", "))) +
                    (unread.isEmpty() ? QString() : QLatin1Char('\n') + unread.join(QLatin1Char('\n'))));
  loaded_ = true;
  emit loaded();
}

bool ComparisonDialog::exportCsv(const QString& path, QString* error) const {
  return writeTextAtomically(path, comparison_.toCsv(), error);
}

bool ComparisonDialog::exportPng(const QString& path, QString* error) const {
  // The chart with the runs overlaid above the whole table (every row, not just those in view).
  const int tableWidth = table_->verticalHeader()->width() + table_->horizontalHeader()->length() + 4;
  // The chart drawn at a readable size (at least 720 x 400, as wide as the table), whatever its
  // column on the dashboard measures: its plot rendered off screen at that size (the widget on
  // the dashboard keeps its own), under the chart's title.
  QPixmap chart;
  if (chart_) {
    auto* plot = qobject_cast<QCustomPlot*>(chart_.data());
    if (!plot) plot = chart_->findChild<QCustomPlot*>();
    const int width = std::max(720, tableWidth);
    if (plot) {
      const QPixmap drawn = plot->toPixmap(width, std::max(400, plot->height()));
      const QString title = tr("Loss");  // the dashboard's loss chart (MainWindow::compareRuns)
      QFont bold = font();
      bold.setBold(true);
      const int titleHeight = QFontMetrics(bold).height() + 6;
      chart = QPixmap(drawn.width(), drawn.height() + titleHeight);
      chart.fill(palette().color(QPalette::Window));
      QPainter p(&chart);
      p.setFont(bold);
      p.setPen(palette().color(QPalette::WindowText));
      p.drawText(QRect(4, 0, drawn.width() - 8, titleHeight), Qt::AlignLeft | Qt::AlignVCenter, title);
      p.drawPixmap(0, titleHeight, drawn);
    } else {
      chart = chart_->grab();
    }
  }
  const int tableHeight = table_->horizontalHeader()->height() + table_->verticalHeader()->length() + 4;
  QImage image(std::max(chart.width(), tableWidth), chart.height() + tableHeight + summary_->height(),
               QImage::Format_RGB32);
  image.fill(palette().color(QPalette::Window));
  QPainter painter(&image);
  painter.drawPixmap(0, 0, chart);
  summary_->render(&painter, QPoint(0, chart.height()));
  const QSize old = table_->size();
  auto* table = table_;
  table->resize(tableWidth, tableHeight);
  table->render(&painter, QPoint(0, chart.height() + summary_->height()));
  table->resize(old);
  painter.end();
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) || !image.save(&f, "PNG") || !f.commit()) {
    if (error) *error = tr("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

}  // namespace studio::ui
