#pragma once
// The studio's main window: the config inspector with File and Help menus. Geometry and layout
// persist in QSettings; colours follow the system palette.
#include <QMainWindow>

namespace studio::ui {

class ConfigInspector;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Loads a config into the inspector. On failure the reason goes to the status bar (no dialog,
  // so a bad path on the command line never blocks start-up) and false is returned.
  bool openFile(const QString& path);
  // Writes the editor text as it is, atomically. Failures are reported in a message box.
  bool saveFile(const QString& path);
  // Writes the config as the engine runs it (normalised, every key with its value) to `path`.
  // Returns an empty string, or why it could not: unreadable YAML or a failed write.
  QString exportNormalizedFile(const QString& path) const;
  ConfigInspector* inspector() const { return inspector_; }

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void createMenus();
  void open();
  bool save();
  bool saveAs();
  void exportNormalized();
  void about();
  bool maybeSave();
  void updateTitle();
  void readSettings();
  void writeSettings() const;
  QString dialogDir() const;

  ConfigInspector* inspector_;
};

}  // namespace studio::ui
