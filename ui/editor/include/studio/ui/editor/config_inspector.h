#pragma once
// The config inspector: a LLaMA-Factory training YAML in a highlighting editor, every problem the
// validator finds listed below it and marked at its line, and the world size to check against.
// Validation follows the text as it is typed, debounced, off the GUI thread.
#include <optional>

#include <QString>
#include <QStyle>
#include <QTimer>
#include <QWidget>

#include "studio/ui/editor/validation_result.h"

class QLabel;
class QModelIndex;
class QSpinBox;
class QSplitter;
class QTableView;

namespace studio::ui {

class CodeEditor;
class ConfigValidator;
class DiagnosticsModel;
class YamlHighlighter;

class ConfigInspector : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kDebounceMs = 300;

  explicit ConfigInspector(QWidget* parent = nullptr);

  // Replaces the text (unmodified, undo history cleared) and validates it at once. `path` is
  // the file it came from, empty for a new config.
  void setDocument(const QString& yaml, const QString& path);
  QString text() const;
  QString filePath() const { return path_; }
  void setFilePath(const QString& path) { path_ = path; }
  bool isModified() const;
  void setModified(bool modified);

  void setProcessesPerNode(int n);  // 0: the world size is not checked
  void setNodes(int n);
  void setBaseDir(const QString& dir);  // see ConfigValidator::setBaseDir

  // Validates the editor text now instead of after the typing pause.
  void validateNow();
  bool isValidating() const;
  // Moves the editor's cursor to a 1-based line and column.
  void jumpTo(int line, int column);
  QString summary() const;

  // The splitter between editor and table, for QSettings.
  QByteArray saveState() const;
  bool restoreState(const QByteArray& state);

  CodeEditor* editor() const { return editor_; }
  QTableView* diagnosticsView() const { return table_; }
  DiagnosticsModel* diagnosticsModel() const { return model_; }
  ConfigValidator* validator() const { return validator_; }
  QSpinBox* processesSpinBox() const { return nprocBox_; }
  QSpinBox* nodesSpinBox() const { return nodesBox_; }

 signals:
  // The newest validation result has been shown.
  void validated(const studio::ui::ValidationResult& result);
  void modificationChanged(bool modified);

 private:
  QWidget* buildWorldBar();
  QWidget* buildSummaryRow();
  void buildTable();
  void connectParts();
  void applyWorldSize();
  void showResult(const ValidationResult& result);
  void setSummary(const QString& text, std::optional<QStyle::StandardPixmap> icon);
  void markLines();
  void activate(const QModelIndex& index);
  QString displayName() const;

  CodeEditor* editor_;
  YamlHighlighter* highlighter_;
  DiagnosticsModel* model_;
  QTableView* table_;
  ConfigValidator* validator_;
  QSpinBox* nprocBox_ = nullptr;
  QSpinBox* nodesBox_ = nullptr;
  QLabel* summary_;
  QLabel* summaryIcon_;
  QSplitter* splitter_;
  QTimer debounce_;
  QString path_;
};

}  // namespace studio::ui
