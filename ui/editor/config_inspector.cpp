#include "studio/ui/editor/config_inspector.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/config_validator.h"
#include "studio/ui/editor/diagnostics_model.h"
#include "studio/ui/editor/yaml_highlighter.h"

namespace studio::ui {
namespace {

QSpinBox* spinBox(int minimum, int value, const QString& name, const QString& tip) {
  auto* box = new QSpinBox;
  box->setRange(minimum, 4096);
  box->setValue(value);
  box->setObjectName(name);
  box->setToolTip(tip);
  return box;
}

QStyle::StandardPixmap summaryIcon(const studio::CheckResult& check) {
  if (!check.ok()) return QStyle::SP_MessageBoxCritical;
  return check.diagnostics.empty() ? QStyle::SP_DialogApplyButton : QStyle::SP_MessageBoxWarning;
}

}  // namespace

ConfigInspector::ConfigInspector(QWidget* parent)
    : QWidget(parent),
      editor_(new CodeEditor),
      highlighter_(new YamlHighlighter(editor_->document())),
      model_(new DiagnosticsModel(this)),
      table_(new QTableView),
      validator_(new ConfigValidator(this)),
      summary_(new QLabel),
      summaryIcon_(new QLabel),
      splitter_(new QSplitter(Qt::Vertical)) {
  editor_->setObjectName(QStringLiteral("editor"));
  editor_->setAccessibleName(tr("Training config YAML"));
  highlighter_->setPalette(editor_->palette());
  buildTable();
  splitter_->addWidget(editor_);
  splitter_->addWidget(table_);
  splitter_->setStretchFactor(0, 3);
  splitter_->setStretchFactor(1, 1);
  splitter_->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(buildWorldBar());
  layout->addWidget(splitter_, 1);
  layout->addWidget(buildSummaryRow());

  debounce_.setSingleShot(true);
  debounce_.setInterval(kDebounceMs);
  connectParts();
  applyWorldSize();
}

QWidget* ConfigInspector::buildWorldBar() {
  nprocBox_ = spinBox(0, 8, QStringLiteral("nproc"),
                      tr("GPU processes per node (torchrun --nproc_per_node); 0: do not check "
                         "the world size"));
  nprocBox_->setSpecialValueText(tr("not checked"));
  nodesBox_ = spinBox(1, 1, QStringLiteral("nnodes"), tr("Nodes (torchrun --nnodes)"));

  auto* bar = new QWidget;
  auto* row = new QHBoxLayout(bar);
  const QMargins m = row->contentsMargins();
  row->setContentsMargins(m.left(), m.top() / 2, m.right(), m.bottom() / 2);
  auto* nprocLabel = new QLabel(tr("&Processes per node:"));
  nprocLabel->setBuddy(nprocBox_);
  auto* nodesLabel = new QLabel(tr("&Nodes:"));
  nodesLabel->setBuddy(nodesBox_);
  row->addWidget(nprocLabel);
  row->addWidget(nprocBox_);
  row->addSpacing(row->spacing() * 2);
  row->addWidget(nodesLabel);
  row->addWidget(nodesBox_);
  row->addStretch(1);
  return bar;
}

QWidget* ConfigInspector::buildSummaryRow() {
  summary_->setObjectName(QStringLiteral("summary"));
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  const QMargins m = layout->contentsMargins();
  layout->setContentsMargins(m.left(), m.top() / 3, m.right(), m.bottom() / 3);
  layout->addWidget(summaryIcon_);
  layout->addWidget(summary_, 1);
  return row;
}

// The icon tells valid from invalid at a glance; there is none while no config is open.
void ConfigInspector::setSummary(const QString& text, std::optional<QStyle::StandardPixmap> icon) {
  summary_->setText(text);
  const int size = style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, this);
  summaryIcon_->setPixmap(icon ? style()->standardIcon(*icon).pixmap(size) : QPixmap());
  summaryIcon_->setVisible(icon.has_value());
}

void ConfigInspector::buildTable() {
  table_->setObjectName(QStringLiteral("diagnostics"));
  table_->setAccessibleName(tr("Problems"));
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->verticalHeader()->hide();
  // Rows one text line high: the severity icon is small and the message stays on one line.
  const int iconSize = table_->style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, table_);
  table_->setIconSize(QSize(iconSize, iconSize));
  table_->verticalHeader()->setDefaultSectionSize(qMax(iconSize, table_->fontMetrics().height()) +
                                                  6);
  QHeaderView* header = table_->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::ResizeToContents);
  header->setStretchLastSection(true);
  header->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

