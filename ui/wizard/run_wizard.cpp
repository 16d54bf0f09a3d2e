#include "studio/ui/wizard/run_wizard.h"

#include <algorithm>

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include "studio/ui/base/local_path.h"
#include "studio/config/config_io.h"
#include "studio/ui/wizard/data_page.h"
#include "studio/ui/wizard/hyperparameters_page.h"
#include "studio/ui/wizard/memory_page.h"
#include "studio/ui/wizard/method_page.h"
#include "studio/ui/wizard/model_page.h"
#include "studio/ui/wizard/parallelism_page.h"
#include "studio/ui/wizard/review_page.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/target_page.h"

namespace studio::ui {
namespace {

// A world that the imported sequence_parallel_size divides: one node up to 8 GPUs, then nodes
// of 8 (the usual GPU server).
std::pair<int, int> worldFor(int64_t sp, int nproc, int nnodes) {
  if (sp < 1 || (nproc * nnodes) % sp == 0) return {nproc, nnodes};
  if (sp > 8 && sp % 8 == 0) return {8, static_cast<int>(sp / 8)};
  return {static_cast<int>(sp), 1};
}

QString problems(const std::vector<studio::Diagnostic>& diags) {
  QStringList lines;
  for (const auto& d : diags)
    if (d.severity == studio::Severity::Error) lines << QString::fromStdString(d.format());
  return lines.join(QLatin1Char('\n'));
}

}  // namespace

RunWizard::RunWizard(QWidget* parent)
    : QWizard(parent),
      draft_(new RunDraft(this)),
      model_(new ModelPage(draft_)),
      data_(new DataPage(draft_)),
      method_(new MethodPage(draft_)),
      parallelism_(new ParallelismPage(draft_)),
      hyperparameters_(new HyperparametersPage(draft_)),
      memory_(new MemoryPage(draft_)),
      targetPage_(new TargetPage(draft_)),
      review_(new ReviewPage(draft_)) {
  setWindowTitle(tr("New run"));
  setPage(ModelPageId, model_);
  setPage(DataPageId, data_);
  setPage(MethodPageId, method_);
  setPage(ParallelismPageId, parallelism_);
  setPage(HyperparametersPageId, hyperparameters_);
  setPage(MemoryPageId, memory_);
  setPage(TargetPageId, targetPage_);
  setPage(ReviewPageId, review_);
  setButtonText(QWizard::FinishButton, tr("Close"));
  auto syncTarget = [this] { review_->setTarget(targetPage_->target()); };
  connect(targetPage_, &TargetPage::targetChanged, this, syncTarget);
  connect(draft_, &RunDraft::changed, this, syncTarget);
  connect(review_, &ReviewPage::launchClicked, this,
          [this] { emit launchRequested(config(), baseDir(), target()); });
  connect(targetPage_, &TargetPage::manageHostsRequested, this, &RunWizard::manageHostsRequested);
  connect(review_, &ReviewPage::sweepClicked, this, &RunWizard::openSweepDialog);
  syncTarget();
}

void RunWizard::openSweepDialog() {
  if (sweepDialog_) sweepDialog_->close();
  const studio::RunConfig base = config();
  const QString dir = baseDir();
  const LaunchTarget t = target();
  auto* dialog = new SweepDialog(base, dir, t.nproc * std::max(1, t.nnodes), this,
                                 t.kind == LaunchTarget::Local);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  sweepDialog_ = dialog;
  connect(dialog, &QDialog::accepted, this, [this, dialog, base, dir, t] {
    emit sweepRequested(base, dir, t, dialog->choice());
  });
  dialog->open();  // window-modal, without a nested event loop
}

void RunWizard::setDemoModelDir(const QString& dir) {
  model_->setDemoModelDir(dir);
}

void RunWizard::setEngineProgram(const QString& program) {
  review_->setEngineProgram(program);
}

void RunWizard::setHosts(const QVector<HostProfile>& hosts) {
  targetPage_->setHosts(hosts);
}

void RunWizard::load(studio::RunConfig config, const QString& baseDir, const QString& file) {
  const auto [nproc, nnodes] =
      worldFor(config.sequence_parallel_size, draft_->processesPerNode(), draft_->nodes());
  draft_->setWorld(nproc, nnodes);
  draft_->load(std::move(config), baseDir);
  if (!file.isEmpty()) review_->setConfigFile(file);
  restart();
}

bool RunWizard::openConfig(const QString& yamlPath, QString* error) {
  studio::LoadResult loaded = studio::load_config_file(localPath(yamlPath));
  if (!loaded.ok()) {
    if (error) *error = problems(loaded.diagnostics);
    return false;
  }
  load(std::move(loaded.config), QFileInfo(yamlPath).absolutePath(), yamlPath);
  return true;
}

bool RunWizard::loadDemo(const QString& demoConfigPath, QString* error) {
  studio::LoadResult loaded = studio::load_config_file(localPath(demoConfigPath));
  if (!loaded.ok()) {
    if (error) *error = problems(loaded.diagnostics);
    return false;
  }
  const QDir demo = QFileInfo(demoConfigPath).absoluteDir();
  studio::RunConfig& c = loaded.config;
  const QString modelDir =
      model_->demoModelDir().isEmpty() ? demo.filePath(QStringLiteral("model"))
                                       : model_->demoModelDir();
  c.model_name_or_path = localPath(QDir(modelDir).absolutePath());
  c.dataset_dir = localPath(demo.filePath(QStringLiteral("data")));
  // The demo files may be installed read-only: the run writes under the user's data folder.
  const QString output = QFileInfo(QString::fromStdString(c.output_dir)).fileName();
  c.output_dir = localPath(
      QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) +
      QStringLiteral("/demo/") + (output.isEmpty() ? QStringLiteral("run") : output));
  load(std::move(loaded.config), demo.absolutePath(), QString());
  return true;
}

studio::RunConfig RunWizard::config() const {
  return draft_->config();
}

QString RunWizard::yamlText() const {
  return QString::fromStdString(studio::to_yaml(draft_->config()));
}

QString RunWizard::baseDir() const {
  return draft_->baseDir();
}

LaunchTarget RunWizard::target() const {
  LaunchTarget t = targetPage_->target();
  const LaunchTarget chosen = review_->target();  // the trainer is chosen on the Review page
  t.trainer = chosen.trainer;
  t.llamafactoryCli = chosen.llamafactoryCli;
  return t;
}

QString RunWizard::commandLine() const {
  return review_->commandLine();
}

}  // namespace studio::ui
