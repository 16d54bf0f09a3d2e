#include "studio/ui/remote/remote_follower.h"

#include <chrono>
#include <stdexcept>

#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QMutex>
#include <QSet>
#include <QWaitCondition>

#include "studio/remote/remote_run.h"
#include "studio/remote/sftp_client.h"
#include "studio/ui/runs/remote_mirror.h"
#include "studio/ui/runs/run_folder.h"
#include "worker_link.h"

namespace studio::ui {
namespace {

using studio::remote::RemoteRunStatus;

// How long a destructor waits for its threads before leaving them to finish alone.
constexpr int kJoinMs = 1000;

// A local write to the mirror failed: following stops, since retrying the connection cannot
// help. Not a std::runtime_error on purpose: follow_run retries those as connection trouble.
class MirrorWriteError : public std::exception {
 public:
  explicit MirrorWriteError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

void check(const QString& error) {
  if (!error.isEmpty()) throw MirrorWriteError(error.toStdString());
}

// One writer per mirror folder in this process. A follower started for a folder whose previous
// follower is still winding down (a window closed and another opened at once) waits for it, so
// two threads never append to the same files and the cursor is read after the last append.
class FolderClaims {
 public:
  static FolderClaims& instance() {
    static FolderClaims claims;
    return claims;
  }
  // False when `stop` was set while waiting.
  bool claim(const QString& dir, const std::atomic<bool>& stop) {
    QMutexLocker lock(&mutex_);
    while (claimed_.contains(dir)) {
      if (stop) return false;
      released_.wait(&mutex_, QDeadlineTimer(50));
    }
    claimed_.insert(dir);
    return true;
  }
  void release(const QString& dir) {
    QMutexLocker lock(&mutex_);
    claimed_.remove(dir);
    released_.wakeAll();
  }

 private:
  QMutex mutex_;
  QWaitCondition released_;
  QSet<QString> claimed_;
};

// The thread of one follower: follow_run with callbacks that write the mirror and report.
class FollowJob {
 public:
  FollowJob(RemoteRunFollower* owner, std::shared_ptr<WorkerLink> link, RemotePrompts prompts,
            studio::remote::FollowOptions options, std::shared_ptr<std::atomic<bool>> stop)
      : owner_(owner),
        link_(std::move(link)),
        mirror_(owner->dir()),
        dir_(owner->dir()),
        prompts_(std::move(prompts)),
        options_(options),
        stop_(std::move(stop)) {}

  void run() {
    if (FolderClaims::instance().claim(dir_, *stop_)) {
      follow();
      FolderClaims::instance().release(dir_);
    }
    // On the GUI thread, so the owner's running_ is false before anyone sees finished().
    RemoteRunFollower* owner = owner_;
    link_->post(owner, [owner, dir = dir_] { emit owner->finished(dir); });
  }

 private:
  void follow() {
    try {
      const studio::remote::RemoteRunRecord record = mirror_.readRecord();
      try {
        if (auto saved = mirror_.readFollowState()) state_ = *saved;
      } catch (const std::invalid_argument&) {
        // A damaged remote-follow.json is only the last known connection state: start afresh.
      }
      state_.connection = RemoteFollowState::Connection::Connecting;
      studio::remote::FollowCursor cursor = mirror_.cursor();
      const studio::remote::FollowCallbacks callbacks = makeCallbacks();
      // Each reconnect asks the prompts again (a passphrase is never kept).
      const studio::remote::SessionFactory connect = [this, host = record.host] {
        return connectRemote(host, prompts_);
      };
      const auto last =
          studio::remote::follow_run(connect, record, cursor, callbacks, options_, *stop_);
      if (!last) return;  // stopped
      onStatus(*last);
      state_.connection = RemoteFollowState::Connection::Ended;
      state_.error.clear();
      writeState();
      const QString state = QString::fromLatin1(studio::remote::to_string(last->state));
      link_->call([&] { emit owner_->ended(dir_, state); });
    } catch (const std::exception& e) {
      fail(QString::fromStdString(e.what()));
    }
  }

