#include "studio/ui/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QCursor>
#include <QMenu>
#include <QCloseEvent>
#include <QDockWidget>
#include <QTabWidget>
#include <QTimer>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QSettings>
#include <QApplication>
#include <QStatusBar>
#include <QSystemTrayIcon>

#include "studio/base/atomic_file.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"
#include "studio/runs/events.h"
#include "studio/config/run_config.h"
#include "studio/ui/chat/chat_panel.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/gpu_sampler.h"
#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/config_inspector.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/remote/gui_prompts.h"
#include "studio/ui/remote/host_profile.h"
#include "studio/ui/remote/hosts_dialog.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/local_run_backend.h"
#include "studio/ui/runs/log_console.h"
#include "studio/ui/remote/remote_follower.h"
#include "studio/ui/remote/remote_run_backend.h"
#include "studio/ui/remote/remote_submitter.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/shell/attach_remote_dialog.h"
#include "studio/ui/shell/app_theme.h"
#include "studio/ui/shell/comparison_dialog.h"
#include "studio/ui/shell/demo_project.h"
#include "studio/ui/shell/runs_panel.h"
#include "studio/ui/shell/screen_colormap.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/version.h"

#include "studio/ui/base/local_path.h"
#include "studio/ui/base/window_fit.h"

namespace studio::ui {
namespace {

constexpr int kStatusMs = kNoticeMs;

QString yamlFilter() {
  return QObject::tr("YAML files (*.yaml *.yml);;All files (*)");
}

// Named explicitly so the settings land in one place whatever the application calls itself.
QSettings studioSettings() {
  return QSettings(QStringLiteral("SeqStudio"), QStringLiteral("studio"));
}

}  // namespace

MainWindow::MainWindow(const StudioPaths& paths, QWidget* parent)
    : QMainWindow(parent),
      paths_(paths),
      theme_(new AppTheme(qobject_cast<QApplication*>(QCoreApplication::instance()), this)),
      tabs_(new QTabWidget),
      inspector_(new ConfigInspector),
      dashboard_(new RunDashboard),
      chat_(new ChatPanel),
      store_(new RunStore(this)),
      log_(new LogConsole),
      runsPanel_(nullptr),
      demo_(nullptr),
      hosts_(new HostStore(this)),
      prompts_(new GuiPrompts(this)) {
  // Screen grabbers that read X11 visual by visual see the wizard and the dialogs as they are.
  useScreenColormap(qGuiApp);
  prompts_->setDialogParent(this);
  if (paths_.engine.isEmpty()) paths_.engine = findEngineProgram();
  if (paths_.resources.isEmpty()) paths_.resources = findResourcesDir();
  if (!paths_.runsRoot.isEmpty()) store_->setRoot(paths_.runsRoot);
  chat_->setEngineProgram(paths_.engine);
  createBackends();
  demo_ = new DemoProject(paths_.resources, paths_.engine, paths_.dataDir, this);

  tabs_->setObjectName(QStringLiteral("centralTabs"));
  tabs_->addTab(dashboard_, tr("Dashboard"));
  tabs_->addTab(inspector_, tr("Config"));
  tabs_->addTab(chat_, tr("Chat"));
  // Runs that report no GPU memory (LLaMA-Factory's) get their host's GPUs sampled while they
  // live, off the GUI thread.
  gpuSampler_ = new GpuSampler(this);
  gpuSampleTimer_ = new QTimer(this);
  gpuSampleTimer_->setInterval(10000);
  connect(gpuSampleTimer_, &QTimer::timeout, this, [this] {
    for (const QString& dir : dashboard_->runs()) {
      if (!dashboard_->wantsDeviceSamples(dir)) continue;
      const std::optional<RunInfo> info = store_->run(dir);
      if (info && isActive(info->state) && info->state != RunState::Queued) gpuSampler_->sample(dir);
    }
  });
  connect(gpuSampler_, &GpuSampler::sampled, dashboard_, &RunDashboard::addDeviceSample);
  connect(gpuSampler_, &GpuSampler::failed, this,
          [this](const QString&, const QString& message) { log_->appendStudioMessage(message); });
  gpuSampleTimer_->start();
  setCentralWidget(tabs_);
  runsPanel_ = new RunsPanel(store_);
  createDocks();
  createMenus();
  connectRuns();
  for (RunBackend* backend : backends_) connectBackend(backend);
  statusBar();  // created now, so the window does not change height at the first message
  connect(inspector_, &ConfigInspector::modificationChanged, this, &QWidget::setWindowModified);
  updateTitle();
  readSettings();
  store_->refresh();
  // Reattach: runs that were followed when the studio last closed go on being followed.
  for (RunBackend* backend : backends_) backend->followAll(store_->root());
}

MainWindow::~MainWindow() = default;

void MainWindow::createDocks() {
  auto dock = [this](const QString& title, const QString& name, QWidget* widget,
                     Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);  // saveState/restoreState key
    d->setWidget(widget);
    addDockWidget(area, d);
    return d;
  };
  runsDock_ = dock(tr("Runs"), QStringLiteral("runsDock"), runsPanel_, Qt::LeftDockWidgetArea);
  logDock_ = dock(tr("Log"), QStringLiteral("logDock"), log_, Qt::BottomDockWidgetArea);
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(runsPanel_->newRunAction());
  file->addAction(tr("Open Config in &Wizard..."), QKeySequence::Open, this,
                  &MainWindow::openConfigDialog);
  file->addAction(tr("New Run from &Demo"), QKeySequence(QStringLiteral("Ctrl+Shift+D")), this,
                  &MainWindow::openDemoWizard);
  file->addAction(runsPanel_->openRunAction());
  file->addAction(tr("&Hosts..."), QKeySequence(QStringLiteral("Ctrl+Shift+H")), this,
                  &MainWindow::showHostsDialog);
  file->addAction(tr("Attach &Remote Run..."), QKeySequence(QStringLiteral("Ctrl+Shift+R")), this,
                  &MainWindow::showAttachRemoteDialog);
  file->addSeparator();
  file->addAction(tr("&Inspect Config..."), QKeySequence(QStringLiteral("Ctrl+I")), this,
                  &MainWindow::open);
  file->addAction(tr("&Save Config"), QKeySequence::Save, this, &MainWindow::save);
  file->addAction(tr("Save Config &As..."), QKeySequence::SaveAs, this, &MainWindow::saveAs);
  file->addAction(tr("&Export Normalised YAML..."), this, &MainWindow::exportNormalized);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(runsPanel_->stopAction());
  run->addAction(runsPanel_->stopSweepAction());
  run->addAction(runsPanel_->overlayAction());
  run->addAction(tr("&Clear Overlays"), this, [this] {
    for (const QString& dir : dashboard_->runs())
      if (dir != currentRun_) dashboard_->removeRun(dir);
  });
  run->addAction(runsPanel_->forgetAction());
  run->addSeparator();
  run->addAction(runsPanel_->openFolderAction());
  run->addAction(runsPanel_->openLogAction());
  run->addAction(runsPanel_->openConfigAction());
  run->addAction(runsPanel_->compareAction());
  run->addSeparator();
  run->addAction(tr("&Refresh Runs"), QKeySequence::Refresh, store_, &RunStore::refresh);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("&Dashboard"), QKeySequence(QStringLiteral("Ctrl+1")), this,
                  [this] { showTab(DashboardTab); });
  view->addAction(tr("&Config"), QKeySequence(QStringLiteral("Ctrl+2")), this,
                  [this] { showTab(ConfigTab); });
  view->addSeparator();
  // The docks' own toggles, with mnemonics (their titles, which they take by default, have none).
  runsDock_->toggleViewAction()->setText(tr("&Runs List"));
  logDock_->toggleViewAction()->setText(tr("&Log"));
  view->addAction(runsDock_->toggleViewAction());
  view->addAction(logDock_->toggleViewAction());
  view->addSeparator();
  QMenu* themeMenu = view->addMenu(tr("&Theme"));
  themeMenu->setObjectName(QStringLiteral("themeMenu"));
  auto* themes = new QActionGroup(this);
  const std::pair<ThemeChoice, QString> choices[] = {{ThemeChoice::System, tr("Follow &System")},
                                                     {ThemeChoice::Light, tr("&Light")},
                                                     {ThemeChoice::Dark, tr("&Dark")}};
  for (const auto& [choice, text] : choices) {
    QAction* a = themeMenu->addAction(text);
    a->setObjectName(QStringLiteral("theme-") + themeChoiceName(choice));
    a->setCheckable(true);
    a->setChecked(theme_->choice() == choice);
    themes->addAction(a);
    connect(a, &QAction::triggered, this, [this, choice = choice] { theme_->setChoice(choice); });
  }

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About SeqStudio"), this, &MainWindow::about);
}

