#pragma once
// Runs on this machine (LocalLauncher: detached studio-train or llamafactory-cli processes, each
// in its own folder under the runs root), behind the run backend interface.
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/run_backend.h"

namespace studio::ui {

class LocalRunBackend : public RunBackend {
  Q_OBJECT

 public:
  explicit LocalRunBackend(QObject* parent = nullptr);

  LocalLauncher* launcher() const { return launcher_; }

  bool startsOn(const LaunchTarget& target) const override;
  bool owns(const RunInfo& run) const override;
  bool start(const studio::RunConfig& config, const QString& baseDir, const LaunchTarget& target,
             const QString& runsRoot) override;
  QString busyMessage() const override { return {}; }
  bool startFailureIsModal() const override { return true; }
  QString stopDescription(const QString& dir) const override;
  void stop(const QString& dir) override;
  QString stopSweepDescription(const QString& sweepDir) const override;
  void stopSweep(const QString& sweepDir, const QStringList& points) override;
  // A local run's folder is read as it is written: there is nothing more to follow.
  void followAll(const QString& runsRoot) override;

  // start(), returning the run folder ("" when it did not start, after startFailed()).
  QString launch(const studio::RunConfig& config, const QString& baseDir,
                 const LaunchTarget& target, const QString& runsRoot);
  // A sweep on this machine (LocalLauncher::launchSweep) under `runsRoot`: notice() with its
  // folder, or startFailed(); returns the sweep's folder or "".
  QString launchSweep(const SweepLaunchRequest& request, const QString& runsRoot);

 private:
  LocalLauncher* launcher_;
};

}  // namespace studio::ui