void ConfigInspector::connectParts() {
  connect(editor_, &QPlainTextEdit::textChanged, &debounce_, qOverload<>(&QTimer::start));
  connect(&debounce_, &QTimer::timeout, this, &ConfigInspector::validateNow);
  connect(editor_, &CodeEditor::paletteChanged, this,
          [this] { highlighter_->setPalette(editor_->palette()); });
  connect(editor_->document(), &QTextDocument::modificationChanged, this,
          &ConfigInspector::modificationChanged);
  connect(nprocBox_, &QSpinBox::valueChanged, this, &ConfigInspector::applyWorldSize);
  connect(nodesBox_, &QSpinBox::valueChanged, this, &ConfigInspector::applyWorldSize);
  connect(validator_, &ConfigValidator::finished, this, &ConfigInspector::showResult);
  // Enter and, on some platforms, a single click activate; a double click should always jump.
  connect(table_, &QAbstractItemView::activated, this, &ConfigInspector::activate);
  connect(table_, &QAbstractItemView::doubleClicked, this, &ConfigInspector::activate);
}

void ConfigInspector::setDocument(const QString& yaml, const QString& path) {
  path_ = path;
  editor_->setPlainText(yaml);
  editor_->document()->setModified(false);
  validateNow();
}

QString ConfigInspector::text() const {
  return editor_->toPlainText();
}

bool ConfigInspector::isModified() const {
  return editor_->document()->isModified();
}

void ConfigInspector::setModified(bool modified) {
  editor_->document()->setModified(modified);
}

// The spin boxes hold the world size; changing them re-validates through applyWorldSize.
void ConfigInspector::setProcessesPerNode(int n) {
  nprocBox_->setValue(n);
}

void ConfigInspector::setNodes(int n) {
  nodesBox_->setValue(n);
}

void ConfigInspector::applyWorldSize() {
  validator_->setProcessesPerNode(nprocBox_->value());
  validator_->setNodes(nodesBox_->value());
  validateNow();
}

void ConfigInspector::setBaseDir(const QString& dir) {
  validator_->setBaseDir(dir);
  validateNow();
}

QString ConfigInspector::displayName() const {
  return path_.isEmpty() ? tr("untitled.yaml") : path_;
}

void ConfigInspector::validateNow() {
  debounce_.stop();
  // An untitled empty editor is no config yet, not an invalid one.
  if (path_.isEmpty() && editor_->document()->isEmpty()) {
    model_->setDiagnostics({});
    markLines();
    setSummary(tr("No config open"), std::nullopt);
    return;
  }
  validator_->validateText(text(), displayName());
}

bool ConfigInspector::isValidating() const {
  return debounce_.isActive() || validator_->isBusy();
}

void ConfigInspector::showResult(const ValidationResult& result) {
  model_->setDiagnostics(result.check.diagnostics);
  markLines();
  setSummary(summarize(result.check), summaryIcon(result.check));
  emit validated(result);
}

// The worst problem of each line marks it in the gutter.
void ConfigInspector::markLines() {
  const QIcon error = style()->standardIcon(QStyle::SP_MessageBoxCritical);
  const QIcon warning = style()->standardIcon(QStyle::SP_MessageBoxWarning);
  std::map<int, QIcon> marks;
  for (const auto& d : model_->diagnostics()) {
    const bool isError = d.severity == studio::Severity::Error;
    // An error replaces a warning's mark; a warning never replaces any mark.
    if (d.line > 0 && (isError || marks.count(d.line) == 0))
      marks[d.line] = isError ? error : warning;
  }
  editor_->setLineMarks(std::move(marks));
}

void ConfigInspector::activate(const QModelIndex& index) {
  const int line = index.data(DiagnosticsModel::LineRole).toInt();
  if (line > 0) jumpTo(line, index.data(DiagnosticsModel::ColumnRole).toInt());
}

void ConfigInspector::jumpTo(int line, int column) {
  editor_->goTo(line, column);
}

QString ConfigInspector::summary() const {
  return summary_->text();
}

QByteArray ConfigInspector::saveState() const {
  return splitter_->saveState();
}

bool ConfigInspector::restoreState(const QByteArray& state) {
  return splitter_->restoreState(state);
}

}  // namespace studio::ui