void MainWindow::connectRuns() {
  connect(runsPanel_, &RunsPanel::runSelected, this, &MainWindow::selectRun);
  connect(runsPanel_, &RunsPanel::selectedRunRemoved, this, [this](const QString& dir) {
    // Its charts stay as last read; nothing else is shown in its place unasked.
    const QString message =
        QFileInfo::exists(dir)
            ? tr("%1 is no longer in the runs list; its charts stay as last read").arg(dir)
            : tr("%1 is gone (deleted or moved); its charts stay as last read").arg(dir);
    log_->appendStudioMessage(message);
    statusBar()->showMessage(message, kStatusMs);
  });
  connect(runsPanel_->newRunAction(), &QAction::triggered, this, [this] { newRun(); });
  connect(runsPanel_->openRunAction(), &QAction::triggered, this, &MainWindow::openRunDialog);
  connect(runsPanel_->stopAction(), &QAction::triggered, this, &MainWindow::stopCurrentRun);
  connect(runsPanel_->stopSweepAction(), &QAction::triggered, this, &MainWindow::stopCurrentSweep);
  connect(runsPanel_->overlayAction(), &QAction::triggered, this, &MainWindow::overlayCurrentRun);
  connect(store_, &RunStore::runsChanged, this, [this] {
    if (!currentRun_.isEmpty()) runsPanel_->selectRun(currentRun_);
    notifyEndedRuns();
  });
  connect(runsPanel_, &RunsPanel::compareRequested, this, [this](const QStringList& dirs) { compareRuns(dirs); });
  connect(runsPanel_, &RunsPanel::configRequested, this, [this](const QString& path) {
    if (openFile(path)) showTab(ConfigTab);
  });
  // A failed run's config error: the config in the Config tab, at the line.
  connect(dashboard_, &RunDashboard::openConfigRequested, this,
          [this](const QString& path, int line, int column) {
            if (openFile(path)) inspector_->editor()->goTo(line, column);
          });
  connect(dashboard_, &RunDashboard::runEnded, this, [this](const QString& dir, const QString& state) {
    statusBar()->showMessage(tr("%1: %2").arg(QFileInfo(dir).fileName(), state), kStatusMs);
    store_->refresh();
  });
  connect(demo_, &DemoProject::modelFailed, this, [this](const QString& message) {
    log_->appendStudioMessage(message);
    statusBar()->showMessage(message, kStatusMs);
  });
}

