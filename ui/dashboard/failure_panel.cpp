#include "studio/ui/dashboard/failure_panel.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFontDatabase>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "studio/runs/run_folder.h"

namespace studio::ui {

namespace {

// The last `count` lines of `rank` in the run folder's train.log: its last 4 MiB, enough for
// thousands of lines, so that a long run's log is not read whole.
QStringList readRankLines(const QString& runDir, int rank, int count) {
  const QString path = QDir(runDir).filePath(QString::fromLatin1(kTrainLogFileName));
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    return {QCoreApplication::translate("FailurePanel", "(no log: %1 cannot be read: %2)")
                .arg(QDir::toNativeSeparators(path), f.errorString())};
  constexpr qint64 kTail = qint64{4} << 20;
  if (f.size() > kTail) f.seek(f.size() - kTail);
  const QByteArray bytes = f.readAll();
  QStringList out;
  for (const std::string& line :
       rank_log_tail(std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())),
                     rank < 0 ? 0 : rank, static_cast<std::size_t>(count)))
    out << QString::fromUtf8(line.data(), static_cast<qsizetype>(line.size()));
  if (out.isEmpty())
    out << QCoreApplication::translate("FailurePanel", "(rank %1 wrote nothing to %2)")
               .arg(rank < 0 ? 0 : rank)
               .arg(QDir::toNativeSeparators(path));
  return out;
}

}  // namespace

FailurePanel::FailurePanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("failurePanel"));
  headline_ = new QLabel;
  headline_->setObjectName(QStringLiteral("failureHeadline"));
  headline_->setWordWrap(true);
  headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = headline_->font();
  bold.setBold(true);
  headline_->setFont(bold);
  summary_ = new QLabel;
  summary_->setObjectName(QStringLiteral("failureSummary"));
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  changes_ = new QLabel;
  changes_->setObjectName(QStringLiteral("failureChanges"));
  changes_->setWordWrap(true);
  changes_->setTextFormat(Qt::PlainText);
  changes_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  openConfig_ = new QPushButton;
  openConfig_->setObjectName(QStringLiteral("failureOpenConfig"));
  connect(openConfig_, &QPushButton::clicked, this, [this] {
    QString path = QString::fromStdString(cause_.config_file);
    if (QFileInfo(path).isRelative() && !runDir_.isEmpty()) {
      const QString inRun = QDir(runDir_).filePath(path);
      if (QFileInfo::exists(inRun)) path = inRun;
    }
    Q_EMIT openConfigRequested(path, cause_.config_line, std::max(1, cause_.config_column));
  });
  logTitle_ = new QLabel;
  log_ = new QPlainTextEdit;
  log_->setObjectName(QStringLiteral("failureLog"));
  log_->setAccessibleName(tr("The failing rank's last log lines"));
  log_->setReadOnly(true);
  log_->setLineWrapMode(QPlainTextEdit::NoWrap);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  log_->setMaximumHeight(log_->fontMetrics().lineSpacing() * 12);
  logTitle_->setBuddy(log_);
  connect(&reading_, &QFutureWatcher<QStringList>::finished, this, [this] {
    log_->setPlainText(reading_.result().join(QLatin1Char('\n')));
    log_->moveCursor(QTextCursor::End);
    Q_EMIT logRead();
  });

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 6, 8, 6);
  layout->addWidget(headline_);
  layout->addWidget(summary_);
  layout->addWidget(changes_);
  layout->addWidget(openConfig_, 0, Qt::AlignLeft);
  layout->addWidget(logTitle_);
  layout->addWidget(log_);
  setAutoFillBackground(true);
  hide();
}

FailurePanel::~FailurePanel() { reading_.waitForFinished(); }

QString FailurePanel::headline() const { return headline_->text(); }
QString FailurePanel::changesText() const { return changes_->text(); }
QString FailurePanel::logText() const { return log_->toPlainText(); }

void FailurePanel::showEnd(const QString& runDir, const QString& state, const QString& reason,
                           double lastStep) {
  if (state != QLatin1String("failed")) {
    hide();
    runDir_.clear();
    reason_.clear();
    return;
  }
  if (runDir == runDir_ && reason == reason_ && lastStep == lastStep_ && isVisibleTo(parentWidget()))
    return;
  runDir_ = runDir;
  reason_ = reason;
  lastStep_ = lastStep;
  cause_ = explain_failure(reason.toStdString());

  QString text = tr("Failed (%1)").arg(QString::fromLatin1(failure_kind_name(cause_.kind)));
  if (cause_.rank >= 0) text += tr(" on rank %1").arg(cause_.rank);
  if (cause_.step >= 0)
    text += tr(" at step %1").arg(cause_.step);
  else if (lastStep >= 0)
    text += tr(" after step %1 (the last one logged)").arg(static_cast<qint64>(lastStep));
  if (!cause_.phase.empty()) text += tr(", in %1").arg(QString::fromStdString(cause_.phase));
  headline_->setText(text);
  summary_->setText(QString::fromStdString(cause_.summary));
  QStringList changes;
  for (const std::string& c : cause_.changes) changes << QStringLiteral("• ") + QString::fromStdString(c);
  changes_->setText(changes.isEmpty() ? QString()
                                      : tr("What to change:") + QLatin1Char('\n') + changes.join(QLatin1Char('\n')));
  changes_->setVisible(!changes.isEmpty());
  const bool config = cause_.kind == FailureKind::Config && !cause_.config_file.empty();
  openConfig_->setVisible(config);
  if (config)
    openConfig_->setText(tr("Open %1 at l&ine %2")
                             .arg(QFileInfo(QString::fromStdString(cause_.config_file)).fileName())
                             .arg(cause_.config_line));
  const int rank = cause_.rank < 0 ? 0 : cause_.rank;
  logTitle_->setText(tr("Last lines of ran&k %1's log (train.log):").arg(rank));
  const bool hasLog = !runDir.isEmpty();
  logTitle_->setVisible(hasLog);
  log_->setVisible(hasLog);
  log_->clear();
  show();
  if (hasLog) readLog();
}

void FailurePanel::readLog() {
  reading_.waitForFinished();
  const QString dir = runDir_;
  const int rank = cause_.rank;
  reading_.setFuture(QtConcurrent::run([dir, rank] { return readRankLines(dir, rank, kLogLines); }));
}

}  // namespace studio::ui
