#pragma once
// The local mirror of a run on a remote host: a normal run folder under the studio's runs root,
// <runsRoot>/<run_id>/, so the runs list, the dashboard and the log console show it like any
// local run. It holds
//   studio-remote.json   the run's record (RemoteRunRecord::to_json, as in the remote folder)
//   config.yaml          the config as it runs there (paths rewritten for the remote side)
//   events.jsonl         exactly the bytes of the remote events.jsonl delivered so far
//   train.log            the same for the remote train.log
//   status.json          the remote status.json as last read (replaced atomically)
//   remote-follow.json   how the studio's connection to the run is doing (replaced atomically)
// The sizes of events.jsonl and train.log ARE the follow cursor: after a studio restart or a
// dropped connection, reading the remote files again from those sizes loses and repeats nothing.
#include <cstdint>
#include <optional>
#include <string>

#include <QDateTime>
#include <QString>

#include "studio/remote/remote_run.h"
#include "studio/remote/run_follow.h"
#include "studio/remote/run_submit.h"

namespace studio::ui {

inline constexpr const char* kRemoteFollowFileName = "remote-follow.json";

// What the follower last knew of the connection and of the remote run.
struct RemoteFollowState {
  enum class Connection {
    Connecting,  // submitted, or reattaching: no answer yet
    Connected,
    Retrying,  // the connection dropped or failed; next try at nextRetry
    Ended,     // the run ended and every byte it wrote is mirrored
    Failed,    // host key or authentication refused: retrying cannot help
  };
  Connection connection = Connection::Connecting;
  int attempt = 0;        // failed tries in a row (Retrying)
  QString error;          // the last connection error (Retrying, Failed)
  QDateTime nextRetry;    // Retrying: when the next try is
  QDateTime lastContact;  // last successful state query
  std::optional<studio::remote::RemoteRunState> remoteState;  // as last queried
  QString remoteReason;  // RemoteRunStatus::reason (the scheduler's state for Slurm)

  QByteArray toJson() const;
  // Throws std::invalid_argument naming `where` and the bad key.
  static RemoteFollowState fromJson(const QByteArray& json, const QString& where);
  bool operator==(const RemoteFollowState& other) const;
  bool operator!=(const RemoteFollowState& other) const { return !(*this == other); }
};

QString connectionText(RemoteFollowState::Connection connection);  // "connected", ...
// The RemoteRunState named by remote::to_string(state); nullopt for any other text.
std::optional<studio::remote::RemoteRunState> parseRemoteRunState(const QString& text);

// The folder holds studio-remote.json.
bool isRemoteRunFolder(const QString& dir);

class RemoteMirror {
 public:
  explicit RemoteMirror(const QString& dir);

  // Creates <runsRoot>/<run_id>/ with the record, the config and remote-follow.json
  // (Connecting; Queued for a Slurm job, else Starting). Returns the folder, or "" with `error`
  // naming the file that could not be written.
  static QString create(const QString& runsRoot, const studio::remote::SubmitResult& submitted,
                        QString* error);

  QString dir() const { return dir_; }
  // Throws std::invalid_argument naming the file when it is missing or malformed.
  studio::remote::RemoteRunRecord readRecord() const;
  // The mirrored events file: events.jsonl, or LLaMA-Factory's trainer_log.jsonl when the record
  // says LLaMA-Factory trains.
  const char* eventsFileName() const;
  // nullopt when there is no remote-follow.json; throws std::invalid_argument when it is bad.
  std::optional<RemoteFollowState> readFollowState() const;
  // Where following resumes: the sizes of the mirrored events.jsonl and train.log.
  studio::remote::FollowCursor cursor() const;

  // Each returns "" or an error naming the file. Appends go straight to the end of the file
  // (the cursor); status.json and remote-follow.json are replaced atomically.
  QString appendEvents(const std::string& bytes) const;
  QString appendLog(const std::string& bytes) const;
  QString writeStatus(const std::string& statusJson) const;
  QString writeFollowState(const RemoteFollowState& state) const;

 private:
  QString file(const char* name) const;
  QString append(const char* name, const std::string& bytes) const;
  QString dir_;
};

}  // namespace studio::ui
