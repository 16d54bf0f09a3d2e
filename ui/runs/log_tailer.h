#pragma once
// Follows a log file from a byte cursor on LogConsole's thread. Private to studio_runs.
#include <QByteArray>
#include <QObject>
#include <QString>

class QTimer;

namespace studio::ui {

class LogTailer : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 300;
  // A log opened when already large is shown from this far before its end: the console keeps
  // ~20000 lines anyway, and reading a gigabyte log would hold the view for nothing.
  static constexpr qint64 kStartTailBytes = qint64{2} << 20;
  // Most bytes read per poll, so a burst of output arrives in slices the view can take.
  static constexpr qint64 kMaxReadBytes = qint64{4} << 20;
  // A line without a newline this long is shown anyway (a progress bar that never ends one).
  static constexpr qsizetype kMaxPartialBytes = 64 << 10;

  LogTailer();

  // Follows `path` from now on; every result carries `generation` so the console can drop
  // results of a file it no longer shows. An empty path stops following.
  void follow(const QString& path, quint64 generation);

 signals:
  // Complete lines, joined with '\n', without a trailing newline.
  void linesRead(quint64 generation, const QString& text);
  // The file was truncated or replaced: it is read again from its start.
  void restarted(quint64 generation, const QString& reason);
  // `bytes` at the start of the file were not read (see kStartTailBytes).
  void skipped(quint64 generation, qint64 bytes);

 private:
  void poll();

  QTimer* timer_;
  QString path_;
  quint64 generation_ = 0;
  bool opened_ = false;
  quint64 device_ = 0;
  quint64 inode_ = 0;
  qint64 offset_ = 0;        // next byte to read
  QByteArray partial_;       // bytes after the last newline read
  bool skipToLine_ = false;  // started inside a line: drop it
};

}  // namespace studio::ui
