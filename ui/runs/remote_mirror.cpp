#include "studio/ui/runs/remote_mirror.h"

#include <stdexcept>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include "studio/base/atomic_file.h"
#include "studio/runs/events.h"
#include "studio/ui/base/local_path.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

using studio::remote::RemoteRunState;
using Connection = RemoteFollowState::Connection;

constexpr Connection kConnections[] = {Connection::Connecting, Connection::Connected,
                                       Connection::Retrying, Connection::Ended, Connection::Failed};
constexpr RemoteRunState kRemoteStates[] = {RemoteRunState::Queued,  RemoteRunState::Starting,
                                            RemoteRunState::Running, RemoteRunState::Finished,
                                            RemoteRunState::Failed,  RemoteRunState::Stopped,
                                            RemoteRunState::Lost};

// Times are stored as unix seconds (0: none), like the engine's files.
double unixTime(const QDateTime& t) {
  return t.isValid() ? static_cast<double>(t.toMSecsSinceEpoch()) / 1000.0 : 0.0;
}

QDateTime fromUnix(double seconds) {
  return seconds > 0 ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(seconds * 1000.0))
                     : QDateTime();
}

QString writeAtomic(const QString& path, const QByteArray& bytes) {
  return QString::fromStdString(
      studio::write_file_atomic(localPath(path), std::string_view(bytes.data(), bytes.size())));
}

// A small metadata file of the mirror (the record, the follow state) whole; throws with the
// reason (not there, not a regular file, too large) naming the file.
std::string readRunFile(const QString& path) {
  std::string text, error;
  if (!studio::read_small_file(localPath(path), studio::kRunMetadataMaxBytes, text, error))
    throw std::invalid_argument(error);
  return text;
}

}  // namespace

QString connectionText(Connection connection) {
  switch (connection) {
    case Connection::Connecting:
      return QStringLiteral("connecting");
    case Connection::Connected:
      return QStringLiteral("connected");
    case Connection::Retrying:
      return QStringLiteral("retrying");
    case Connection::Ended:
      return QStringLiteral("ended");
    case Connection::Failed:
      return QStringLiteral("failed");
  }
  return QStringLiteral("connecting");
}

std::optional<RemoteRunState> parseRemoteRunState(const QString& text) {
  for (RemoteRunState s : kRemoteStates)
    if (text == QLatin1String(studio::remote::to_string(s))) return s;
  return std::nullopt;
}

QByteArray RemoteFollowState::toJson() const {
  QJsonObject o;
  o.insert(QStringLiteral("connection"), connectionText(connection));
  o.insert(QStringLiteral("attempt"), attempt);
  o.insert(QStringLiteral("error"), error);
  o.insert(QStringLiteral("next_retry"), unixTime(nextRetry));
  o.insert(QStringLiteral("last_contact"), unixTime(lastContact));
  o.insert(QStringLiteral("remote_state"),
           remoteState ? QString::fromLatin1(studio::remote::to_string(*remoteState)) : QString());
  o.insert(QStringLiteral("remote_reason"), remoteReason);
  return QJsonDocument(o).toJson(QJsonDocument::Indented);
}

RemoteFollowState RemoteFollowState::fromJson(const QByteArray& json, const QString& where) {
  QJsonParseError parseError;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parseError);
  if (!doc.isObject())
    throw std::invalid_argument(
        QStringLiteral("%1: not a JSON object (%2 at offset %3); the studio rewrites it when it "
                       "follows the run again")
            .arg(where, parseError.errorString())
            .arg(parseError.offset)
            .toStdString());
  const QJsonObject o = doc.object();
  auto bad = [&where](const char* key, const QString& given) {
    return std::invalid_argument(QStringLiteral("%1: key '%2' has an invalid value '%3'")
                                     .arg(where, QLatin1String(key), given)
                                     .toStdString());
  };
  RemoteFollowState s;
  const QString connection = o.value(QStringLiteral("connection")).toString();
  bool known = false;
  for (Connection c : kConnections)
    if (connection == connectionText(c)) {
      s.connection = c;
      known = true;
    }
  if (!known) throw bad("connection", connection);
  s.attempt = o.value(QStringLiteral("attempt")).toInt();
  s.error = o.value(QStringLiteral("error")).toString();
  s.nextRetry = fromUnix(o.value(QStringLiteral("next_retry")).toDouble());
  s.lastContact = fromUnix(o.value(QStringLiteral("last_contact")).toDouble());
  const QString state = o.value(QStringLiteral("remote_state")).toString();
  if (!state.isEmpty()) {
    s.remoteState = parseRemoteRunState(state);
    if (!s.remoteState) throw bad("remote_state", state);
  }
  s.remoteReason = o.value(QStringLiteral("remote_reason")).toString();
  return s;
}