void MainWindow::showTab(Tab tab) {
  tabs_->setCurrentIndex(tab);
}

void MainWindow::selectRun(const QString& dir) {
  if (dir.isEmpty() || dir == currentRun_) return;
  currentRun_ = dir;
  dashboard_->showRun(dir);
  log_->setRun(dir);
  chat_->setRunFolder(dir);
  runsPanel_->selectRun(dir);
  showTab(DashboardTab);
}

namespace {

// The absolute path of a run folder, or "" with the reason in `error`.
QString runFolder(const QString& path, QString& error) {
  const QDir dir(path);
  if (isRunFolder(dir.absolutePath())) return dir.absolutePath();
  error = QObject::tr("%1 is not a run folder: it holds neither %2 nor %3 (nor LLaMA-Factory's %4, "
                      "nor a Hugging Face %5 at its top or in a checkpoint-N folder)")
              .arg(QDir::toNativeSeparators(path), QString::fromLatin1(studio::kEventsFileName),
                   QString::fromLatin1(studio::kStatusFileName),
                   QString::fromLatin1(studio::kTrainerLogFileName),
                   QString::fromLatin1(studio::kTrainerStateFileName));
  return {};
}

}  // namespace

QString MainWindow::addRunFolder(const QString& path) {
  QString error;
  const QString dir = runFolder(path, error);
  if (dir.isEmpty())
    statusBar()->showMessage(error);
  else
    store_->addRun(dir);
  return dir;
}