  studio::remote::FollowCallbacks makeCallbacks() {
    studio::remote::FollowCallbacks c;
    c.on_events = [this](const std::string& bytes) { check(mirror_.appendEvents(bytes)); };
    c.on_log = [this](const std::string& bytes) { check(mirror_.appendLog(bytes)); };
    c.on_status = [this](const RemoteRunStatus& status) { onStatus(status); };
    c.on_connected = [this] {
      state_.connection = RemoteFollowState::Connection::Connected;
      state_.attempt = 0;
      state_.error.clear();
      state_.nextRetry = {};
      writeState();
      link_->call([this] { emit owner_->connected(dir_); });
    };
    c.on_disconnected = [this](const std::string& error, int attempt,
                               std::chrono::milliseconds retryIn) {
      state_.connection = RemoteFollowState::Connection::Retrying;
      state_.attempt = attempt;
      state_.error = QString::fromStdString(error);
      state_.nextRetry = QDateTime::currentDateTime().addMSecs(retryIn.count());
      writeState();
      const QString message = state_.error;
      const int ms = static_cast<int>(retryIn.count());
      link_->call([&] { emit owner_->disconnected(dir_, message, attempt, ms); });
    };
    return c;
  }

  void onStatus(const RemoteRunStatus& status) {
    if (!status.status_json.empty() && status.status_json != lastStatusJson_) {
      check(mirror_.writeStatus(status.status_json));
      lastStatusJson_ = status.status_json;
    }
    state_.lastContact = QDateTime::currentDateTime();
    state_.remoteState = status.state;
    state_.remoteReason = QString::fromStdString(status.reason);
    writeState();
  }

  // Every write of remote-follow.json is a change the runs list shows (last contact included).
  void writeState() {
    check(mirror_.writeFollowState(state_));
    link_->call([this] { emit owner_->statusChanged(dir_); });
  }

  void fail(const QString& error) {
    state_.connection = RemoteFollowState::Connection::Failed;
    state_.error = error;
    // Best effort: the mirror may be what failed.
    mirror_.writeFollowState(state_);
    link_->call([&] { emit owner_->followFailed(dir_, error); });
  }

