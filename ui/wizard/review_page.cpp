#include "studio/ui/wizard/review_page.h"

#include <QClipboard>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include "studio/ui/base/local_path.h"
#include "studio/config/config_io.h"
#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/diagnostics_model.h"
#include "studio/config/llamafactory_target.h"
#include "studio/ui/wizard/launch_command.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/editor/yaml_highlighter.h"

namespace studio::ui {

ReviewPage::ReviewPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft, {}, parent),
      editor_(new CodeEditor),
      highlighter_(new YamlHighlighter(editor_->document())),
      model_(new DiagnosticsModel(this)),
      table_(new QTableView),
      summary_(new QLabel),
      kept_(new QLabel),
      baseDir_(new QLabel),
      command_(new QLabel) {
  setTitle(tr("Review"));
  setSubTitle(tr("The run config as it will be written, and every problem found in it."));
  editor_->setObjectName(QStringLiteral("yaml"));
  editor_->setAccessibleName(tr("Run config YAML"));
  editor_->setReadOnly(true);
  highlighter_->setPalette(editor_->palette());
  table_->setObjectName(QStringLiteral("diagnostics"));
  table_->setAccessibleName(tr("Problems"));
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(false);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  lfProblems_ = new QLabel;
  lfProblems_->setObjectName(QStringLiteral("llamafactoryProblems"));
  for (QLabel* label : {summary_, kept_, baseDir_, command_, lfProblems_}) {
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setTextFormat(Qt::PlainText);
  }
  summary_->setObjectName(QStringLiteral("summary"));
  kept_->setObjectName(QStringLiteral("keptKeys"));
  command_->setObjectName(QStringLiteral("commandLine"));

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(editor_);
  splitter->addWidget(table_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(splitter, 1);
  layout->addWidget(summary_);
  layout->addWidget(kept_);
  layout->addWidget(baseDir_);
  layout->addWidget(command_);
  layout->addWidget(lfProblems_);
  layout->addWidget(buildButtons());

  connect(editor_, &CodeEditor::paletteChanged, this,
          [this] { highlighter_->setPalette(editor_->palette()); });
  connect(table_, &QAbstractItemView::activated, this, [this](const QModelIndex& index) {
    editor_->goTo(index.data(DiagnosticsModel::LineRole).toInt(),
                  index.data(DiagnosticsModel::ColumnRole).toInt());
  });
  connect(draft, &RunDraft::changed, this, &ReviewPage::update);
  connect(draft, &RunDraft::validated, this, &ReviewPage::update);
  update();
}

QWidget* ReviewPage::buildButtons() {
  export_ = new QPushButton(tr("&Export YAML..."));
  copy_ = new QPushButton(tr("&Copy command line"));
  launch_ = new QPushButton(tr("&Launch"));
  sweep_ = new QPushButton(tr("&Sweep..."));
  sweep_->setObjectName(QStringLiteral("sweep"));
  connect(sweep_, &QPushButton::clicked, this, &ReviewPage::sweepClicked);
  export_->setObjectName(QStringLiteral("export"));
  copy_->setObjectName(QStringLiteral("copy"));
  launch_->setObjectName(QStringLiteral("launch"));
  connect(export_, &QPushButton::clicked, this, &ReviewPage::exportWithDialog);
  connect(copy_, &QPushButton::clicked, this, &ReviewPage::copyCommandLine);
  connect(launch_, &QPushButton::clicked, this, &ReviewPage::launchClicked);
  trainer_ = new QComboBox;
  trainer_->setObjectName(QStringLiteral("trainer"));
  trainer_->setAccessibleName(tr("Train with"));
  trainer_->addItem(tr("studio-train"), int(LaunchTarget::StudioTrain));
  trainer_->addItem(tr("LLaMA-Factory (llamafactory-cli train)"), int(LaunchTarget::LlamaFactory));
  trainer_->setToolTip(tr("LLaMA-Factory runs under studio-train supervise: the studio follows, "
                          "detaches from and stops it as its own runs"));
  lfCli_ = new QLineEdit(defaultLlamaFactoryCli());
  lfCli_->setObjectName(QStringLiteral("llamafactoryCli"));
  lfCli_->setAccessibleName(tr("llamafactory-cli program"));
  lfCli_->setToolTip(tr("llamafactory-cli: a path, or a name found in PATH (on the SSH host for a "
                        "remote run)"));
  connect(trainer_, &QComboBox::currentIndexChanged, this, &ReviewPage::update);
  connect(lfCli_, &QLineEdit::textChanged, this, &ReviewPage::update);
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* with = new QLabel(tr("Train &with:"));
  with->setBuddy(trainer_);
  layout->addWidget(with);
  layout->addWidget(trainer_);
  layout->addWidget(lfCli_, 1);
  layout->addWidget(export_);
  layout->addWidget(copy_);
  layout->addStretch(1);
  layout->addWidget(sweep_);
  layout->addWidget(launch_);
  return row;
}

void ReviewPage::setTarget(const LaunchTarget& target) {
  target_ = target;
  update();
}

studio::YamlStyle ReviewPage::yamlStyle() const {
  const bool lf = trainer_ && trainer_->currentData().toInt() == int(LaunchTarget::LlamaFactory);
  return lf ? studio::YamlStyle::LlamaFactory : studio::YamlStyle::Minimal;
}

LaunchTarget ReviewPage::target() const {
  LaunchTarget t = target_;
  t.trainer = static_cast<LaunchTarget::Trainer>(trainer_->currentData().toInt());
  t.llamafactoryCli = lfCli_->text().trimmed();
  return t;
}

void ReviewPage::setTrainer(LaunchTarget::Trainer trainer, const QString& llamafactoryCli) {
  trainer_->setCurrentIndex(trainer_->findData(int(trainer)));
  if (!llamafactoryCli.isEmpty()) lfCli_->setText(llamafactoryCli);
  update();
}

void ReviewPage::setEngineProgram(const QString& program) {
  engine_ = program;
  update();
}

void ReviewPage::update() {
  if (trainer_ == nullptr) return;  // during construction
  const bool lf = trainer_->currentData().toInt() == int(LaunchTarget::LlamaFactory);
  lfCli_->setVisible(lf);
  const QString yaml = QString::fromStdString(studio::to_yaml(draft()->config(), yamlStyle()));
  if (editor_->toPlainText() != yaml) editor_->setPlainText(yaml);
  if (!draft()->validating()) {
    model_->setDiagnostics(draft()->diagnostics());
    markLines();
    const int errors = model_->errorCount(), warnings = model_->warningCount();
    QStringList counts;
    if (errors > 0) counts << (errors == 1 ? tr("1 error") : tr("%1 errors").arg(errors));
    if (warnings > 0) counts << (warnings == 1 ? tr("1 warning") : tr("%1 warnings").arg(warnings));
    summary_->setText(counts.isEmpty() ? tr("No problems found.")
                      : errors > 0     ? tr("%1: fix the errors to launch.")
                                         .arg(counts.join(QStringLiteral(", ")))
                                       : tr("%1; the run can start.").arg(counts.join(QStringLiteral(", "))));
  }
  QStringList kept;
  for (const auto& x : draft()->config().extra_keys) kept << QString::fromStdString(x.key);
  kept_->setText(tr("Kept as written: %1").arg(kept.join(QStringLiteral(", "))));
  kept_->setVisible(!kept.isEmpty());
  baseDir_->setText(tr("Relative paths resolve against %1.").arg(draft()->baseDir()));
  command_->setText(configFileIsCurrent()
                        ? commandLine()
                        : tr("%1\n(Export YAML writes %2 first.)").arg(commandLine(), configFile()));

  // On this machine the studio starts one node; an SSH host takes several nodes (Slurm, or
  // one launcher per node over SSH: the Target page checks that the nodes are named).
  const bool remote = target_.kind == LaunchTarget::Ssh;
  const bool nodes = !remote && target_.nnodes > 1;
  const QString refusal =
      lf ? QString::fromStdString(studio::llamafactory_refusal(draft()->config())) : QString();
  lfProblems_->setText(refusal.isEmpty() ? QString()
                                         : tr("LLaMA-Factory cannot run this config:\n%1").arg(refusal));
  lfProblems_->setVisible(!refusal.isEmpty());
  if (lf && lfCli_->text().trimmed().isEmpty()) {
    lfProblems_->setText(tr("llamafactory-cli: give its path or a name found in PATH"));
    lfProblems_->setVisible(true);
  }
  const bool errors = studio::has_errors(draft()->diagnostics()) || lfProblems_->isVisible();
  launch_->setText(remote
                       ? tr("&Launch on %1")
                             .arg(target_.hostName.isEmpty() ? target_.sshTarget : target_.hostName)
                   : nodes ? tr("Several nodes: run the command line on each")
                           : tr("&Launch"));
  launch_->setEnabled(!nodes && !errors && !draft()->validating());
  launch_->setToolTip(errors ? tr("Fix the errors listed above to launch") : QString());
  // A sweep is a queue of studio-train runs on this machine, or one Slurm job array on a host
  // with Slurm (remote::submit_sweep).
  const bool plainHost = remote && !target_.useSlurm;
  sweep_->setEnabled(!plainHost && !nodes && !lf && !errors && !draft()->validating());
  sweep_->setToolTip(plainHost ? tr("On an SSH host a sweep is one Slurm job array: choose Slurm on "
                                    "the Target page (or run studio-train sweep on the host)")
                     : lf      ? tr("A sweep trains with studio-train")
                     : errors  ? tr("Fix the errors listed above to sweep")
                     : remote  ? tr("Train this config at several values of some keys on %1, as one "
                                    "Slurm job array: each point a run of its own")
                                    .arg(target_.hostName.isEmpty() ? target_.sshTarget : target_.hostName)
                               : tr("Train this config at several values of some keys, each point "
                                    "a run of its own"));
}

void ReviewPage::markLines() {
  std::map<int, QIcon> marks;
  for (const auto& d : draft()->diagnostics()) {
    if (d.line <= 0) continue;
    const bool error = d.severity == studio::Severity::Error;
    if (marks.count(d.line) && !error) continue;  // an error outranks a warning on one line
    marks[d.line] = style()->standardIcon(error ? QStyle::SP_MessageBoxCritical
                                                : QStyle::SP_MessageBoxWarning);
  }
  editor_->setLineMarks(std::move(marks));
}

QString ReviewPage::summaryText() const {
  return summary_->text();
}

QString ReviewPage::keptKeysText() const {
  return kept_->isVisibleTo(this) ? kept_->text() : QString();
}

bool ReviewPage::exportYaml(const QString& path, QString* error) {
  const std::string why = studio::save_config_file(draft()->config(), localPath(path), yamlStyle());
  if (!why.empty()) {
    if (error) *error = QString::fromStdString(why);
    return false;
  }
  setConfigFile(path);
  return true;
}

void ReviewPage::setConfigFile(const QString& path) {
  savedPath_ = QFileInfo(path).absoluteFilePath();
  savedYaml_ = QString::fromStdString(studio::to_yaml(draft()->config(), yamlStyle()));
  update();
}

bool ReviewPage::configFileIsCurrent() const {
  return !savedPath_.isEmpty() &&
         savedYaml_ == QString::fromStdString(studio::to_yaml(draft()->config(), yamlStyle()));
}

QString ReviewPage::configFile() const {
  if (configFileIsCurrent()) return savedPath_;
  const QString output = QFileInfo(QString::fromStdString(draft()->config().output_dir)).fileName();
  const QString name = output.isEmpty() ? QStringLiteral("run.yaml") : output + QStringLiteral(".yaml");
  // The demo's folder may be installed read-only: then suggest the home folder.
  const QString dir = QFileInfo(draft()->baseDir()).isWritable() ? draft()->baseDir() : QDir::homePath();
  return QDir(dir).filePath(name);
}

QString ReviewPage::commandLine() const {
  return trainCommandLine(engine_, configFile(), draft()->baseDir(), target());
}

void ReviewPage::exportWithDialog() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export run config"), configFile(),
                                                    tr("YAML (*.yaml *.yml)"));
  if (path.isEmpty()) return;
  QString error;
  if (!exportYaml(path, &error)) QMessageBox::warning(this, tr("Export failed"), error);
}

void ReviewPage::copyCommandLine() {
  QGuiApplication::clipboard()->setText(commandLine());
}

}  // namespace studio::ui