bool MainWindow::openRun(const QString& path) {
  const QString dir = addRunFolder(path);
  if (dir.isEmpty()) return false;
  selectRun(dir);
  return true;
}

bool MainWindow::overlayRun(const QString& path) {
  const QString dir = addRunFolder(path);
  if (dir.isEmpty()) return false;
  if (currentRun_.isEmpty()) {
    selectRun(dir);
  } else if (!dashboard_->runs().contains(dir)) {
    dashboard_->addOverlayRun(dir);
    showTab(DashboardTab);
  }
  return true;
}

void MainWindow::openRunDialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open Run Folder"), dialogDir());
  if (!dir.isEmpty()) openRun(dir);
}

void MainWindow::stopCurrentRun() {
  const QString dir = runsPanel_->selectedRun();
  if (dir.isEmpty()) return;
  RunBackend* backend = backendOf(dir);
  log_->appendStudioMessage(backend->stopDescription(dir));
  backend->stop(dir);
}

void MainWindow::stopCurrentSweep() {
  const QString dir = runsPanel_->selectedRun();
  const auto info = dir.isEmpty() ? std::nullopt : store_->run(dir);
  if (!info || info->sweepDir.isEmpty()) return;
  RunBackend* backend = backendOf(dir);
  log_->appendStudioMessage(backend->stopSweepDescription(info->sweepDir));
  backend->stopSweep(info->sweepDir, runsPanel_->sweepRuns(dir));
}

// A menu of the other runs, each checked while it is drawn on the dashboard: toggling one adds or
// removes it, so the run selected in the list stays the primary one.
void MainWindow::overlayCurrentRun() {
  QMenu menu(this);
  const QStringList shown = dashboard_->runs();
  for (const RunInfo& info : store_->runs()) {
    if (info.dir == currentRun_) continue;
    QAction* a = menu.addAction(QStringLiteral("%1  (%2)").arg(info.name, info.stateText));
    a->setCheckable(true);
    a->setChecked(shown.contains(info.dir));
    connect(a, &QAction::toggled, this, [this, dir = info.dir](bool on) {
      if (on)
        overlayRun(dir);
      else
        dashboard_->removeRun(dir);
    });
  }
  if (menu.isEmpty()) {
    statusBar()->showMessage(tr("No other run to draw next to this one"), kStatusMs);
    return;
  }
  menu.exec(QCursor::pos());
}

RunWizard* MainWindow::showWizard() {
  if (wizard_) wizard_->deleteLater();
  wizard_ = new RunWizard(this);
  wizard_->setAttribute(Qt::WA_DeleteOnClose);
  wizard_->setDemoModelDir(demo_->modelDir());
  wizard_->setEngineProgram(paths_.engine);
  wizard_->setHosts(hosts_->hosts());
  connect(hosts_, &HostStore::hostsChanged, wizard_,
          [this] { wizard_->setHosts(hosts_->hosts()); });
  connect(wizard_, &RunWizard::manageHostsRequested, this, &MainWindow::showHostsDialog);
  connect(wizard_, &RunWizard::launchRequested, this, &MainWindow::onLaunchRequested);
  connect(wizard_, &RunWizard::sweepRequested, this, &MainWindow::onSweepRequested);
  // Every page shows whole at 1100 x 800 (the model page's facts, the memory page's table).
  fitToScreen(wizard_, QSize(1100, 800));
  wizard_->show();
  return wizard_;
}

RunWizard* MainWindow::newRun() {
  return showWizard();
}

