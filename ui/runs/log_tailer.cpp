#include "log_tailer.h"

#include <QFile>
#include <QTimer>

#include <sys/stat.h>

#include "studio/ui/base/local_path.h"

namespace studio::ui {

LogTailer::LogTailer() : timer_(new QTimer(this)) {
  timer_->setInterval(kPollMs);
  connect(timer_, &QTimer::timeout, this, &LogTailer::poll);
}

void LogTailer::follow(const QString& path, quint64 generation) {
  path_ = path;
  generation_ = generation;
  opened_ = false;
  offset_ = 0;
  partial_.clear();
  skipToLine_ = false;
  if (path_.isEmpty()) {
    timer_->stop();
    return;
  }
  timer_->start();
  poll();
}

void LogTailer::poll() {
  struct stat st {};
  if (::stat(localPath(path_).c_str(), &st) != 0) return;  // not there (yet): keep waiting
  const qint64 size = st.st_size;
  const auto device = static_cast<quint64>(st.st_dev);
  const auto inode = static_cast<quint64>(st.st_ino);
  if (!opened_) {
    opened_ = true;
    if (size > kStartTailBytes) {
      offset_ = size - kStartTailBytes;
      skipToLine_ = true;
      emit skipped(generation_, offset_);
    }
  } else if (device != device_ || inode != inode_ || size < offset_) {
    emit restarted(generation_, device != device_ || inode != inode_
                                    ? QStringLiteral("%1 was replaced").arg(path_)
                                    : QStringLiteral("%1 was truncated").arg(path_));
    offset_ = 0;
    partial_.clear();
    skipToLine_ = false;
  }
  device_ = device;
  inode_ = inode;
  if (size <= offset_) return;

  QFile file(path_);
  if (!file.open(QIODevice::ReadOnly) || !file.seek(offset_)) return;
  const QByteArray bytes = file.read(std::min(size - offset_, kMaxReadBytes));
  offset_ += bytes.size();
  QByteArray data = partial_ + bytes;
  partial_.clear();
  if (skipToLine_) {
    const qsizetype nl = data.indexOf('\n');
    if (nl < 0) return;
    data.remove(0, nl + 1);
    skipToLine_ = false;
  }
  const qsizetype last = data.lastIndexOf('\n');
  if (last < 0 && data.size() < kMaxPartialBytes) {
    partial_ = data;
    return;
  }
  if (last >= 0) {
    partial_ = data.mid(last + 1);
    data.truncate(last);
  }
  // A carriage return inside a line is a progress bar redrawing it: show what a terminal would,
  // the text after the last one.
  if (data.contains('\r')) {
    QList<QByteArray> lines = data.split('\n');
    for (QByteArray& line : lines) {
      if (line.endsWith('\r')) line.chop(1);
      const qsizetype cr = line.lastIndexOf('\r');
      if (cr >= 0) line.remove(0, cr + 1);
    }
    data = lines.join('\n');
  }
  emit linesRead(generation_, QString::fromUtf8(data));
}

}  // namespace studio::ui