  RemoteRunFollower* owner_;
  std::shared_ptr<WorkerLink> link_;
  RemoteMirror mirror_;
  QString dir_;
  RemotePrompts prompts_;
  studio::remote::FollowOptions options_;
  std::shared_ptr<std::atomic<bool>> stop_;
  RemoteFollowState state_;
  std::string lastStatusJson_;
};

}  // namespace

RemoteRunFollower::RemoteRunFollower(const QString& dir, RemotePrompts prompts,
                                     studio::remote::FollowOptions options, QObject* parent)
    : QObject(parent),
      dir_(runDirPath(dir)),
      prompts_(std::move(prompts)),
      options_(options),
      stop_(std::make_shared<std::atomic<bool>>(false)),
      link_(std::make_shared<WorkerLink>()) {
  connect(this, &RemoteRunFollower::finished, this, [this] { running_ = false; });
}

RemoteRunFollower::~RemoteRunFollower() {
  finish(QDeadlineTimer(kJoinMs));
}

void RemoteRunFollower::finish(QDeadlineTimer deadline) {
  if (finishing_) return;
  finishing_ = true;
  link_->cut();
  *stop_ = true;
  waitBriefly(thread_, deadline);
}

void RemoteRunFollower::start() {
  if (running_ || finishing_) return;
  running_ = true;
  *stop_ = false;
  auto job = std::make_shared<FollowJob>(this, link_, prompts_, options_, stop_);
  thread_ = startWorkerThread([job] { job->run(); });
}

void RemoteRunFollower::stop() {
  *stop_ = true;
}

bool RemoteRunFollower::isRunning() const {
  return running_;
}

bool isRemoteFolderPath(const QString& text) {
  const QString t = text.trimmed();
  return t.contains(QLatin1Char('/')) || t.startsWith(QLatin1Char('~'));
}

RemoteRuns::RemoteRuns(RemotePrompts prompts, QObject* parent)
    : QObject(parent), prompts_(std::move(prompts)), link_(std::make_shared<WorkerLink>()) {}

RemoteRuns::~RemoteRuns() {
  link_->cut();
  for (RemoteRunFollower* f : std::as_const(followers_)) f->stop();
  // One deadline for all of them: they were all asked to stop above. A cancel in flight is
  // not waited for beyond it; it finishes on its own.
  const QDeadlineTimer deadline(kJoinMs);
  for (RemoteRunFollower* f : std::as_const(followers_)) f->finish(deadline);
  for (const QPointer<QThread>& t : std::as_const(workers_)) waitBriefly(t, deadline);
}

bool RemoteRuns::follow(const QString& path) {
  const QString dir = runDirPath(path);
  if (!isRemoteRunFolder(dir)) return false;
  if (followers_.contains(dir)) return true;
  auto* f = new RemoteRunFollower(dir, prompts_, options_, this);
  followers_.insert(dir, f);
  connect(f, &RemoteRunFollower::connected, this, &RemoteRuns::connected);
  connect(f, &RemoteRunFollower::disconnected, this, &RemoteRuns::disconnected);
  connect(f, &RemoteRunFollower::statusChanged, this, &RemoteRuns::statusChanged);
  connect(f, &RemoteRunFollower::ended, this, &RemoteRuns::ended);
  connect(f, &RemoteRunFollower::followFailed, this, &RemoteRuns::followFailed);
  connect(f, &RemoteRunFollower::finished, this, [this, f](const QString& d) {
    if (followers_.value(d) == f) followers_.remove(d);
    f->deleteLater();
  });
  f->start();
  return true;
}

void RemoteRuns::stop(const QString& dir) {
  // Out of the list at once, so that follow() may start a new follower; that one waits for
  // this one's thread to let go of the folder (FolderClaims).
  if (RemoteRunFollower* f = followers_.take(runDirPath(dir))) f->stop();
}

bool RemoteRuns::isFollowing(const QString& dir) const {
  return followers_.contains(runDirPath(dir));
}

void RemoteRuns::followAll(const QString& root) {
  auto link = link_;
  workers_.removeAll(nullptr);
  workers_ << startWorkerThread([this, link, root] {
    QStringList dirs;
    const QDir rootDir(root);
    for (const QString& name : rootDir.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      const RemoteMirror mirror(rootDir.filePath(name));
      if (!isRemoteRunFolder(mirror.dir())) continue;
      std::optional<RemoteFollowState> state;
      try {
        state = mirror.readFollowState();
      } catch (const std::invalid_argument&) {
        // Unreadable: follow it, which rewrites the file.
      }
      if (!state || state->connection != RemoteFollowState::Connection::Ended) dirs << mirror.dir();
    }
    link->call([&] {
      QMetaObject::invokeMethod(
          this,
          [this, dirs] {
            QStringList started;
            for (const QString& dir : dirs)
              if (follow(dir)) started << dir;
            emit followAllStarted(started);
          },
          Qt::QueuedConnection);
    });
  });
}

void RemoteRuns::cancelOffThread(
    const QString& dir, std::function<std::vector<std::string>(const RemotePrompts&)> cancel) {
  auto link = link_;
  const RemotePrompts prompts = prompts_;
  workers_.removeAll(nullptr);
  workers_ << startWorkerThread([this, link, prompts, dir, cancel = std::move(cancel)] {
    QStringList lines;
    QString error;
    try {
      for (const std::string& line : cancel(prompts)) lines << QString::fromStdString(line);
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    link->call([&] {
      if (error.isEmpty())
        emit cancelFinished(dir, lines);
      else
        emit cancelFailed(dir, error);
    });
  });
}

void RemoteRuns::cancel(const QString& path) {
  const QString dir = runDirPath(path);
  cancelOffThread(dir, [dir](const RemotePrompts& prompts) {
    const studio::remote::RemoteRunRecord record = RemoteMirror(dir).readRecord();
    const studio::remote::SshSession session = connectRemote(record.host, prompts);
    return studio::remote::cancel_run(session, record, record.stop_grace_s, nodeConnector(prompts));
  });
}

void RemoteRuns::cancelSweep(const QString& sweep, const QStringList& points) {
  cancelOffThread(sweep, [points](const RemotePrompts& prompts) {
    std::vector<studio::remote::RemoteRunRecord> records;
    for (const QString& point : points) records.push_back(RemoteMirror(runDirPath(point)).readRecord());
    if (records.empty()) throw std::invalid_argument("the sweep has no point mirrored here");
    const studio::remote::SshSession session = connectRemote(records.front().host, prompts);
    return studio::remote::cancel_sweep(session, records);
  });
}

void RemoteRuns::attach(const studio::remote::RemoteHostRef& host, const QString& remoteRoot,
                        const QString& runId, const QString& runsRoot) {
  auto link = link_;
  const RemotePrompts prompts = prompts_;
  workers_.removeAll(nullptr);
  workers_ << startWorkerThread([this, link, prompts, host, remoteRoot, runId, runsRoot] {
    QString dir;
    QString error;
    try {
      // A path: a run folder on the host the studio did not start (attach_folder).
      const bool folder = isRemoteFolderPath(runId);
      const QString id =
          folder ? QString::fromStdString(studio::remote::folder_run_id(host, runId.toStdString()))
                 : runId;
      const QString existing = runDirPath(QDir(runsRoot).filePath(id));
      if (studio::remote::is_valid_run_id(id.toStdString()) && isRemoteRunFolder(existing)) {
        dir = existing;  // mirrored before: follow on from its cursor
      } else if (folder) {
        const studio::remote::SshSession session = connectRemote(host, prompts);
        studio::remote::SubmitResult found;
        found.record = studio::remote::attach_folder(session, host, runId.toStdString());
        dir = RemoteMirror::create(runsRoot, found, &error);
      } else {
        const studio::remote::SshSession session = connectRemote(host, prompts);
        studio::remote::SubmitResult found;
        found.record = studio::remote::read_remote_record(session, remoteRoot.toStdString(),
                                                          runId.toStdString());
        found.record.host = host;
        const studio::remote::SftpClient sftp(session);
        found.remote_config = sftp.read_from(
            found.record.run_dir() + "/" + studio::remote::run_layout(found.record).config_file, 0,
            4 << 20);
        dir = RemoteMirror::create(runsRoot, found, &error);
      }
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    link->call([&] {
      if (dir.isEmpty()) {
        emit attachFailed(runId, error);
        return;
      }
      QMetaObject::invokeMethod(
          this,
          [this, dir] {
            follow(dir);
            emit attached(dir);
          },
          Qt::QueuedConnection);
    });
  });
}

void RemoteRuns::listRuns(const studio::remote::RemoteHostRef& host, const QString& remoteRoot) {
  auto link = link_;
  const RemotePrompts prompts = prompts_;
  workers_.removeAll(nullptr);
  workers_ << startWorkerThread([this, link, prompts, host, remoteRoot] {
    QStringList ids;
    QStringList descriptions;
    QString error;
    try {
      const studio::remote::SshSession session = connectRemote(host, prompts);
      for (const auto& record :
           studio::remote::list_remote_runs(session, remoteRoot.toStdString())) {
        ids << QString::fromStdString(record.run_id);
        descriptions << QStringLiteral("%1, %2, %3 %4x%5")
                            .arg(
                                QString::fromStdString(record.config_name),
                                QDateTime::fromSecsSinceEpoch(static_cast<qint64>(record.submitted))
                                    .toString(QStringLiteral("yyyy-MM-dd HH:mm")),
                                QString::fromLatin1(studio::remote::to_string(record.kind)))
                            .arg(record.nnodes)
                            .arg(record.nproc);
        if (!record.sweep_id.empty())
          descriptions.back() += QStringLiteral(", sweep %1 point %2")
                                     .arg(QString::fromStdString(record.sweep_id),
                                          QString::fromStdString(record.sweep_point));
      }
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    link->call([&] {
      if (error.isEmpty())
        emit runsListed(ids, descriptions);
      else
        emit listFailed(error);
    });
  });
}

}  // namespace studio::ui
