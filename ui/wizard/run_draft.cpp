#include "studio/model_facts/hub_cache.h"
#include "studio/ui/base/local_path.h"
#include "studio/ui/wizard/run_draft.h"

#include <algorithm>

#include <QDir>
#include <QFileInfo>

#include "studio/config/config_io.h"
#include "studio/ui/editor/config_validator.h"
#include "studio/ui/editor/diagnostics_model.h"

namespace studio::ui {

const QString RunDraft::kDisplayName = QStringLiteral("wizard.yaml");

RunDraft::RunDraft(QObject* parent)
    : QObject(parent), baseDir_(QDir::currentPath()), validator_(new ConfigValidator(this)) {
  connect(validator_, &ConfigValidator::finished, this, &RunDraft::deliver);
  revalidate();
}

void RunDraft::load(studio::RunConfig config, const QString& baseDir) {
  config_ = std::move(config);
  baseDir_ = baseDir.isEmpty() ? QDir::currentPath() : QDir(baseDir).absolutePath();
  revalidate();
  emit loaded();
  emit changed();
}

void RunDraft::edit(const std::function<void(studio::RunConfig&)>& change) {
  change(config_);
  revalidate();
  emit changed();
}

void RunDraft::assign(const std::function<void(studio::RunConfig&)>& change) {
  change(config_);
  revalidate();
  emit loaded();
  emit changed();
}

QString RunDraft::resolve(const std::string& path) const {
  if (path.empty()) return {};
  const QString p = QString::fromStdString(path);
  return QDir::cleanPath(QDir(baseDir_).absoluteFilePath(p));
}

QString RunDraft::modelDir(const std::string& path) const {
  if (path.empty()) return {};
  std::string error;
  const std::string cache =
      config_.cache_dir ? localPath(resolve(*config_.cache_dir)) : std::string();
  if (auto dir = studio::resolve_model_dir(path, localPath(baseDir_), config_.model_revision, cache,
                                           error))
    return QDir::cleanPath(QString::fromStdString(*dir));
  return resolve(path);
}

bool RunDraft::fromHubCache(const std::string& path) const {
  return !path.empty() && !QFileInfo::exists(resolve(path)) && studio::looks_like_hub_id(path) &&
         QFileInfo::exists(modelDir(path));
}

void RunDraft::setWorld(int processesPerNode, int nodes) {
  if (processesPerNode == nproc_ && nodes == nnodes_) return;
  nproc_ = std::max(1, processesPerNode);
  nnodes_ = std::max(1, nodes);
  revalidate();
  emit changed();
}

bool RunDraft::validating() const {
  return validator_->isBusy();
}

std::vector<studio::Diagnostic> RunDraft::diagnosticsFor(const QStringList& keys) const {
  std::vector<studio::Diagnostic> out;
  for (const auto& d : diagnostics_)
    if (keys.contains(QString::fromStdString(d.key))) out.push_back(d);
  return out;
}

bool RunDraft::hasErrors(const QStringList& keys) const {
  return studio::has_errors(diagnosticsFor(keys));
}

// The exported YAML is what gets checked, so every message matches what Export writes and its
// line numbers match the Review page.
void RunDraft::revalidate() {
  validator_->setProcessesPerNode(nproc_);
  validator_->setNodes(nnodes_);
  validator_->setBaseDir(baseDir_);
  validator_->validateText(QString::fromStdString(studio::to_yaml(config_)), kDisplayName);
}

void RunDraft::deliver(const ValidationResult& result) {
  diagnostics_ = result.check.diagnostics;
  model_ = result.check.model;
  emit validated();
}

QString describe(const studio::Diagnostic& diagnostic) {
  const QString text = messageText(diagnostic);
  return diagnostic.key.empty() ? text
                                : QString::fromStdString(diagnostic.key) + QStringLiteral(": ") + text;
}

}  // namespace studio::ui
