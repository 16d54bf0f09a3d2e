#pragma once
// The new-run wizard: model, data, method, parallelism, hyperparameters, memory, target, review.
// Every page edits one RunDraft and validates live; Review exports the YAML, copies the command
// line, or asks the studio to launch the run (launchRequested).
//
// The app creates it with the demo model folder it ships, optionally imports a YAML or loads the
// demo, shows it, and connects launchRequested to its launcher.
#include <QPointer>
#include <QString>
#include <QWizard>

#include "studio/config/run_config.h"
#include "studio/ui/remote/host_profile.h"
#include "studio/ui/runs/launch_target.h"
#include "studio/ui/wizard/sweep_dialog.h"

namespace studio::ui {

class DataPage;
class HyperparametersPage;
class MemoryPage;
class MethodPage;
class ModelPage;
class ParallelismPage;
class ReviewPage;
class RunDraft;
class TargetPage;

class RunWizard : public QWizard {
  Q_OBJECT

 public:
  enum PageId {
    ModelPageId,
    DataPageId,
    MethodPageId,
    ParallelismPageId,
    HyperparametersPageId,
    MemoryPageId,
    TargetPageId,
    ReviewPageId,
  };

  explicit RunWizard(QWidget* parent = nullptr);

  // The folder of the built-in demo model (the app provides it): the Model page's demo button
  // and loadDemo() use it.
  void setDemoModelDir(const QString& dir);
  // The studio-train program the command line names (default "studio-train" on PATH).
  void setEngineProgram(const QString& program);
  // The saved hosts the Target page offers (the studio's HostStore).
  void setHosts(const QVector<HostProfile>& hosts);

  // Imports any LLaMA-Factory YAML: fills every page; unknown keys are kept (exported back
  // verbatim) and listed on the Review page. Relative paths resolve against the file's folder.
  // The world size becomes one that sequence_parallel_size divides. On a parse error nothing
  // changes and `error` gets every problem, one per line.
  bool openConfig(const QString& yamlPath, QString* error = nullptr);
  // The demo project: the SFT demo settings of `demoConfigPath` (e.g. resources/demo/
  // sft_demo.yaml) with the demo model (setDemoModelDir, else the "model" folder beside the
  // file), the "data" folder beside the file, and output_dir under the app's data folder.
  bool loadDemo(const QString& demoConfigPath, QString* error = nullptr);

  studio::RunConfig config() const;  // what the pages say now
  QString yamlText() const;          // to_yaml(config(), Minimal)
  QString baseDir() const;           // where relative paths resolve
  LaunchTarget target() const;
  QString commandLine() const;       // studio-train train <file> --nproc N ...

  RunDraft* draft() const { return draft_; }
  ModelPage* modelPage() const { return model_; }
  DataPage* dataPage() const { return data_; }
  MethodPage* methodPage() const { return method_; }
  ParallelismPage* parallelismPage() const { return parallelism_; }
  HyperparametersPage* hyperparametersPage() const { return hyperparameters_; }
  MemoryPage* memoryPage() const { return memory_; }
  TargetPage* targetPage() const { return targetPage_; }
  ReviewPage* reviewPage() const { return review_; }
  // The sweep dialog the Review page's Sweep... opened last; null when closed.
  SweepDialog* sweepDialog() const { return sweepDialog_; }
  // What Sweep... does: opens the sweep dialog for the config as it is now.
  void openSweepDialog();

 signals:
  void launchRequested(const studio::RunConfig& config, const QString& baseDir,
                       const studio::ui::LaunchTarget& target);
  // Start Sweep in the Review page's sweep dialog: `config` at the dialog's values.
  void sweepRequested(const studio::RunConfig& config, const QString& baseDir,
                      const studio::ui::LaunchTarget& target, const studio::ui::SweepChoice& sweep);
  // "Manage hosts..." on the Target page: the studio opens its Hosts page.
  void manageHostsRequested();

 private:
  void load(studio::RunConfig config, const QString& baseDir, const QString& file);

  RunDraft* draft_;
  ModelPage* model_;
  DataPage* data_;
  MethodPage* method_;
  ParallelismPage* parallelism_;
  HyperparametersPage* hyperparameters_;
  MemoryPage* memory_;
  TargetPage* targetPage_;
  ReviewPage* review_;
  QPointer<SweepDialog> sweepDialog_;
};

}  // namespace studio::ui
