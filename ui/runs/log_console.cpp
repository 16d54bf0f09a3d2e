#include "studio/ui/runs/log_console.h"

#include <QFontDatabase>
#include <QLocale>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QVBoxLayout>

#include "log_tailer.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {

LogConsole::LogConsole(QWidget* parent) : QWidget(parent), view_(new QPlainTextEdit(this)) {
  view_->setObjectName(QStringLiteral("logView"));
  view_->setAccessibleName(tr("Log"));
  view_->setReadOnly(true);
  view_->setUndoRedoEnabled(false);
  view_->setLineWrapMode(QPlainTextEdit::NoWrap);
  view_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  view_->setMaximumBlockCount(kDefaultMaxLines);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_);

  thread_.setObjectName(QStringLiteral("log-console"));
  tailer_ = new LogTailer;
  tailer_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, tailer_, &QObject::deleteLater);
  connect(tailer_, &LogTailer::linesRead, this, &LogConsole::onLines, Qt::QueuedConnection);
  connect(tailer_, &LogTailer::restarted, this, &LogConsole::onRestarted, Qt::QueuedConnection);
  connect(tailer_, &LogTailer::skipped, this, &LogConsole::onSkipped, Qt::QueuedConnection);
  thread_.start();
}

LogConsole::~LogConsole() {
  thread_.quit();
  thread_.wait();
}

void LogConsole::setRun(const QString& runDir) {
  runDir_ = runDir;
  setLogFile(runDir.isEmpty() ? QString() : runFile(runDir, kTrainLogFileName));
}

void LogConsole::setLogFile(const QString& path) {
  logFile_ = path;
  view_->clear();
  skippedBytes_ = 0;
  const quint64 generation = ++generation_;
  QMetaObject::invokeMethod(
      tailer_, [t = tailer_, path, generation] { t->follow(path, generation); },
      Qt::QueuedConnection);
}

void LogConsole::clear() {
  view_->clear();
}

void LogConsole::setMaximumLines(int lines) {
  view_->setMaximumBlockCount(lines);
}

int LogConsole::maximumLines() const {
  return view_->maximumBlockCount();
}

bool LogConsole::isAtEnd() const {
  const QScrollBar* bar = view_->verticalScrollBar();
  return bar->value() >= bar->maximum();
}

void LogConsole::appendStudioMessage(const QString& text) {
  append(text, true);
}

void LogConsole::onLines(quint64 generation, const QString& text) {
  if (generation != generation_) return;
  // Lines beyond what the view keeps would be inserted only to be dropped again: skip them,
  // leaving one block for the note that says so.
  QStringView shown(text);
  qsizetype hiddenLines = 0;
  if (const int room = maximumLines() - 1; room > 0) {
    int kept = 1;
    for (qsizetype i = text.size() - 1; i >= 0; --i) {
      if (text[i] != QLatin1Char('\n')) continue;
      if (kept == room) {
        hiddenLines = text.left(i).count(QLatin1Char('\n')) + 1;
        shown = shown.mid(i + 1);
        break;
      }
      ++kept;
    }
  }
  if (skippedBytes_ > 0 || hiddenLines > 0) {
    QStringList what;
    if (skippedBytes_ > 0) what << QLocale().formattedDataSize(skippedBytes_);
    if (hiddenLines > 0)
      what << (hiddenLines == 1 ? tr("1 line") : tr("%1 lines").arg(hiddenLines));
    append(tr("earlier output not shown (%1): open %2 to read it all")
               .arg(what.join(tr(" and ")), logFile_),
           true);
    skippedBytes_ = 0;
  }
  append(shown.toString(), false);
  emit linesAppended();
}

void LogConsole::onRestarted(quint64 generation, const QString& reason) {
  if (generation != generation_) return;
  // What is shown came from the old file.
  view_->clear();
  append(tr("%1: showing it again from its start").arg(reason), true);
  emit logRestarted(reason);
}

void LogConsole::onSkipped(quint64 generation, qint64 bytes) {
  // Said together with the lines that follow, in one note.
  if (generation == generation_) skippedBytes_ += bytes;
}

void LogConsole::append(const QString& text, bool fromStudio) {
  QScrollBar* bar = view_->verticalScrollBar();
  const bool follow = bar->value() >= bar->maximum();
  QTextCharFormat format;  // the view's own text colour for the log
  if (fromStudio) {
    // The palette's link colour stands out in light and dark themes alike.
    format.setForeground(view_->palette().color(QPalette::Link));
    format.setFontItalic(true);
  }
  QTextCursor cursor(view_->document());
  cursor.movePosition(QTextCursor::End);
  const bool empty = view_->document()->isEmpty();
  if (!empty) cursor.insertBlock(QTextBlockFormat(), format);
  // insertText turns each '\n' into a new block: one call for a whole batch of lines.
  cursor.insertText(fromStudio ? QStringLiteral("[studio] ") + text : text, format);
  if (follow) bar->setValue(bar->maximum());
}

}  // namespace studio::ui
