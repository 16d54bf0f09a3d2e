#pragma once
// Submits a run (or a sweep, as a Slurm job array) to a remote host off the GUI thread: writes
// the wizard's config (relative paths made absolute) to a staging file, connects with the GUI
// prompts, runs remote::submit_run or submit_sweep (uploads with progress, then the start), and
// creates the local mirror folder of the run (or of each point) under the runs root. RemoteRuns
// then follows it like any other mirror.
#include <functional>
#include <memory>

#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QThread>

#include "studio/config/run_config.h"
#include "studio/remote/run_submit.h"
#include "studio/ui/remote/remote_prompts.h"

namespace studio::ui {

class WorkerLink;

class RemoteSubmitter : public QObject {
  Q_OBJECT

 public:
  explicit RemoteSubmitter(RemotePrompts prompts = {}, QObject* parent = nullptr);
  // Waits about a second for a submit in flight, then leaves it to finish alone (its result is
  // then not reported; the mirror folder, if it got that far, is found by the next scan).
  ~RemoteSubmitter() override;

  void setPrompts(RemotePrompts prompts) { prompts_ = std::move(prompts); }

  // Starts a submit; returns false (nothing started) while another one is in flight.
  // `request.config_file` is replaced by the staged copy of `config`, whose relative paths are
  // made absolute against `baseDir`; `request.run_name` empty: the config's output_dir name.
  bool submit(const studio::RunConfig& config, const QString& baseDir,
              studio::remote::SubmitRequest request, const QString& runsRoot);
  // A sweep of `config` as one Slurm job array (remote::submit_sweep; `request.slurm` set):
  // every point checked first, then one mirror folder per point under `runsRoot`, each
  // reported by sweepSubmitted() (the first point's folder first in `dirs`).
  bool submitSweep(const studio::RunConfig& config, const QString& baseDir,
                   studio::remote::SubmitRequest request, const QStringList& axes, bool list,
                   int parallel, const QString& runsRoot);
  bool isBusy() const { return busy_; }

 signals:
  // Each step of the submit: `text` says what ("uploading data/train.jsonl", "starting", ...);
  // fileIndex/fileCount and bytes/total are set while a file uploads.
  void progress(const QString& text, int fileIndex, int fileCount, qint64 bytes, qint64 total);
  // The run started; `dir` is its mirror folder.
  void submitted(const QString& dir);
  // A sweep's array was submitted; `dirs` are its points' mirror folders, in point order.
  void sweepSubmitted(const QStringList& dirs, const QString& jobId);
  void failed(const QString& error);

 private:
  // What differs between a run and a sweep: given the session and the request with its staged
  // config, submits with `progress` and mirrors, on the worker thread; returns the success
  // signal to emit on the GUI thread. Throws std::exception with what the user is told.
  using Submission = std::function<std::function<void()>(
      const studio::remote::SshSession& session, const studio::remote::SubmitRequest& request,
      const studio::remote::SubmitProgressFn& progress)>;
  // The shared part: busy until a signal, the run name, the staged config, "connecting to",
  // the progress and the failure.
  bool start(const studio::RunConfig& config, const QString& baseDir,
             studio::remote::SubmitRequest request, Submission submission);

  RemotePrompts prompts_;
  std::shared_ptr<WorkerLink> link_;
  QPointer<QThread> thread_;
  bool busy_ = false;
};

}  // namespace studio::ui
