// studio: the desktop studio. Argument parsing and wiring only; the work lives in the ui/
// libraries.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractButton>
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QPlainTextEdit>
#include <QStatusBar>
#include <QTimer>

#include "cli_args.h"
#include "cmd_remote.h"
#include "studio/ui/chat/chat_panel.h"
#include "studio/ui/editor/config_inspector.h"
#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/remote/hosts_dialog.h"
#include "studio/ui/main_window.h"
#include "studio/ui/shell/app_theme.h"
#include "studio/ui/shell/demo_project.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/version.h"

namespace {

constexpr const char* kUsage =
    "usage: studio [OPTIONS] [CONFIG.yaml | RUN_DIR]\n"
    "\n"
    "The SeqStudio desktop studio: build SFT/DPO runs with sequence parallelism in the new-run\n"
    "wizard, launch them with studio-train, and watch loss, tokens/sec and per-GPU memory live.\n"
    "\n"
    "  studio                    the runs list and the dashboard of the last run\n"
    "  studio CONFIG.yaml        the wizard on a LLaMA-Factory training YAML (unknown keys kept)\n"
    "  studio RUN_DIR            the dashboard of a run folder (events.jsonl, LLaMA-Factory's\n                            trainer_log.jsonl, or Hugging Face's trainer_state.json)\n"
    "  studio --demo             the wizard on the built-in demo project, one click to launch\n"
    "  studio submit|attach|cancel|runs --host HOST ...\n"
    "                            remote runs over SSH, headless (studio submit --help)\n"
    "\n"
    "options:\n"
    "  --demo           open the wizard on the demo model and dataset\n"
    "  --inspect        open CONFIG.yaml in the config inspector instead of the wizard\n"
    "  --nproc N        processes per node the inspected config must fit (default 8)\n"
    "  --nnodes N       nodes for the inspector (default 1)\n"
    "  --overlay DIR    with RUN_DIR: also draw this run on the same charts (e.g. SP=1 vs SP=4)\n"
    "  --compare DIR    with RUN_DIR: overlay this run and list both runs' losses and the config\n"
    "                   keys that differ (Run > Compare on runs selected in the list)\n"
    "  --theme T        system, light or dark for this session (View > Theme saves a choice)\n"
    "  --runs-root DIR  where runs launched from the studio are created and found\n"
    "                   (default: ~/.local/share/SeqStudio/studio/runs)\n"
    "  --help           show this help and exit\n"
    "  --version        show the version and exit\n"
    "\n"
    "Without a display (no DISPLAY or WAYLAND_DISPLAY) the studio cannot open a window: train\n"
    "headless with `studio-train train CONFIG.yaml`, or run scripts/demo.sh.\n";

struct Options {
  std::optional<std::string> target;  // CONFIG.yaml or RUN_DIR
  bool demo = false;
  bool inspect = false;
  std::optional<int> nproc;
  std::optional<int> nnodes;
  std::optional<std::string> runsRoot;
  std::optional<std::string> overlay;
  std::optional<std::string> compare;  // with RUN_DIR: compare it with this run
  // Hidden, for scripts/screenshots.sh: grab the window (or each wizard page) to PNG and quit.
  std::optional<std::string> screenshot;
  std::optional<std::string> screenshotChart;  // scroll the dashboard to this chart first
  // With RUN_DIR: the Chat tab comparing the run's final model and first checkpoint on this
  // prompt, grabbed once both have answered.
  std::optional<std::string> screenshotChat;
  std::optional<std::string> wizardScreenshots;
  int screenshotDelayMs = 1500;
  std::optional<studio::ui::ThemeChoice> theme;  // --theme: this session's, not saved
  bool launch = false;  // with --demo: press Launch as soon as the demo model is ready
  // Hidden, for scripts/screenshots.sh: attach a run on a saved host ("HOST/RUN_ID"); grab the
  // Hosts dialog after a Test connection of the first saved host.
  std::optional<std::string> remoteRun;
  std::optional<std::string> hostsScreenshot;
};

// Returns an exit code when the command line is answered without a window (help, version,
// errors): those paths must work without a display, so they run before QApplication exists.
std::optional<int> parse(int argc, char** argv, Options& out) {
  studio::cli::Args args(std::vector<std::string>(argv + 1, argv + argc),
                         {"--nproc", "--nnodes", "--runs-root", "--overlay", "--compare", "--screenshot",
                          "--screenshot-wizard", "--screenshot-delay", "--screenshot-chart",
                          "--screenshot-chat", "--remote-run",
                          "--screenshot-hosts", "--theme"},
                         {"--help", "-h", "--version", "--demo", "--inspect", "--launch"});
  if (args.ok() && (args.flag("--help") || args.flag("-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.ok() && args.flag("--version")) {
    std::printf("studio %s\n", studio::kVersion);
    return 0;
  }
  if (args.value("--nproc")) out.nproc = args.positive_int("--nproc", 8);
  if (args.value("--nnodes")) out.nnodes = args.positive_int("--nnodes", 1);
  if (args.value("--screenshot-delay"))
    out.screenshotDelayMs = args.positive_int("--screenshot-delay", 1500);
  if (args.ok() && args.positional().size() > 1) {
    std::fprintf(stderr, "studio: at most one config file or run folder, got %zu\n%s",
                 args.positional().size(), kUsage);
    return 2;
  }
  if (!args.ok()) {
    std::fprintf(stderr, "studio: %s\n%s", args.error().c_str(), kUsage);
    return 2;
  }
  if (!args.positional().empty()) out.target = args.positional().front();
  out.demo = args.flag("--demo");
  out.inspect = args.flag("--inspect");
  out.launch = args.flag("--launch");
  out.runsRoot = args.value("--runs-root");
  out.overlay = args.value("--overlay");
  out.compare = args.value("--compare");
  out.screenshot = args.value("--screenshot");
  out.screenshotChart = args.value("--screenshot-chart");
  out.screenshotChat = args.value("--screenshot-chat");
  out.wizardScreenshots = args.value("--screenshot-wizard");
  out.remoteRun = args.value("--remote-run");
  out.hostsScreenshot = args.value("--screenshot-hosts");
  if (const auto theme = args.value("--theme")) {
    studio::ui::ThemeChoice choice;
    if (!studio::ui::parseThemeChoice(QString::fromStdString(*theme), &choice)) {
      std::fprintf(stderr, "studio: --theme takes system, light or dark, not '%s'\n", theme->c_str());
      return 2;
    }
    out.theme = choice;
  }
  if (out.remoteRun && out.remoteRun->find('/') == std::string::npos) {
    std::fprintf(stderr, "studio: --remote-run takes HOST/RUN_ID (HOST: a saved host's name)\n");
    return 2;
  }
  if (out.demo && out.target) {
    std::fprintf(stderr, "studio: --demo opens the demo project; give no file with it\n");
    return 2;
  }
  if (out.inspect && !out.target) {
    std::fprintf(stderr, "studio: --inspect needs a CONFIG.yaml\n");
    return 2;
  }
  if (out.overlay && !out.target) {
    std::fprintf(stderr, "studio: --overlay needs a RUN_DIR to draw it with\n");
    return 2;
  }
  if (out.compare && !out.target) {
    std::fprintf(stderr, "studio: --compare needs a RUN_DIR to compare it with\n");
    return 2;
  }
  if (out.screenshotChat && (!out.target || !out.screenshot)) {
    std::fprintf(stderr, "studio: --screenshot-chat needs a RUN_DIR and --screenshot OUT.png\n");
    return 2;
  }
  if (out.launch && !out.demo) {
    std::fprintf(stderr, "studio: --launch is for --demo\n");
    return 2;
  }
  const char* platform = std::getenv("QT_QPA_PLATFORM");
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !(platform && *platform)) {
    std::fprintf(stderr,
                 "studio: no display (DISPLAY and WAYLAND_DISPLAY are unset), so no window can "
                 "open.\nTrain headless with `studio-train train CONFIG.yaml`, or run "
                 "scripts/demo.sh, which falls back to a headless demo run.\n");
    return 3;
  }
  return std::nullopt;
}

void grabAndQuit(QWidget* widget, const QString& path) {
  const bool saved = widget->grab().save(path, "PNG");
  if (!saved) std::fprintf(stderr, "studio: cannot write %s\n", qPrintable(path));
  QCoreApplication::exit(saved ? 0 : 1);
}

// Grabs every wizard page into `dir` (01-model.png, ...), moving on with Next, then quits.
void screenshotWizardPages(studio::ui::RunWizard* wizard, const QString& dir, int delayMs) {
  QDir().mkpath(dir);
  auto step = std::make_shared<std::function<void(int)>>();
  *step = [wizard, dir, delayMs, step](int index) {
    QWizardPage* page = wizard->currentPage();
    const QString name = page ? page->title().toLower().replace(QLatin1Char(' '), QLatin1Char('-'))
                              : QStringLiteral("page");
    const QString path =
        QDir(dir).filePath(QStringLiteral("wizard-%1-%2.png").arg(index + 1, 2, 10, QLatin1Char('0')).arg(name));
    if (!wizard->grab().save(path, "PNG")) {
      std::fprintf(stderr, "studio: cannot write %s\n", qPrintable(path));
      QCoreApplication::exit(1);
      return;
    }
    std::printf("%s\n", qPrintable(path));
    std::fflush(stdout);
    const int before = wizard->currentId();
    wizard->next();
    if (wizard->currentId() == before) {  // the last page, or one that does not validate
      QCoreApplication::exit(wizard->nextId() == -1 ? 0 : 1);
      return;
    }
    QTimer::singleShot(delayMs, wizard, [step, index] { (*step)(index + 1); });
  };
  QTimer::singleShot(delayMs, wizard, [step] { (*step)(0); });
}

// Opens the Hosts dialog on the first saved host, tests the connection and grabs the dialog with
// the inventory (or the error) on screen, then quits.
void screenshotHosts(studio::ui::MainWindow* window, const QString& path) {
  auto* dialog = new studio::ui::HostsDialog(window->hosts(), window->prompts(), window);
  dialog->resize(1100, 980);
  dialog->show();
  QObject::connect(dialog, &studio::ui::HostsDialog::testFinished, dialog, [dialog, path] {
    QTimer::singleShot(500, dialog, [dialog, path] { grabAndQuit(dialog, path); });
  });
  if (auto* test = dialog->findChild<QAbstractButton*>(QStringLiteral("testConnection")))
    test->click();
}

// The Chat tab comparing the current run's final model (left) and its first checkpoint (right):
// `prompt` is sent to both once the run's models are listed, and the window grabbed once both
// have answered, then the studio quits.
void screenshotChat(studio::ui::MainWindow* window, const QString& prompt, const QString& path) {
  studio::ui::ChatPanel* chat = window->chat();
  window->showTab(studio::ui::MainWindow::ChatTab);
  chat->setCompare(true);
  QObject::connect(chat, &studio::ui::ChatPanel::answersFinished, window, [window, path] {
    QTimer::singleShot(300, window, [window, path] { grabAndQuit(window, path); });
  });
  QObject::connect(
      chat, &studio::ui::ChatPanel::modelsListed, window,
      [chat, prompt] {
        chat->promptBox()->setPlainText(prompt);
        if (chat->send()) return;
        std::fprintf(stderr, "studio: --screenshot-chat: %s holds no model to chat with\n",
                     qPrintable(chat->runFolder()));
        QCoreApplication::exit(1);
      },
      Qt::SingleShotConnection);
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = studio::cli::run_remote_command(argc, argv)) return *code;
  Options opt;
  if (const auto code = parse(argc, argv, opt)) return *code;

  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("SeqStudio"));
  QApplication::setApplicationName(QStringLiteral("studio"));
  QApplication::setApplicationVersion(QString::fromLatin1(studio::kVersion));

