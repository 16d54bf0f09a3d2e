#pragma once
// Following remote runs into their local mirror folders (remote_mirror.h). Each followed run has
// its own thread running remote::follow_run, which reads the remote events.jsonl and train.log
// from the mirror's cursor over SFTP, queries the run's state, and reconnects with backoff when
// the connection drops. The thread appends what arrives to the mirror and reports through queued
// signals; the GUI thread never touches the network. RemoteRuns is the studio's one manager of
// followers: it reattaches every unfinished mirror at start-up and cancels runs.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <QDeadlineTimer>
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QThread>

#include "studio/remote/run_follow.h"
#include "studio/ui/remote/remote_prompts.h"

namespace studio::ui {

class WorkerLink;

// Follows one mirror folder until the run ends, following fails, or stop() is called.
class RemoteRunFollower : public QObject {
  Q_OBJECT

 public:
  RemoteRunFollower(const QString& dir, RemotePrompts prompts,
                    studio::remote::FollowOptions options, QObject* parent = nullptr);
  // Stops the thread and waits for it about a second at most (see worker_link.h).
  ~RemoteRunFollower() override;

  QString dir() const { return dir_; }
  void start();
  // Asks the thread to stop; returns at once. finished() follows.
  void stop();
  bool isRunning() const;
  // Cuts the signals, stops the thread and waits for it until `deadline` (then leaves it to end
  // alone). The destructor does this with about a second.
  void finish(QDeadlineTimer deadline);

 signals:
  void connected(const QString& dir);
  void disconnected(const QString& dir, const QString& error, int attempt, int retryInMs);
  // status.json or remote-follow.json of the mirror changed.
  void statusChanged(const QString& dir);
  // The run ended and everything it wrote is mirrored; `state` as remote::to_string gives it.
  void ended(const QString& dir, const QString& state);
  // Following cannot go on: a host key or authentication refused, the record unreadable, the
  // mirror not writable. The message says which and what to do.
  void followFailed(const QString& dir, const QString& error);
  // The thread is done (after ended, followFailed, or a stop).
  void finished(const QString& dir);

 private:
  QString dir_;
  RemotePrompts prompts_;
  studio::remote::FollowOptions options_;
  std::shared_ptr<std::atomic<bool>> stop_;
  std::shared_ptr<WorkerLink> link_;
  QPointer<QThread> thread_;
  bool running_ = false;
  bool finishing_ = false;
};

// What RemoteRuns::attach takes for a folder path rather than a run id: it holds '/' or starts
// with '~' (run ids never do).
bool isRemoteFolderPath(const QString& text);

class RemoteRuns : public QObject {
  Q_OBJECT

 public:
  explicit RemoteRuns(RemotePrompts prompts = {}, QObject* parent = nullptr);
  // Stops every follower and waits about a second in all for their threads.
  ~RemoteRuns() override;

  void setPrompts(RemotePrompts prompts) { prompts_ = std::move(prompts); }
  // For runs followed from now on (tests poll faster than the default).
  void setFollowOptions(const studio::remote::FollowOptions& options) { options_ = options; }
  studio::remote::FollowOptions followOptions() const { return options_; }

  // Starts following a mirror folder (nothing when it is already followed). False when `dir` is
  // not a remote mirror folder.
  bool follow(const QString& dir);
  void stop(const QString& dir);
  bool isFollowing(const QString& dir) const;
  QStringList followed() const { return followers_.keys(); }
  // Follows every mirror folder under `root` whose following has not ended (reattaching after a
  // studio restart). The folders are listed off the GUI thread; followAllStarted() says which.
  void followAll(const QString& root);
  // Stops the remote run (remote::cancel_run) on a worker thread; cancelFinished() gives the
  // lines cancel_run returned, cancelFailed() why it could not.
  void cancel(const QString& dir);
  // Stops the sweep `sweep` (its label: RunInfo::sweepDir) whose points' mirrors are `points`
  // (remote::cancel_sweep, one scancel of its job array) on a worker thread; cancelFinished()
  // and cancelFailed() come with `sweep` as their dir.
  void cancelSweep(const QString& sweep, const QStringList& points);
  // Mirrors a run started elsewhere (`studio submit`, another studio, another machine) into
  // <runsRoot>/<run_id>/ and follows it from its first event. Its record and config are read on
  // a worker thread; the record's host is replaced by `host` (this studio's way to reach it).
  // attached() once it is followed, attachFailed() otherwise. A run already mirrored there is
  // followed on from its cursor. A `runId` holding '/' or starting with '~' is a run folder on
  // the host the studio did not start (a LLaMA-Factory output_dir): remote::attach_folder.
  void attach(const studio::remote::RemoteHostRef& host, const QString& remoteRoot,
              const QString& runId, const QString& runsRoot);
  // Lists the runs under `remoteRoot` on a host off the GUI thread: runsListed() with one
  // "RUN_ID" per entry (oldest first) and a matching description ("sft.yaml, 2026-11-22 01:17,
  // detached 1x2"), or listFailed().
  void listRuns(const studio::remote::RemoteHostRef& host, const QString& remoteRoot);

 signals:
  void connected(const QString& dir);
  void disconnected(const QString& dir, const QString& error, int attempt, int retryInMs);
  void statusChanged(const QString& dir);
  void ended(const QString& dir, const QString& state);
  void followFailed(const QString& dir, const QString& error);
  void followAllStarted(const QStringList& dirs);
  void cancelFinished(const QString& dir, const QStringList& lines);
  void cancelFailed(const QString& dir, const QString& error);
  void attached(const QString& dir);
  void attachFailed(const QString& runId, const QString& error);
  void runsListed(const QStringList& runIds, const QStringList& descriptions);
  void listFailed(const QString& error);

 private:
  // Runs `cancel` (connect, cancel, the lines it returns) on a worker thread; cancelFinished(dir)
  // with its lines, or cancelFailed(dir) with what it threw, on the GUI thread.
  void cancelOffThread(const QString& dir,
                       std::function<std::vector<std::string>(const RemotePrompts&)> cancel);

  RemotePrompts prompts_;
  studio::remote::FollowOptions options_;
  QHash<QString, RemoteRunFollower*> followers_;
  std::shared_ptr<WorkerLink> link_;
  QList<QPointer<QThread>> workers_;  // listing and cancel threads
};

}  // namespace studio::ui
