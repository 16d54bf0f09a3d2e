#pragma once
// What the tests of the run contract's files share (tst_events, tst_run_status): bytes in and out
// of files, and std::string / QByteArray views.
#include <QByteArray>
#include <QFile>
#include <QString>

#include <string>
#include <string_view>

namespace runs_test {

inline QString qs(const std::string& s) { return QString::fromStdString(s); }

inline std::string_view view(const QByteArray& b) {
  return {b.constData(), static_cast<std::size_t>(b.size())};
}

inline QByteArray read_all(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

inline bool append(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Append)) return false;
  return f.write(bytes) == bytes.size();
}

inline bool overwrite(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
  return f.write(bytes) == bytes.size();
}

}  // namespace runs_test
