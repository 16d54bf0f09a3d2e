// studio: the desktop studio. Argument parsing and wiring only; the work lives in studio_ui.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <QApplication>
#include <QSpinBox>
#include <QStatusBar>
#include <QTimer>

#include "cli_args.h"
#include "studio/ui/config_inspector.h"
#include "studio/ui/main_window.h"
#include "studio/version.h"

namespace {

constexpr const char* kUsage =
    "usage: studio [OPTIONS] [CONFIG.yaml]\n"
    "\n"
    "Opens the config inspector: a LLaMA-Factory training YAML with syntax highlighting and\n"
    "every validation problem located at its line. Relative paths in the config resolve\n"
    "against the working directory, as they do for a training launched from it.\n"
    "\n"
    "options:\n"
    "  --nproc N     processes per node the config must fit (default 8)\n"
    "  --nnodes N    nodes (default 1)\n"
    "  --help        show this help and exit\n"
    "  --version     show the version and exit\n";

struct Options {
  std::optional<std::string> config;
  std::optional<int> nproc;
  std::optional<int> nnodes;
  std::optional<std::string> screenshot;  // hidden: grab the window to PNG and quit
};

// Returns an exit code when the command line is answered without a window (help, version,
// errors): those paths must work without a display, so they run before QApplication exists.
std::optional<int> parse(int argc, char** argv, Options& out) {
  studio::cli::Args args(std::vector<std::string>(argv + 1, argv + argc),
                         {"--nproc", "--nnodes", "--screenshot"}, {"--help", "-h", "--version"});
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
  if (args.ok() && args.positional().size() > 1) {
    std::fprintf(stderr, "studio: at most one config file, got %zu\n%s", args.positional().size(),
                 kUsage);
    return 2;
  }
  if (!args.ok()) {
    std::fprintf(stderr, "studio: %s\n%s", args.error().c_str(), kUsage);
    return 2;
  }
  if (!args.positional().empty()) out.config = args.positional().front();
  out.screenshot = args.value("--screenshot");
  return std::nullopt;
}

// Once the window is up and the first validation has been shown, grab the window and quit.
void scheduleScreenshot(studio::ui::MainWindow& window, const QString& path) {
  auto shoot = [&window, path] {
    // A short pause lets the table and gutter repaint with the result first.
    QTimer::singleShot(200, &window, [&window, path] {
      const bool saved = window.grab().save(path, "PNG");
      if (!saved) std::fprintf(stderr, "studio: cannot write %s\n", qPrintable(path));
      QCoreApplication::exit(saved ? 0 : 1);
    });
  };
  studio::ui::ConfigInspector* inspector = window.inspector();
  if (inspector->isValidating())
    QObject::connect(inspector, &studio::ui::ConfigInspector::validated, &window, shoot,
                     Qt::SingleShotConnection);
  else
    shoot();
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (const auto code = parse(argc, argv, opt)) return *code;

  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("SeqStudio"));
  QApplication::setApplicationName(QStringLiteral("studio"));
  QApplication::setApplicationVersion(QString::fromLatin1(studio::kVersion));

  studio::ui::MainWindow window;
  studio::ui::ConfigInspector* inspector = window.inspector();
  if (opt.nproc) inspector->setProcessesPerNode(*opt.nproc);
  if (opt.nnodes) inspector->setNodes(*opt.nnodes);
  if (opt.config) window.openFile(QString::fromLocal8Bit(opt.config->c_str()));
  if (opt.screenshot) window.resize(1280, 880);  // the same picture whatever was saved before
  window.show();
  if (opt.screenshot) scheduleScreenshot(window, QString::fromLocal8Bit(opt.screenshot->c_str()));
  return QApplication::exec();
}
