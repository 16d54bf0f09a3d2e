#pragma once
// Runs on SSH hosts, plain or under Slurm, behind the run backend interface: RemoteSubmitter
// starts them (upload, then a detached engine or sbatch on the host) and RemoteRuns follows them
// into local mirror folders, stops them (SIGTERM/SIGKILL or scancel) and attaches to runs started
// elsewhere. Every SSH call runs on a worker thread.
#include "studio/remote/ssh_target.h"
#include "studio/ui/remote/remote_follower.h"
#include "studio/ui/remote/remote_prompts.h"
#include "studio/ui/remote/remote_submitter.h"
#include "studio/ui/runs/run_backend.h"

namespace studio::ui {

class RemoteRunBackend : public RunBackend {
  Q_OBJECT

 public:
  explicit RemoteRunBackend(RemotePrompts prompts, QObject* parent = nullptr);

  RemoteRuns* runs() const { return runs_; }
  RemoteSubmitter* submitter() const { return submitter_; }

  bool startsOn(const LaunchTarget& target) const override;
  bool owns(const RunInfo& run) const override;
  bool start(const studio::RunConfig& config, const QString& baseDir, const LaunchTarget& target,
             const QString& runsRoot) override;
  QString busyMessage() const override;
  bool startFailureIsModal() const override { return false; }
  QString stopDescription(const QString& dir) const override;
  void stop(const QString& dir) override;
  QString stopSweepDescription(const QString& sweepDir) const override;
  void stopSweep(const QString& sweepDir, const QStringList& points) override;
  void followAll(const QString& runsRoot) override;

  // Mirrors the run `runId` of `host` (under `remoteRoot`; "" the host's default) into a folder
  // under `runsRoot` and follows it: attached() or a notice of why not.
  void attach(const studio::remote::RemoteHostRef& host, const QString& remoteRoot,
              const QString& runId, const QString& runsRoot);
  // A sweep of `config` on the Slurm host of `target` as one job array (RemoteSubmitter::
  // submitSweep): each point mirrored and followed, started() with the first point's folder.
  // False while a submit is in flight; `target` must use Slurm.
  bool startSweep(const studio::RunConfig& config, const QString& baseDir,
                  const LaunchTarget& target, const QStringList& axes, bool list, int parallel,
                  const QString& runsRoot);

 signals:
  // attach() mirrored the run into `dir`, now followed.
  void attached(const QString& dir);

 private:
  static studio::remote::SubmitRequest requestFor(const LaunchTarget& target);
  RemoteRuns* runs_;
  RemoteSubmitter* submitter_;
};

}  // namespace studio::ui