bool MainWindow::openConfigInWizard(const QString& path) {
  RunWizard* w = showWizard();
  QString error;
  if (!w->openConfig(path, &error)) {
    statusBar()->showMessage(error.isEmpty() ? tr("Cannot open %1").arg(path) : error);
    w->close();
    return false;
  }
  return true;
}

void MainWindow::openConfigDialog() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open Training Config"), dialogDir(), yamlFilter());
  if (!path.isEmpty()) openConfigInWizard(path);
}

void MainWindow::openDemoWizard() {
  auto open = [this] {
    RunWizard* w = showWizard();
    QString error;
    if (!w->loadDemo(demo_->sftConfigPath(), &error)) {
      log_->appendStudioMessage(tr("Cannot load the demo project: %1").arg(error));
      statusBar()->showMessage(error, kStatusMs);
    }
    emit demoWizardOpened(w);
  };
  if (demo_->isModelReady()) {
    open();
    return;
  }
  // The wizard reads the model folder as it opens, so it opens once the model is there.
  log_->appendStudioMessage(tr("Creating the demo model in %1 ...").arg(demo_->modelDir()));
  statusBar()->showMessage(tr("Creating the demo model ..."));
  connect(demo_, &DemoProject::modelReady, this, [this, open](const QString& dir) {
    log_->appendStudioMessage(tr("Demo model ready: %1").arg(dir));
    statusBar()->clearMessage();
    open();
  }, Qt::SingleShotConnection);
  demo_->ensureModel();
}

void MainWindow::onLaunchRequested(const studio::RunConfig& config, const QString& baseDir,
                                   const LaunchTarget& target) {
  startRun(config, baseDir, target);  // the wizard closes once the run has started
}

void MainWindow::onSweepRequested(const studio::RunConfig& config, const QString& baseDir,
                                  const LaunchTarget& target, const SweepChoice& sweep) {
  if (target.kind == LaunchTarget::Ssh) {
    // One Slurm job array on the host; the wizard closes once its points are followed.
    if (!remoteRuns_->startSweep(config, baseDir, target, sweep.axes, sweep.list, sweep.parallel,
                                 store_->root()))
      statusBar()->showMessage(remoteRuns_->busyMessage(), kStatusMs);
    return;
  }
  SweepLaunchRequest request;
  request.config = config;
  request.baseDir = baseDir;
  request.name = sweep.name;
  request.axes = sweep.axes;
  request.list = sweep.list;
  request.nproc = target.nproc;
  request.parallel = sweep.parallel;
  const QString dir = localRuns_->launchSweep(request, store_->root());
  if (dir.isEmpty()) return;
  lastSweepDir_ = dir;
  if (wizard_) wizard_->close();
}

bool MainWindow::startRun(const studio::RunConfig& config, const QString& baseDir,
                          const LaunchTarget& target) {
  RunBackend* backend = backendFor(target);
  if (!backend->start(config, baseDir, target, store_->root())) {
    statusBar()->showMessage(backend->busyMessage(), kStatusMs);
    return false;
  }
  return true;
}

QString MainWindow::launchLocal(const studio::RunConfig& config, const QString& baseDir,
                                const LaunchTarget& target) {
  return localRuns_->launch(config, baseDir, target, store_->root());
}

bool MainWindow::launchRemote(const studio::RunConfig& config, const QString& baseDir,
                              const LaunchTarget& target) {
  return startRun(config, baseDir, target);
}

LocalLauncher* MainWindow::launcher() const { return localRuns_->launcher(); }
RemoteRuns* MainWindow::remoteRuns() const { return remoteRuns_->runs(); }
RemoteSubmitter* MainWindow::remoteSubmitter() const { return remoteRuns_->submitter(); }

void MainWindow::createBackends() {
  localRuns_ = new LocalRunBackend(this);
  localRuns_->launcher()->setEngineProgram(paths_.engine);
  localRuns_->launcher()->setRunsRoot(store_->root());
  remoteRuns_ = new RemoteRunBackend(
      RemotePrompts{prompts_->hostKeyPolicy(), prompts_->secretPrompt()}, this);
  backends_ = {localRuns_, remoteRuns_};
  connect(remoteRuns_, &RemoteRunBackend::attached, this, [this](const QString& dir) {
    selectRun(dir);
    emit remoteAttached(dir);
  });
  submitProgress_ = new QProgressBar;
  submitProgress_->setObjectName(QStringLiteral("submitProgress"));
  submitProgress_->setMaximumWidth(220);
  submitProgress_->setTextVisible(false);
  submitProgress_->hide();
  statusBar()->addPermanentWidget(submitProgress_);
}