bool RemoteFollowState::operator==(const RemoteFollowState& o) const {
  return connection == o.connection && attempt == o.attempt && error == o.error &&
         nextRetry == o.nextRetry && lastContact == o.lastContact && remoteState == o.remoteState &&
         remoteReason == o.remoteReason;
}

bool isRemoteRunFolder(const QString& dir) {
  return QFileInfo::exists(runFile(dir, studio::remote::kRemoteRecordFileName));
}

RemoteMirror::RemoteMirror(const QString& dir) : dir_(runDirPath(dir)) {}

QString RemoteMirror::file(const char* name) const {
  return runFile(dir_, name);
}

QString RemoteMirror::create(const QString& runsRoot, const studio::remote::SubmitResult& submitted,
                             QString* error) {
  const QString dir =
      runDirPath(QDir(runsRoot).filePath(QString::fromStdString(submitted.record.run_id)));
  auto fail = [error](const QString& why) {
    if (error) *error = why;
    return QString();
  };
  if (!studio::remote::is_valid_run_id(submitted.record.run_id))
    return fail(QObject::tr("the remote run id '%1' cannot name a folder")
                    .arg(QString::fromStdString(submitted.record.run_id)));
  if (!QDir().mkpath(dir))
    return fail(QObject::tr("cannot create the run folder %1: check that the runs root is "
                            "writable")
                    .arg(dir));
  const RemoteMirror mirror(dir);
  RemoteFollowState follow;
  follow.remoteState = submitted.record.kind == studio::remote::RemoteRunKind::Slurm
                           ? RemoteRunState::Queued
                           : RemoteRunState::Starting;
  // The record goes last: a folder is a remote mirror once it is there, so the rest is too.
  // A folder attached to (not submitted) has no config of the studio's to copy.
  QString why = submitted.remote_config.empty()
                    ? QString()
                    : writeAtomic(mirror.file(kRunConfigFileName),
                                  QByteArray::fromStdString(submitted.remote_config));
  if (why.isEmpty()) why = mirror.writeFollowState(follow);
  if (why.isEmpty())
    why = writeAtomic(mirror.file(studio::remote::kRemoteRecordFileName),
                      QByteArray::fromStdString(submitted.record.to_json()));
  return why.isEmpty() ? dir : fail(why);
}

studio::remote::RemoteRunRecord RemoteMirror::readRecord() const {
  const QString path = file(studio::remote::kRemoteRecordFileName);
  return studio::remote::RemoteRunRecord::from_json(readRunFile(path), localPath(path));
}

std::optional<RemoteFollowState> RemoteMirror::readFollowState() const {
  const QString path = file(kRemoteFollowFileName);
  if (!QFileInfo::exists(path)) return std::nullopt;
  return RemoteFollowState::fromJson(QByteArray::fromStdString(readRunFile(path)), path);
}

const char* RemoteMirror::eventsFileName() const {
  try {
    if (readRecord().events_file_name() == studio::kTrainerLogFileName)
      return studio::kTrainerLogFileName;
  } catch (const std::exception&) {
    // an unreadable record: RunInfo says so; the engine's file name is the default
  }
  return studio::kEventsFileName;
}

studio::remote::FollowCursor RemoteMirror::cursor() const {
  studio::remote::FollowCursor c;
  c.events = static_cast<std::uint64_t>(QFileInfo(file(eventsFileName())).size());
  c.log = static_cast<std::uint64_t>(QFileInfo(file(kTrainLogFileName)).size());
  return c;
}

QString RemoteMirror::append(const char* name, const std::string& bytes) const {
  if (bytes.empty()) return {};
  const QString path = file(name);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Append))
    return QObject::tr("cannot append to %1: %2").arg(path, f.errorString());
  const qint64 written = f.write(bytes.data(), static_cast<qint64>(bytes.size()));
  if (written != static_cast<qint64>(bytes.size()) || !f.flush())
    return QObject::tr("cannot append to %1: %2").arg(path, f.errorString());
  return {};
}

QString RemoteMirror::appendEvents(const std::string& bytes) const {
  return append(eventsFileName(), bytes);
}

QString RemoteMirror::appendLog(const std::string& bytes) const {
  return append(kTrainLogFileName, bytes);
}

QString RemoteMirror::writeStatus(const std::string& statusJson) const {
  return writeAtomic(file(studio::kStatusFileName), QByteArray::fromStdString(statusJson));
}

QString RemoteMirror::writeFollowState(const RemoteFollowState& state) const {
  return writeAtomic(file(kRemoteFollowFileName), state.toJson());
}

}  // namespace studio::ui
