#pragma once
// A run's train.log as the engine writes it (rank 0's output as is, other ranks' lines tagged
// "[rank N]" by the engine's launcher), plus the studio's own messages in another colour. The
// file is tailed from a byte cursor on a worker thread; the view keeps following the end unless
// the user scrolled up, and holds a bounded number of lines.
#include <QString>
#include <QThread>
#include <QWidget>

class QPlainTextEdit;

namespace studio::ui {

class LogTailer;

class LogConsole : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kDefaultMaxLines = 20000;

  explicit LogConsole(QWidget* parent = nullptr);
  ~LogConsole() override;

  // Shows RUN_DIR/train.log, following it as it grows; "" shows nothing. Clears the view.
  void setRun(const QString& runDir);
  QString run() const { return runDir_; }
  // Shows any log file the same way (setRun uses it).
  void setLogFile(const QString& path);
  QString logFile() const { return logFile_; }

  // Empties the view; the file is still followed, from where it was.
  void clear();
  // A message from the studio itself ("stop requested", "launch failed: ..."), set apart in colour.
  void appendStudioMessage(const QString& text);

  // Lines kept; older lines go first.
  void setMaximumLines(int lines);
  int maximumLines() const;

  // The text view, read-only (for tests, and for a caller that wants to add actions to it).
  QPlainTextEdit* view() const { return view_; }
  // Whether the view is at its end, so that new lines keep it there.
  bool isAtEnd() const;

 signals:
  // After lines of the log were added to the view.
  void linesAppended();
  // The log was truncated or replaced and is shown again from its start.
  void logRestarted(const QString& reason);

 private:
  void onLines(quint64 generation, const QString& text);
  void onRestarted(quint64 generation, const QString& reason);
  void onSkipped(quint64 generation, qint64 bytes);
  void append(const QString& text, bool fromStudio);

  QPlainTextEdit* view_;
  QThread thread_;
  LogTailer* tailer_ = nullptr;  // lives on thread_, deleted when it finishes
  quint64 generation_ = 0;       // of the file shown: results of earlier files are dropped
  qint64 skippedBytes_ = 0;      // not read from the start of a large log, not yet said
  QString runDir_;
  QString logFile_;
};

}  // namespace studio::ui