RunBackend* MainWindow::backendFor(const LaunchTarget& target) const {
  for (RunBackend* backend : backends_)
    if (backend->startsOn(target)) return backend;
  return localRuns_;
}

RunBackend* MainWindow::backendOf(const QString& dir) const {
  if (const std::optional<RunInfo> info = store_->run(dir)) {
    for (RunBackend* backend : backends_)
      if (backend->owns(*info)) return backend;
  }
  return localRuns_;
}

void MainWindow::connectBackend(RunBackend* backend) {
  connect(backend, &RunBackend::notice, this, [this](const QString& text, bool log, int statusMs) {
    if (log) log_->appendStudioMessage(text);
    if (statusMs > 0) statusBar()->showMessage(text, statusMs);
  });
  // While a start uploads, the bar shows the bytes of the file being uploaded (busy otherwise)
  // and the log gets one line per step.
  connect(backend, &RunBackend::startProgress, this,
          [this](const QString& text, int fileIndex, int fileCount, qint64 bytes, qint64 total) {
            const QString step =
                fileCount > 0 ? tr("%1 (file %2 of %3)").arg(text).arg(fileIndex).arg(fileCount)
                              : text;
            if (step != submitStep_) {
              submitStep_ = step;
              log_->appendStudioMessage(step);
            }
            statusBar()->showMessage(step);
            submitProgress_->setRange(0, total > 0 ? 1000 : 0);
            if (total > 0) submitProgress_->setValue(static_cast<int>(bytes * 1000 / total));
            submitProgress_->show();
          });
  connect(backend, &RunBackend::started, this,
          [this, backend](const QString& dir) { onRunStarted(backend, dir); });
  connect(backend, &RunBackend::startFailed, this, [this, backend](const QString& error) {
    submitProgress_->hide();
    submitStep_.clear();
    if (backend->startFailureIsModal()) {
      QMessageBox::warning(this, tr("Launch failed"), error);
      return;
    }
    log_->appendStudioMessage(error);
    statusBar()->showMessage(error, kStatusMs);
  });
  connect(backend, &RunBackend::runsChanged, store_, &RunStore::refresh);
}

void MainWindow::onRunStarted(RunBackend* backend, const QString& dir) {
  if (submitProgress_->isVisible()) {
    submitProgress_->hide();
    statusBar()->clearMessage();
  }
  submitStep_.clear();
  store_->refresh();  // it is under the store's root: listed as Starting from the next scan
  selectRun(dir);
  if (wizard_) wizard_->close();
  if (backend == remoteRuns_) emit remoteLaunched(dir);
}

bool MainWindow::attachRemoteRun(const QString& hostName, const QString& runId) {
  const HostProfile* profile = hosts_->host(hostName);
  if (!profile) {
    statusBar()->showMessage(
        tr("No saved host is called '%1' (File > Hosts... lists them)").arg(hostName), kStatusMs);
    return false;
  }
  log_->appendStudioMessage(
      tr("Attaching %1 on %2 (%3) ...").arg(runId, hostName, profile->target));
  remoteRuns_->attach(profile->hostRef(), profile->remoteRoot, runId, store_->root());
  return true;
}

void MainWindow::showAttachRemoteDialog() {
  auto* dialog = new AttachRemoteDialog(hosts_, remoteRuns_->runs(), this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this,
          [this, dialog] { attachRemoteRun(dialog->hostName(), dialog->runId()); });
  fitToScreen(dialog, QSize(640, 360));
  dialog->open();
  if (!hosts_->hosts().isEmpty()) dialog->listRuns();
}

