#pragma once
// For tests of readers that must not hang on what a folder holds in place of a small file: a
// FIFO with no writer (an open that waits for ever), a link to /dev/zero (a read that never
// ends while its memory grows), a folder, a file too large.
#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QString>
#include <QtGlobal>

#include <sys/stat.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

// Makes `path` of `kind`: "link" (a symbolic link to `content`), "fifo", "folder", "sparse" (a
// regular file of `content.toLongLong()` zero bytes that takes no disk), or "file" (holding
// `content`). false when it cannot.
inline bool makeHostileFile(const QString& path, const QString& kind, const QByteArray& content) {
  if (kind == "link") return QFile::link(QString::fromUtf8(content), path);
  if (kind == "fifo") return ::mkfifo(QFile::encodeName(path).constData(), 0600) == 0;
  if (kind == "folder") return QDir().mkpath(path);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return false;
  if (kind == "sparse") return f.resize(content.toLongLong());
  return f.write(content) == content.size();
}

// `f()` run on a thread of its own; when it has not returned within `limit`, the test process
// ends at once with a fatal message naming `what` (a failed test, not a hung one, and stopped
// before a runaway read takes the machine's memory).
template <class F>
auto within(std::chrono::milliseconds limit, const char* what, F f) -> decltype(f()) {
  using Result = decltype(f());
  auto done = std::make_shared<std::promise<Result>>();
  std::future<Result> result = done->get_future();
  std::thread([done, f]() mutable { done->set_value(f()); }).detach();
  if (result.wait_for(limit) != std::future_status::ready)
    qFatal("%s did not return within %lld ms: it blocks or reads without end", what,
           static_cast<long long>(limit.count()));
  return result.get();
}