  studio::ui::StudioPaths paths;
  if (opt.runsRoot) paths.runsRoot = QDir(QString::fromLocal8Bit(opt.runsRoot->c_str())).absolutePath();
  studio::ui::MainWindow window(paths);
  if (opt.theme) window.theme()->setChoice(*opt.theme, /*save=*/false);
  studio::ui::ConfigInspector* inspector = window.inspector();
  if (opt.nproc) inspector->setProcessesPerNode(*opt.nproc);
  if (opt.nnodes) inspector->setNodes(*opt.nnodes);
  if (opt.screenshot || opt.wizardScreenshots) window.resize(1400, 900);  // the same picture always
  window.show();

  // The scripted paths (screenshots, --launch) act on the wizard once it is open and filled in.
  auto automate = [&opt](studio::ui::RunWizard* wizard) {
    if (opt.wizardScreenshots) {
      wizard->resize(1100, 800);
      screenshotWizardPages(wizard, QString::fromLocal8Bit(opt.wizardScreenshots->c_str()),
                            opt.screenshotDelayMs);
    }
    if (opt.launch) {
      // Through the wizard's own pages, as a user would: Next while each validates, then Launch.
      QTimer::singleShot(1500, wizard, [wizard] {
        while (wizard->nextId() != -1 && wizard->currentPage()->isComplete()) wizard->next();
        if (auto* launch = wizard->findChild<QAbstractButton*>(QStringLiteral("launch")))
          launch->click();
      });
    }
  };
  if (opt.target) {
    const QString target = QString::fromLocal8Bit(opt.target->c_str());
    if (QFileInfo(target).isDir()) {
      if (window.openRun(target) && opt.overlay)
        window.overlayRun(QString::fromLocal8Bit(opt.overlay->c_str()));
      if (opt.compare) {
        auto* dialog = window.compareRuns({target, QString::fromLocal8Bit(opt.compare->c_str())});
        if (!dialog) {
          std::fprintf(stderr, "studio: --compare: %s is not a run folder\n", opt.compare->c_str());
          return 2;
        }
        // With --screenshot: the comparison's own PNG export (the loss chart with both runs
        // above the table of losses and differing keys), once both runs are read.
        if (opt.screenshot) {
          const QString path = QString::fromLocal8Bit(opt.screenshot->c_str());
          opt.screenshot.reset();
          QObject::connect(dialog, &studio::ui::ComparisonDialog::loaded, dialog, [dialog, path] {
            QTimer::singleShot(1500, dialog, [dialog, path] {
              QString error;
              const bool ok = dialog->exportPng(path, &error);
              if (!ok) std::fprintf(stderr, "studio: %s\n", qPrintable(error));
              QCoreApplication::exit(ok ? 0 : 1);
            });
          });
        }
      }
    } else if (opt.overlay) {
      std::fprintf(stderr, "studio: --overlay needs a RUN_DIR, not a config file\n");
      return 2;
    } else if (opt.inspect) {
      window.openFile(target);
    } else if (window.openConfigInWizard(target)) {
      automate(window.wizard());
    }
  } else if (opt.demo) {
    QObject::connect(&window, &studio::ui::MainWindow::demoWizardOpened, &window, automate,
                     Qt::SingleShotConnection);
    window.openDemoWizard();
  }
  if (opt.remoteRun) {
    const QString spec = QString::fromLocal8Bit(opt.remoteRun->c_str());
    window.attachRemoteRun(spec.section(QLatin1Char('/'), 0, 0), spec.section(QLatin1Char('/'), 1));
  }
  if (opt.hostsScreenshot) {
    const QString path = QString::fromLocal8Bit(opt.hostsScreenshot->c_str());
    QTimer::singleShot(opt.screenshotDelayMs, &window, [&window, path] { screenshotHosts(&window, path); });
  }
  if (opt.screenshot && opt.screenshotChat) {
    screenshotChat(&window, QString::fromLocal8Bit(opt.screenshotChat->c_str()),
                   QString::fromLocal8Bit(opt.screenshot->c_str()));
  } else if (opt.screenshot) {
    const QString path = QString::fromLocal8Bit(opt.screenshot->c_str());
    std::optional<studio::ui::ChartKind> chart;
    if (opt.screenshotChart) {
      for (studio::ui::ChartKind kind : studio::ui::kAllCharts)
        if (studio::ui::chartName(kind).toStdString() == *opt.screenshotChart) chart = kind;
      if (!chart) {
        std::fprintf(stderr, "studio: --screenshot-chart %s is no chart\n", opt.screenshotChart->c_str());
        return 2;
      }
    }
    QTimer::singleShot(opt.screenshotDelayMs, &window, [&window, path, chart] {
      if (!chart) return grabAndQuit(&window, path);
      window.dashboard()->revealChart(*chart);
      QTimer::singleShot(300, &window, [&window, path] { grabAndQuit(&window, path); });
    });
  }
  return QApplication::exec();
}
