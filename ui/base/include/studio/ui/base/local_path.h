#pragma once
// QString paths to the std::string paths of the config library, in the file system's encoding.
#include <string>

#include <QFile>
#include <QString>

namespace studio::ui {

inline std::string localPath(const QString& path) {
  return QFile::encodeName(path).toStdString();
}

}  // namespace studio::ui
