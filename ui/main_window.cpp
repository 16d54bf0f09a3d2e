#include "studio/ui/main_window.h"

#include <QCloseEvent>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>

#include "studio/config/atomic_file.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"
#include "studio/ui/config_inspector.h"
#include "studio/version.h"

#include "local_path.h"

namespace studio::ui {
namespace {

constexpr int kStatusMs = 8000;

QString yamlFilter() {
  return QObject::tr("YAML files (*.yaml *.yml);;All files (*)");
}

// Named explicitly so the settings land in one place whatever the application calls itself.
QSettings studioSettings() {
  return QSettings(QStringLiteral("SeqStudio"), QStringLiteral("studio"));
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), inspector_(new ConfigInspector) {
  setCentralWidget(inspector_);
  createMenus();
  statusBar();  // created now, so the window does not change height at the first message
  connect(inspector_, &ConfigInspector::modificationChanged, this, &QWidget::setWindowModified);
  updateTitle();
  readSettings();
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::open);
  file->addAction(tr("&Save"), QKeySequence::Save, this, &MainWindow::save);
  file->addAction(tr("Save &As..."), QKeySequence::SaveAs, this, &MainWindow::saveAs);
  file->addAction(tr("&Export Normalised YAML..."), this, &MainWindow::exportNormalized);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About SeqStudio"), this, &MainWindow::about);
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
      tr("<h3>SeqStudio %1</h3><p>A studio for long-context fine-tuning runs: inspect and "
         "validate LLaMA-Factory training configs for the sequence-parallel engine "
         "<tt>studio-train</tt>.</p>")
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
  if (!restoreGeometry(settings.value(QStringLiteral("mainWindow/geometry")).toByteArray()))
    resize(1180, 780);
  restoreState(settings.value(QStringLiteral("mainWindow/state")).toByteArray());
  inspector_->restoreState(settings.value(QStringLiteral("inspector/splitter")).toByteArray());
}

void MainWindow::writeSettings() const {
  QSettings settings = studioSettings();
  settings.setValue(QStringLiteral("mainWindow/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("mainWindow/state"), saveState());
  settings.setValue(QStringLiteral("inspector/splitter"), inspector_->saveState());
}

}  // namespace studio::ui
