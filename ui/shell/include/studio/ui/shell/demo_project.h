#pragma once
// The built-in demo project: the demo SFT config and data from resources/demo, and the demo
// model, whose random weights are created once with `studio-train init-model` (a child process,
// so the GUI thread never waits) into the studio's data folder.
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QString>

namespace studio::ui {

// The resources/ folder: $STUDIO_RESOURCES_DIR, else ../share/seqstudio/resources next to the
// executable (an installed studio), else the source tree the studio was built from.
QString findResourcesDir();
// The studio-train executable: $STUDIO_TRAIN, else the one next to the studio executable.
QString findEngineProgram();

class DemoProject : public QObject {
  Q_OBJECT

 public:
  DemoProject(QString resourcesDir, QString engineProgram, QString dataDir,
              QObject* parent = nullptr);

  QString sftConfigPath() const;  // resources/demo/sft_demo.yaml
  QString dpoConfigPath() const;  // resources/demo/dpo_demo.yaml
  // Where the demo configs' relative paths (resources/demo/data) resolve: resources/..
  QString baseDir() const;
  QString modelDir() const;       // <dataDir>/demo/model
  // config.json, tokenizer.json and weights are all there.
  bool isModelReady() const;
  bool isCreating() const { return process_ != nullptr; }

  // Creates the model unless it is ready or being created; emits modelReady (at once when it
  // already is) or modelFailed. The weights go to a temporary folder renamed into place, so an
  // interrupted creation never leaves a half-written model behind.
  void ensureModel();

 signals:
  void modelReady(const QString& dir);
  void modelFailed(const QString& message);

 private:
  void finish(int exitCode, bool crashed);

  QString resources_;
  QString engine_;
  QString dataDir_;
  QString tmpDir_;
  QPointer<QProcess> process_;
};

}  // namespace studio::ui
