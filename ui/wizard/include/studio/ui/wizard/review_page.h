#pragma once
// Page 8: the YAML the wizard will write (read-only, highlighted, problem lines marked), the keys
// kept as written, every diagnostic of validate_config (errors block Launch), and the actions:
// Export YAML... (atomic write), Copy command line, Sweep... (SweepDialog), Launch. Launch starts the run on this
// machine (one node: it is disabled, saying why, for more than one) or on the SSH host of the
// Target page ("Launch on HOST"). "Train with" picks the trainer: studio-train, or LLaMA-Factory's
// llamafactory-cli (the YAML then shows what it is given, and keys it cannot run block Launch).
#include <QString>

#include "studio/config/config_io.h"
#include "studio/ui/runs/launch_target.h"
#include "studio/ui/wizard/wizard_page.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace studio::ui {

class CodeEditor;
class DiagnosticsModel;
class YamlHighlighter;

class ReviewPage : public WizardPage {
  Q_OBJECT

 public:
  explicit ReviewPage(RunDraft* draft, QWidget* parent = nullptr);

  void setTarget(const LaunchTarget& target);
  // The Target page's target with this page's choice of trainer.
  LaunchTarget target() const;
  // "Train with": studio-train, or LLaMA-Factory's llamafactory-cli (whose path is editable).
  void setTrainer(LaunchTarget::Trainer trainer, const QString& llamafactoryCli = {});
  QComboBox* trainerBox() const { return trainer_; }
  // The studio-train program the command line names (default "studio-train", found on PATH).
  void setEngineProgram(const QString& program);

  // Writes the YAML atomically; the command line then names this file.
  bool exportYaml(const QString& path, QString* error = nullptr);
  // `path` holds the current config (it was just opened): the command line names it until the
  // config changes.
  void setConfigFile(const QString& path);
  // The file the command line names: the last exported or opened one while the config is
  // unchanged since, otherwise where Export would suggest writing it.
  QString configFile() const;
  bool configFileIsCurrent() const;
  QString commandLine() const;

  CodeEditor* editor() const { return editor_; }
  DiagnosticsModel* diagnosticsModel() const { return model_; }
  QTableView* diagnosticsView() const { return table_; }
  QPushButton* exportButton() const { return export_; }
  QPushButton* copyButton() const { return copy_; }
  QPushButton* launchButton() const { return launch_; }
  // "Sweep...": the config at several values of some keys (SweepDialog), on this machine or as
  // a Slurm job array on the SSH host; enabled where Launch is, for studio-train, except on an
  // SSH host without Slurm.
  QPushButton* sweepButton() const { return sweep_; }
  QString keptKeysText() const;
  // "No problems found.", "2 warnings; the run can start.", "1 error, 2 warnings: fix ...".
  QString summaryText() const;

 signals:
  void launchClicked();
  void sweepClicked();

 private:
  QWidget* buildButtons();
  void update();
  void exportWithDialog();
  void copyCommandLine();
  void markLines();
  // The YAML the chosen trainer is given (LLaMA-Factory's leaves out the studio's own keys).
  studio::YamlStyle yamlStyle() const;

  CodeEditor* editor_;
  YamlHighlighter* highlighter_;
  DiagnosticsModel* model_;
  QTableView* table_;
  QLabel* summary_;
  QLabel* kept_;
  QLabel* baseDir_;
  QLabel* command_;
  QPushButton* export_ = nullptr;
  QPushButton* copy_ = nullptr;
  QPushButton* launch_ = nullptr;
  QPushButton* sweep_ = nullptr;
  QComboBox* trainer_ = nullptr;
  QLineEdit* lfCli_ = nullptr;
  QLabel* lfProblems_ = nullptr;
  LaunchTarget target_;
  QString engine_ = QStringLiteral("studio-train");
  QString savedPath_;
  QString savedYaml_;  // the YAML savedPath_ holds
};

}  // namespace studio::ui
