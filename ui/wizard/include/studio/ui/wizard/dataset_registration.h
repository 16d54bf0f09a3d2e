#pragma once
// A single data file chosen where a dataset folder is expected. studio-train (like LLaMA-Factory)
// reads data only through <dataset_dir>/dataset_info.json, and the wizard writes nothing into the
// user's data folder, so it shows the entry the file needs instead, guessed from its first row.
#include <QByteArray>
#include <QString>

namespace studio::ui {

struct DatasetRegistration {
  QString name;      // the dataset name to use: the file's base name
  QString entry;     // "NAME": {...}, the dataset_info.json entry
  QString guess;     // how the form was guessed, or why it could not be
};

// `head` is the start of the file (its first row must be complete in it).
DatasetRegistration datasetRegistration(const QString& filePath, const QByteArray& head);

}  // namespace studio::ui
