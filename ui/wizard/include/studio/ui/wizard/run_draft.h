#pragma once
// The run being set up in the wizard: the one model its pages observe. It holds the RunConfig
// (started from RunConfig{} or an imported file, so keys no page shows and unknown keys survive),
// the folder relative paths resolve against, and the world size. Every edit re-validates the
// config as exported YAML off the GUI thread (ConfigValidator); pages show the diagnostics of
// their keys, and the model's config.json comes back with them.
#include <functional>
#include <optional>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "studio/config/diagnostic.h"
#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"

namespace studio::ui {

class ConfigValidator;
struct ValidationResult;

class RunDraft : public QObject {
  Q_OBJECT

 public:
  // The file name validation messages use for the wizard's YAML.
  static const QString kDisplayName;

  explicit RunDraft(QObject* parent = nullptr);

  const studio::RunConfig& config() const { return config_; }
  // Replaces the whole config (import, demo): pages re-read every widget (loaded()).
  void load(studio::RunConfig config, const QString& baseDir);
  // One change made on a page; the pages that show it are already up to date.
  void edit(const std::function<void(studio::RunConfig&)>& change);
  // A change made on one page to a value another page shows (the memory page's SP button):
  // pages re-read their widgets as after load().
  void assign(const std::function<void(studio::RunConfig&)>& change);

  // Where relative paths resolve; never empty (the working directory by default).
  QString baseDir() const { return baseDir_; }
  // `path` as given when absolute, else against baseDir(); empty stays empty.
  QString resolve(const std::string& path) const;
  // A model path as the engine will load it: resolve(path) when that exists, else for a hub id
  // its snapshot in the local Hugging Face cache (model_revision, cache_dir); resolve(path)
  // when neither (validation says why).
  QString modelDir(const std::string& path) const;
  // Whether modelDir(path) came from the local Hugging Face cache.
  bool fromHubCache(const std::string& path) const;

  int processesPerNode() const { return nproc_; }
  int nodes() const { return nnodes_; }
  int worldSize() const { return nproc_ * nnodes_; }
  void setWorld(int processesPerNode, int nodes);

  // The newest validation: diagnostics of the exported YAML (their lines are the Review page's
  // lines) and the model's config.json when it could be read.
  const std::vector<studio::Diagnostic>& diagnostics() const { return diagnostics_; }
  const std::optional<studio::ModelInfo>& model() const { return model_; }
  // True from an edit until its validation has arrived; pages are not complete meanwhile.
  bool validating() const;
  std::vector<studio::Diagnostic> diagnosticsFor(const QStringList& keys) const;
  bool hasErrors(const QStringList& keys) const;

 signals:
  void loaded();     // the config was replaced: re-read every widget
  void changed();    // any value changed (after loaded() too)
  void validated();  // diagnostics() and model() are those of the current config

 private:
  void revalidate();
  void deliver(const ValidationResult& result);

  studio::RunConfig config_;
  QString baseDir_;
  int nproc_ = 1;
  int nnodes_ = 1;
  ConfigValidator* validator_;
  std::vector<studio::Diagnostic> diagnostics_;
  std::optional<studio::ModelInfo> model_;
};

// "key: message (allowed: ...)" for inline messages.
QString describe(const studio::Diagnostic& diagnostic);

}  // namespace studio::ui
