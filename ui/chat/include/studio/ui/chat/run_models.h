#pragma once
// The models of a run folder that `studio-train chat` can load: the final model (the run folder
// itself once it holds config.json and a *.safetensors file) and its checkpoint-STEP folders.
#include <QList>
#include <QString>

namespace studio::ui {

struct RunModel {
  QString dir;       // absolute
  qint64 step = -1;  // of a checkpoint-STEP folder; -1: the final model
  bool isFinal() const { return step < 0; }
  // "final model", "checkpoint-200"
  QString label() const;
};

// Whether `dir` holds a Hugging Face model: config.json and at least one *.safetensors file.
bool isModelFolder(const QString& dir);

// The final model first (when there is one), then the checkpoints by step. A checkpoint being
// written (.checkpoint-STEP.saving) or without a model is left out. Reads the disk: call it off
// the GUI thread.
QList<RunModel> listRunModels(const QString& runDir);

}  // namespace studio::ui