void MainWindow::showHostsDialog() {
  auto* dialog = new HostsDialog(hosts_, prompts_, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  fitToScreen(dialog, QSize(1000, 720));
  dialog->open();
}

ComparisonDialog* MainWindow::compareRuns(const QStringList& paths) {
  QStringList dirs;
  for (const QString& path : paths) {
    const QString dir = addRunFolder(path);  // "" with the reason in the status bar
    if (!dir.isEmpty() && !dirs.contains(dir)) dirs << dir;
  }
  if (dirs.size() < 2) return nullptr;
  selectRun(dirs.front());
  for (const QString& other : dirs.mid(1))
    if (!dashboard_->runs().contains(other)) overlayRun(other);
  showTab(DashboardTab);
  auto* dialog = new ComparisonDialog(dirs, dashboard_->findChild<QWidget*>(QStringLiteral("loss")), this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  fitToScreen(dialog, QSize(900, 560));
  dialog->show();
  emit comparisonOpened(dialog);
  return dialog;
}

void MainWindow::notifyEndedRuns() {
  QHash<QString, int> now;
  QStringList ended;
  for (const RunInfo& info : store_->runs()) {
    now.insert(info.dir, static_cast<int>(info.state));
    const auto before = lastStates_.find(info.dir);
    if (before == lastStates_.end()) continue;  // newly listed: nothing ended under our eyes
    const auto was = static_cast<RunState>(*before);
    const bool wasAlive = was == RunState::Running || was == RunState::Starting;
    const bool ends = info.state == RunState::Finished || info.state == RunState::Failed ||
                      info.state == RunState::Stopped || info.state == RunState::Lost;
    if (!wasAlive || !ends) continue;
    // In the foreground the runs list and the dashboard already show it.
    if (isActiveWindow() && QGuiApplication::applicationState() == Qt::ApplicationActive) continue;
    const QString message =
        info.reason.isEmpty() ? tr("Run %1 %2").arg(info.name, info.stateText.toLower())
                              : tr("Run %1 %2: %3").arg(info.name, info.stateText.toLower(), info.reason);
    if (QSystemTrayIcon::isSystemTrayAvailable()) {
      if (!tray_) {
        tray_ = new QSystemTrayIcon(windowIcon(), this);
        tray_->setToolTip(QStringLiteral("SeqStudio"));
      }
      tray_->show();
      tray_->showMessage(tr("SeqStudio"), message,
                         info.state == RunState::Finished ? QSystemTrayIcon::Information
                                                          : QSystemTrayIcon::Warning);
    }
    QApplication::alert(this);
    log_->appendStudioMessage(message);
    statusBar()->showMessage(message, kStatusMs);
    emit runEndedInBackground(info.dir, message);
  }
  lastStates_ = std::move(now);
}

void MainWindow::updateTitle() {
  const QString path = inspector_->filePath();
  const QString name = path.isEmpty() ? tr("untitled.yaml") : QFileInfo(path).fileName();
  // [*] is where Qt shows the modified marker while windowModified is set.
  setWindowTitle(tr("%1[*] - SeqStudio").arg(name));
  setWindowModified(inspector_->isModified());
}

bool MainWindow::openFile(const QString& path) {
  std::string text, error;
  if (!studio::read_file(localPath(path), text, error)) {
    statusBar()->showMessage(QString::fromStdString(error));
    return false;
  }
  inspector_->setDocument(QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())),
                          QFileInfo(path).absoluteFilePath());
  updateTitle();
  showTab(ConfigTab);
  statusBar()->showMessage(tr("Opened %1").arg(QDir::toNativeSeparators(path)), kStatusMs);
  return true;
}

bool MainWindow::saveFile(const QString& path) {
  const QByteArray text = inspector_->text().toUtf8();
  const std::string error =
      studio::write_file_atomic(localPath(path), std::string_view(text.data(), text.size()));
  if (!error.empty()) {
    QMessageBox::warning(this, tr("Save failed"), QString::fromStdString(error));
    return false;
  }
  inspector_->setFilePath(QFileInfo(path).absoluteFilePath());
  inspector_->setModified(false);
  updateTitle();
  statusBar()->showMessage(tr("Saved %1").arg(QDir::toNativeSeparators(path)), kStatusMs);
  return true;
}

