#pragma once
// The studio's main window: the run dashboard in the middle (with the config inspector and the
// chat with the current run's models as further tabs), the runs list and the log console as
// docks, the new-run wizard on demand. Runs live on disk (RunStore scans them), so closing and
// reopening the window finds every run again, running or finished; runs on SSH hosts are
// followed into local mirror folders, reattached at start-up. Geometry, dock layout and the last
// tab persist in QSettings; colours follow the system palette.
#include <QHash>
#include <QMainWindow>
#include <QPointer>

#include "studio/ui/shell/comparison_dialog.h"  // a signal's argument: moc needs the type
#include "studio/ui/wizard/run_wizard.h"  // QPointer<RunWizard> needs the complete type

class QDockWidget;
class QProgressBar;
class QTabWidget;
class QSystemTrayIcon;
class QTimer;

namespace studio::ui {

class AppTheme;
class ChatPanel;
class ConfigInspector;
class GpuSampler;
class DemoProject;
class GuiPrompts;
class HostStore;
class LocalLauncher;
class LogConsole;
class RemoteRuns;
class RemoteSubmitter;
class RunBackend;
class LocalRunBackend;
class RemoteRunBackend;
class RunDashboard;
class RunStore;
class RunsPanel;

// Where the window finds what it starts; the app fills it in (tests point it at the build).
struct StudioPaths {
  QString engine;     // the studio-train executable
  QString resources;  // the resources/ folder (demo model config, demo data, examples)
  QString runsRoot;   // where runs launched here are created; empty: the default location
  QString dataDir;    // where the demo model is created; empty: the default location
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(const StudioPaths& paths = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads a config into the inspector tab. On failure the reason goes to the status bar (no
  // dialog, so a bad path on the command line never blocks start-up) and false is returned.
  bool openFile(const QString& path);
  // Writes the inspector's text as it is, atomically. Failures are reported in a message box.
  bool saveFile(const QString& path);
  // Writes the config as the engine runs it (normalised, every key with its value) to `path`.
  // Returns an empty string, or why it could not: unreadable YAML or a failed write.
  QString exportNormalizedFile(const QString& path) const;

  // Opens the new-run wizard on a LLaMA-Factory YAML (unknown keys kept). False, with the
  // reason in the status bar, when the file cannot be read.
  bool openConfigInWizard(const QString& path);
  // Opens the new-run wizard on the demo project (demo model, demo data, SFT demo settings):
  // at once when the demo model exists, else once it has been created (off the GUI thread).
  // demoWizardOpened() says when.
  void openDemoWizard();
  // Opens an empty new-run wizard.
  RunWizard* newRun();
  // Shows a run folder's dashboard and log (adding it to the runs list). False, with the
  // reason in the status bar, when it is not a run folder.
  bool openRun(const QString& dir);
  // Draws another run folder on the dashboard's charts, next to the current run. False, with
  // the reason in the status bar, when it is not a run folder.
  bool overlayRun(const QString& dir);
  // Compare: the runs overlaid on the dashboard (the first one current) and the comparison
  // dialog of their losses and differing config keys; nullptr when fewer than two are run folders.
  ComparisonDialog* compareRuns(const QStringList& dirs);
  // Starts a run on this machine as the wizard describes it (studio-train, or LLaMA-Factory as
  // target.trainer says); returns the run folder or "".
  QString launchLocal(const studio::RunConfig& config, const QString& baseDir,
                      const LaunchTarget& target);
  // Submits a run to the SSH host of `target` off the GUI thread, the progress in the status
  // bar and the log. Once it started, its mirror folder is selected and followed
  // (remoteLaunched). False when a submit is already in flight.
  bool launchRemote(const studio::RunConfig& config, const QString& baseDir,
                    const LaunchTarget& target);
  // Mirrors and follows a run on the saved host `hostName` that was started elsewhere (e.g. by
  // `studio submit`), off the GUI thread; remoteAttached() once it is followed and selected.
  // False, with the reason in the status bar, when no host has that name.
  bool attachRemoteRun(const QString& hostName, const QString& runId);

  ConfigInspector* inspector() const { return inspector_; }
  RunDashboard* dashboard() const { return dashboard_; }
  ChatPanel* chat() const { return chat_; }
  RunStore* runStore() const { return store_; }
  LocalLauncher* launcher() const;
  LogConsole* logConsole() const { return log_; }
  RunsPanel* runsPanel() const { return runsPanel_; }
  DemoProject* demo() const { return demo_; }
  RunWizard* wizard() const { return wizard_; }
  // The remote hosts (File > Hosts...) and the GUI's answers to SSH questions from workers.
  HostStore* hosts() const { return hosts_; }
  GuiPrompts* prompts() const { return prompts_; }
  // The run backends the window starts, stops and follows runs through: this machine's, then
  // SSH hosts' (plain or Slurm).
  const QList<RunBackend*>& runBackends() const { return backends_; }
  // The remote backend's followers of remote runs and its submitter.
  RemoteRuns* remoteRuns() const;
  RemoteSubmitter* remoteSubmitter() const;
  QString currentRun() const { return currentRun_; }
  // The folder of the last sweep the wizard's Sweep... started here; "" before any.
  QString lastSweepDir() const { return lastSweepDir_; }
  // The colour theme (View > Theme): light, dark or the system's.
  AppTheme* theme() const { return theme_; }

  // Tab indices of the central area.
  enum Tab { DashboardTab = 0, ConfigTab = 1, ChatTab = 2 };
  void showTab(Tab tab);

 signals:
  void demoWizardOpened(studio::ui::RunWizard* wizard);
  // A remote submit started its run; `dir` is the run's mirror folder, now selected.
  void remoteLaunched(const QString& dir);
  // attachRemoteRun() mirrored the run into `dir`, now followed and selected.
  void remoteAttached(const QString& dir);
  // A run ended (finished, failed, stopped or lost) while the window was in the background; the
  // user was told with `message` (a desktop notification where the system has a tray, the
  // window's alert and the status bar).
  void runEndedInBackground(const QString& dir, const QString& message);
  // Compare opened a comparison of these runs (overlaid on the dashboard too).
  void comparisonOpened(studio::ui::ComparisonDialog* dialog);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void createDocks();
  void createMenus();
  // Tells the user of runs that ended since the last scan while the window was not active.
  void notifyEndedRuns();

  void connectRuns();
  void open();
  void openRunDialog();
  void openConfigDialog();
  bool save();
  bool saveAs();
  void exportNormalized();
  void stopCurrentRun();
  void stopCurrentSweep();
  // The run backends and what the window shows of them (log, status bar, start progress).
  void createBackends();
  void connectBackend(RunBackend* backend);
  void onRunStarted(RunBackend* backend, const QString& dir);
  // The backend that starts runs on `target`, and the one that owns the run folder `dir` (this
  // machine's for a folder the runs list does not know).
  RunBackend* backendFor(const LaunchTarget& target) const;
  RunBackend* backendOf(const QString& dir) const;
  bool startRun(const studio::RunConfig& config, const QString& baseDir,
                const LaunchTarget& target);
  void showHostsDialog();
  void showAttachRemoteDialog();
  void overlayCurrentRun();
  void selectRun(const QString& dir);
  // The absolute run folder of `path`, added to the runs list; "" with the reason in the status
  // bar when it is not a run folder.
  QString addRunFolder(const QString& path);
  void onLaunchRequested(const studio::RunConfig& config, const QString& baseDir,
                         const studio::ui::LaunchTarget& target);
  void onSweepRequested(const studio::RunConfig& config, const QString& baseDir,
                        const studio::ui::LaunchTarget& target, const studio::ui::SweepChoice& sweep);
  RunWizard* showWizard();
  void about();
  bool maybeSave();
  void updateTitle();
  void readSettings();
  void writeSettings() const;
  QString dialogDir() const;

  StudioPaths paths_;
  AppTheme* theme_;
  QTabWidget* tabs_;
  ConfigInspector* inspector_;
  RunDashboard* dashboard_;
  ChatPanel* chat_;
  // nvidia-smi samples for shown runs that report no GPU memory (LLaMA-Factory), every 10 s.
  GpuSampler* gpuSampler_ = nullptr;
  QTimer* gpuSampleTimer_ = nullptr;
  RunStore* store_;
  LogConsole* log_;
  RunsPanel* runsPanel_;
  QDockWidget* runsDock_ = nullptr;
  QDockWidget* logDock_ = nullptr;
  DemoProject* demo_;
  QPointer<RunWizard> wizard_;
  QString currentRun_;
  QHash<QString, int> lastStates_;  // each listed run's RunState at the last scan
  QSystemTrayIcon* tray_ = nullptr;  // for desktop notifications, where the system has a tray
  HostStore* hosts_;
  GuiPrompts* prompts_;
  LocalRunBackend* localRuns_ = nullptr;
  RemoteRunBackend* remoteRuns_ = nullptr;
  QList<RunBackend*> backends_;
  QProgressBar* submitProgress_ = nullptr;  // in the status bar while a start uploads
  QString submitStep_;                      // the start step last logged
  QString lastSweepDir_;
};

}  // namespace studio::ui