QString MainWindow::dialogDir() const {
  const QString path = inspector_->filePath();
  return path.isEmpty() ? QDir::currentPath() : QFileInfo(path).absolutePath();
}

void MainWindow::open() {
  if (!maybeSave()) return;
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open Training Config"), dialogDir(), yamlFilter());
  if (!path.isEmpty()) openFile(path);
}

bool MainWindow::save() {
  return inspector_->filePath().isEmpty() ? saveAs() : saveFile(inspector_->filePath());
}

bool MainWindow::saveAs() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Save Training Config"), dialogDir(), yamlFilter());
  return !path.isEmpty() && saveFile(path);
}

void MainWindow::exportNormalized() {
  const QFileInfo source(inspector_->filePath().isEmpty() ? tr("untitled.yaml")
                                                          : inspector_->filePath());
  const QString suggested =
      QDir(dialogDir()).filePath(source.completeBaseName() + QStringLiteral(".normalized.yaml"));
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export Normalised YAML"), suggested, yamlFilter());
  if (path.isEmpty()) return;
  if (const QString error = exportNormalizedFile(path); !error.isEmpty())
    QMessageBox::warning(this, tr("Export failed"), error);
  else
    statusBar()->showMessage(tr("Exported %1").arg(QDir::toNativeSeparators(path)), kStatusMs);
}

QString MainWindow::exportNormalizedFile(const QString& path) const {
  const studio::LoadResult loaded =
      studio::load_config_string(inspector_->text().toStdString(), "config");
  if (!loaded.ok())
    return tr("The config cannot be read; fix these errors first:\n%1")
        .arg(QString::fromStdString(studio::format_all(loaded.diagnostics)));
  const std::string yaml = studio::to_yaml(studio::normalized(loaded.config), YamlStyle::Full);
  return QString::fromStdString(studio::write_file_atomic(localPath(path), yaml));
}

void MainWindow::about() {
  QMessageBox::about(
      this, tr("About SeqStudio"),
      tr("<h3>SeqStudio %1</h3><p>A studio for long-context fine-tuning runs: build SFT and DPO "
         "runs with sequence parallelism, launch them with the engine <tt>studio-train</tt>, and "
         "watch them live. Runs are read from their folders, so closing the studio never stops "
         "or forgets a run.</p>")
          .arg(QString::fromLatin1(studio::kVersion)));
}

// Asks before unsaved edits are thrown away; false when the user cancels.
bool MainWindow::maybeSave() {
  if (!inspector_->isModified()) return true;
  const auto answer = QMessageBox::question(
      this, tr("Unsaved changes"), tr("The config has unsaved changes. Save them?"),
      QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (answer == QMessageBox::Save) return save();
  return answer == QMessageBox::Discard;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!maybeSave()) {
    event->ignore();
    return;
  }
  writeSettings();
  event->accept();
}

void MainWindow::readSettings() {
  QSettings settings = studioSettings();
  // First start: 1480 x 920 where the screen allows (the dashboard's four charts at once on a
  // 1600 x 1000 screen), centred.
  if (!restoreGeometry(settings.value(QStringLiteral("mainWindow/geometry")).toByteArray()))
    fitToScreen(this, QSize(1480, 920));
  restoreState(settings.value(QStringLiteral("mainWindow/state")).toByteArray());
  inspector_->restoreState(settings.value(QStringLiteral("inspector/splitter")).toByteArray());
  const int tab = settings.value(QStringLiteral("mainWindow/tab")).toInt();
  showTab(tab == ConfigTab || tab == ChatTab ? static_cast<Tab>(tab) : DashboardTab);
}

void MainWindow::writeSettings() const {
  QSettings settings = studioSettings();
  settings.setValue(QStringLiteral("mainWindow/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("mainWindow/state"), saveState());
  settings.setValue(QStringLiteral("inspector/splitter"), inspector_->saveState());
  settings.setValue(QStringLiteral("mainWindow/tab"), tabs_->currentIndex());
}

}  // namespace studio::ui
