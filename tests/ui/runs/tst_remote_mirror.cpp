// The local mirror of a remote run (no network): the folder created from a submit, the record,
// the follow state and the appended engine files read back byte for byte with the cursor they
// give; what the runs list makes of a mirror in every state; and RemoteRuns against a host that
// refuses connections: reattach at start-up picks the unfinished mirrors only, the mirror says
// "connection lost ... retrying", a cancel fails naming the host, and the manager lets go of its
// threads within about a second. A record or follow state that is a FIFO or a link to /dev/zero
// is an error naming the file, in time.
#include <unistd.h>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include "../../base/hostile_files.h"
#include "runs_test_support.h"
#include "studio/remote/remote_run.h"
#include "studio/ui/remote/remote_follower.h"
#include "studio/ui/runs/remote_mirror.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_comparison.h"
#include "studio/ui/runs/run_info.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"

using studio::remote::RemoteRunKind;
using studio::remote::RemoteRunState;
using studio::ui::RemoteFollowState;
using studio::ui::RemoteMirror;
using studio::ui::RunInfo;
using studio::ui::RunState;
using Connection = studio::ui::RemoteFollowState::Connection;
using namespace runs_test;

Q_DECLARE_METATYPE(studio::ui::RunState)

namespace {

studio::remote::SubmitResult submitted(const std::string& runId, RemoteRunKind kind,
                                       const std::string& target = "ann@gpu1:2222") {
  studio::remote::SubmitResult r;
  r.record.run_id = runId;
  r.record.host.target = target;
  r.record.host.identity_file = "/home/ann/.ssh/id_ed25519";
  r.record.remote_root = "/scratch/ann/runs";
  r.record.kind = kind;
  r.record.nproc = 2;
  if (kind == RemoteRunKind::Slurm) r.record.job_id = "4242";
  r.record.config_name = "sft_demo.yaml";
  r.record.submitted = 1717171717.5;
  r.remote_config = "stage: sft\noutput_dir: output\nmax_steps: 10\n";
  return r;
}

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

QString create(const QString& root, const studio::remote::SubmitResult& r) {
  QString error;
  const QString dir = RemoteMirror::create(root, r, &error);
  if (dir.isEmpty()) qFatal("%s", qPrintable(error));
  return dir;
}

}  // namespace

class TestRemoteMirror : public QObject {
  Q_OBJECT

 private slots:
  void createAndReadBack();
  void appendsAreTheCursor();
  void followStateRoundTrip_data();
  void followStateRoundTrip();
  void badFollowStateNamesTheFile();
  void hostileFiles_data();
  void hostileFiles();
  void runInfo_data();
  void runInfo();
  void unreachableHostRetriesAndLetsGo();
  void pointsOfASlurmArraySweep();
};

void TestRemoteMirror::createAndReadBack() {
  QTemporaryDir root;
  const auto r = submitted("sft-20260101-000000-ab12", RemoteRunKind::Detached);
  const QString dir = create(root.path(), r);
  QCOMPARE(dir, root.filePath(QStringLiteral("sft-20260101-000000-ab12")));
  QVERIFY(studio::ui::isRemoteRunFolder(dir));
  QVERIFY(studio::ui::isRunFolder(dir));  // listed by RunStore before anything is mirrored
  QCOMPARE(readAll(studio::ui::runFile(dir, studio::remote::kRemoteRecordFileName)),
           QByteArray::fromStdString(r.record.to_json()));
  QCOMPARE(readAll(studio::ui::runFile(dir, "config.yaml")),
           QByteArray::fromStdString(r.remote_config));
  const RemoteMirror mirror(dir);
  QCOMPARE(mirror.readRecord().to_json(), r.record.to_json());
  const auto follow = mirror.readFollowState();
  QVERIFY(follow.has_value());
  QCOMPARE(follow->connection, Connection::Connecting);
  QCOMPARE(follow->remoteState, std::optional<RemoteRunState>(RemoteRunState::Starting));
  QCOMPARE(mirror.cursor().events, std::uint64_t(0));
  QCOMPARE(mirror.cursor().log, std::uint64_t(0));

  // A Slurm job starts out queued; an id that cannot name a folder is refused.
  const QString slurm = create(root.path(), submitted("job-1", RemoteRunKind::Slurm));
  QCOMPARE(RemoteMirror(slurm).readFollowState()->remoteState,
           std::optional<RemoteRunState>(RemoteRunState::Queued));
  QString error;
  QVERIFY(RemoteMirror::create(root.path(), submitted("../escape", RemoteRunKind::Detached), &error)
              .isEmpty());
  QVERIFY2(error.contains(QStringLiteral("../escape")), qPrintable(error));
  QVERIFY(!QFileInfo::exists(root.filePath(QStringLiteral("../escape"))));
}

void TestRemoteMirror::appendsAreTheCursor() {
  QTemporaryDir root;
  const RemoteMirror mirror(create(root.path(), submitted("r-1", RemoteRunKind::Detached)));
  const std::string chunks[] = {"{\"event\":\"start\"}\n", "{\"event\":\"step\",\"step\":1}\n",
                                std::string("{\"x\":\"\xc3\xa9\\n\"}\n")};
  std::string all;
  for (const std::string& c : chunks) {
    QCOMPARE(mirror.appendEvents(c), QString());
    all += c;
    QCOMPARE(mirror.cursor().events, static_cast<std::uint64_t>(all.size()));
  }
  QCOMPARE(mirror.appendLog("loading model\n"), QString());
  QCOMPARE(mirror.appendLog("step 1 lo"), QString());  // a log may end mid-line
  QCOMPARE(mirror.appendLog(""), QString());
  QCOMPARE(readAll(studio::ui::runFile(mirror.dir(), studio::kEventsFileName)),
           QByteArray::fromStdString(all));
  QCOMPARE(readAll(studio::ui::runFile(mirror.dir(), "train.log")),
           QByteArray("loading model\nstep 1 lo"));
  QCOMPARE(mirror.cursor().log, std::uint64_t(23));
  QCOMPARE(mirror.writeStatus("{\"state\":\"running\"}"), QString());
  QCOMPARE(readAll(studio::ui::runFile(mirror.dir(), studio::kStatusFileName)),
           QByteArray("{\"state\":\"running\"}"));

  // A mirror that cannot be written says which file.
  QVERIFY(QFile::setPermissions(mirror.dir(), QFile::ReadOwner | QFile::ExeOwner));
  const QString error = mirror.writeStatus("{}");
  QVERIFY(
      QFile::setPermissions(mirror.dir(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  if (::geteuid() != 0) QVERIFY2(error.contains(QStringLiteral("status.json")), qPrintable(error));
}

void TestRemoteMirror::followStateRoundTrip_data() {
  QTest::addColumn<int>("connection");
  QTest::addColumn<int>("remoteState");  // -1: none
  QTest::newRow("connecting, nothing known") << int(Connection::Connecting) << -1;
  QTest::newRow("connected, running") << int(Connection::Connected) << int(RemoteRunState::Running);
  QTest::newRow("retrying, queued") << int(Connection::Retrying) << int(RemoteRunState::Queued);
  QTest::newRow("ended, finished") << int(Connection::Ended) << int(RemoteRunState::Finished);
  QTest::newRow("ended, lost") << int(Connection::Ended) << int(RemoteRunState::Lost);
  QTest::newRow("failed, stopped") << int(Connection::Failed) << int(RemoteRunState::Stopped);
}

void TestRemoteMirror::followStateRoundTrip() {
  QFETCH(int, connection);
  QFETCH(int, remoteState);
  RemoteFollowState s;
  s.connection = static_cast<Connection>(connection);
  s.attempt = 3;
  s.error = QStringLiteral("ann@gpu1:2222: connection refused \"quoted\"");
  s.nextRetry = QDateTime::fromMSecsSinceEpoch(1717171717250);
  s.lastContact = QDateTime::fromMSecsSinceEpoch(1717171700000);
  if (remoteState >= 0) s.remoteState = static_cast<RemoteRunState>(remoteState);
  s.remoteReason = QStringLiteral("PENDING (Priority)");
  QCOMPARE(RemoteFollowState::fromJson(s.toJson(), QStringLiteral("f.json")), s);
  QTemporaryDir root;
  const RemoteMirror mirror(create(root.path(), submitted("r-2", RemoteRunKind::Detached)));
  QCOMPARE(mirror.writeFollowState(s), QString());
  QCOMPARE(*mirror.readFollowState(), s);
}

void TestRemoteMirror::badFollowStateNamesTheFile() {
  for (const QByteArray& bad :
       {QByteArray("{\"connection\": \"sideways\"}"), QByteArray("[1,"),
        QByteArray("{\"connection\":\"connected\",\"remote_state\":\"x\"}")}) {
    QString message;
    try {
      RemoteFollowState::fromJson(bad, QStringLiteral("/runs/r/remote-follow.json"));
    } catch (const std::invalid_argument& e) {
      message = QString::fromUtf8(e.what());
    }
    QVERIFY2(message.startsWith(QStringLiteral("/runs/r/remote-follow.json: ")),
             qPrintable(message));
  }
}

void TestRemoteMirror::hostileFiles_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("what");
  for (const char* file :
       {studio::remote::kRemoteRecordFileName, studio::ui::kRemoteFollowFileName}) {
    QTest::addRow("%s as a link to /dev/zero", file)
        << QString::fromLatin1(file) << "link"
        << "a character device (a link to /dev/zero), not a regular file";
    QTest::addRow("%s as a FIFO", file) << QString::fromLatin1(file) << "fifo"
                                        << "a FIFO (named pipe), not a regular file";
  }
}

void TestRemoteMirror::hostileFiles() {
  QFETCH(QString, file);
  QFETCH(QString, kind);
  QFETCH(QString, what);
  QTemporaryDir root;
  const QString dir = create(root.path(), submitted("r-hostile", RemoteRunKind::Detached));
  const QString path = studio::ui::runFile(dir, file.toUtf8().constData());
  QVERIFY(QFile::remove(path) && makeHostileFile(path, kind, "/dev/zero"));
  const RemoteMirror mirror(dir);
  using namespace std::chrono_literals;
  const QString message = within(5s, "the mirror's reader", [&] {
    try {
      if (file == studio::ui::kRemoteFollowFileName)
        (void)mirror.readFollowState();
      else
        (void)mirror.readRecord();
    } catch (const std::invalid_argument& e) {
      return QString::fromUtf8(e.what());
    }
    return QString();
  });
  QCOMPARE(message, path + ": " + what);
}

void TestRemoteMirror::runInfo_data() {
  QTest::addColumn<QString>("setup");
  QTest::addColumn<RunState>("state");
  QTest::addColumn<QString>("reason");  // the start of RunInfo::reason

  QTest::newRow("just submitted") << "submitted" << RunState::Starting << "";
  QTest::newRow("slurm job pending") << "queued" << RunState::Starting << "queued (Slurm job 4242)";
  QTest::newRow("running") << "running" << RunState::Running << "";
  QTest::newRow("running, connection lost")
      << "retrying" << RunState::Running
      << "connection lost: ann@gpu1:2222: Connection refused; retrying in ";
  QTest::newRow("process gone on the host")
      << "lost" << RunState::Lost << "status.json says running, but pid 777 is gone";
  QTest::newRow("finished") << "finished" << RunState::Finished << "completed 10 steps";
  QTest::newRow("stopped") << "stopped" << RunState::Stopped << "stopped at step 4";
  QTest::newRow("engine died before status.json")
      << "failed early" << RunState::Failed << "engine exited with 1";
  QTest::newRow("host key refused")
      << "follow failed" << RunState::Running << "not followed: host key of gpu1 changed";
  QTest::newRow("record damaged") << "bad record" << RunState::Unknown << "";
}

void TestRemoteMirror::runInfo() {
  QFETCH(QString, setup);
  QFETCH(RunState, state);
  QFETCH(QString, reason);
  QTemporaryDir root;
  const auto r = submitted(
      "sft-r", setup == QLatin1String("queued") ? RemoteRunKind::Slurm : RemoteRunKind::Detached);
  const QString dir = create(root.path(), r);
  const RemoteMirror mirror(dir);
  RemoteFollowState follow = *mirror.readFollowState();
  const double t0 = 1717171717.0;
  // The engine's files as the follower mirrors them; the host name in status.json is this
  // machine's, as when the SSH host is this machine: a mirror is never "local" all the same.
  auto engineRunning = [&] {
    appendEvents(dir, startEvent(t0, 1, "zigzag-ring", 2, 10), stepEvent(4, 2.0, t0 + 4));
    writeStatus(dir, studio::RunState::Running, 777);
    follow.connection = Connection::Connected;
    follow.remoteState = RemoteRunState::Running;
  };
  if (setup == QLatin1String("running")) {
    engineRunning();
  } else if (setup == QLatin1String("retrying")) {
    engineRunning();
    follow.connection = Connection::Retrying;
    follow.attempt = 3;
    follow.error = QStringLiteral("ann@gpu1:2222: Connection refused");
    follow.nextRetry = QDateTime::currentDateTime().addMSecs(5000);
  } else if (setup == QLatin1String("lost")) {
    engineRunning();
    follow.remoteState = RemoteRunState::Lost;
    follow.remoteReason = QStringLiteral("status.json says running, but pid 777 is gone");
  } else if (setup == QLatin1String("finished")) {
    appendEvents(dir, startEvent(t0, 1, "zigzag-ring", 2, 10), stepEvent(10, 1.5, t0 + 10),
                 studio::EndEvent{"finished", "completed 10 steps"});
    writeStatus(dir, studio::RunState::Finished, 777, studio::ui::localHostName(),
                "completed 10 steps");
    follow.connection = Connection::Ended;
    follow.remoteState = RemoteRunState::Finished;
  } else if (setup == QLatin1String("stopped")) {
    appendEvents(dir, startEvent(t0), stepEvent(4, 2.0, t0 + 4));
    writeStatus(dir, studio::RunState::Stopped, 777, studio::ui::localHostName(),
                "stopped at step 4");
    follow.remoteState = RemoteRunState::Stopped;
  } else if (setup == QLatin1String("failed early")) {
    follow.connection = Connection::Ended;
    follow.remoteState = RemoteRunState::Failed;
    follow.remoteReason = QStringLiteral("engine exited with 1 before it wrote status.json");
  } else if (setup == QLatin1String("follow failed")) {
    engineRunning();
    follow.connection = Connection::Failed;
    follow.error = QStringLiteral("host key of gpu1 changed");
  } else if (setup == QLatin1String("bad record")) {
    appendRaw(dir, studio::remote::kRemoteRecordFileName, "garbage");
  }
  QCOMPARE(mirror.writeFollowState(follow), QString());

  const RunInfo info = studio::ui::readRunInfo(dir);
  QCOMPARE(info.state, state);
  QCOMPARE(info.stateText, studio::ui::runStateText(state));
  QVERIFY(info.remote);
  QVERIFY(!info.local);
  if (setup == QLatin1String("bad record")) {
    QVERIFY2(info.reason.contains(QStringLiteral("studio-remote.json")), qPrintable(info.reason));
    return;
  }
  QVERIFY2(reason.isEmpty() ? info.reason.isEmpty() : info.reason.startsWith(reason),
           qPrintable(info.reason));
  QCOMPARE(info.host, QStringLiteral("ann@gpu1:2222"));
  QCOMPARE(info.remoteTarget, QStringLiteral("ann@gpu1:2222"));
  QCOMPARE(info.logPath, studio::ui::runFile(dir, "train.log"));
  QCOMPARE(info.configPath, studio::ui::runFile(dir, "config.yaml"));
  QCOMPARE(info.started, QDateTime::fromMSecsSinceEpoch(1717171717500));
  if (setup == QLatin1String("retrying")) {
    // The next try is 5 s after the follower wrote the file, so 5 s or a little less from now.
    static const QRegularExpression left(QStringLiteral("retrying in [345]s \\(attempt 3\\)$"));
    QVERIFY2(left.match(info.reason).hasMatch(), qPrintable(info.reason));
  }
  if (setup == QLatin1String("running")) {
    QCOMPARE(info.lastStep, qint64(4));
    QCOMPARE(info.worldSize, 2);
    QCOMPARE(info.maxSteps, qint64(10));
  }
}

// Port 1 on this machine refuses connections: every try fails at once, the way a host that is
// down for a moment does, with no network needed.
void TestRemoteMirror::unreachableHostRetriesAndLetsGo() {
  QTemporaryDir root;
  const QString live =
      create(root.path(), submitted("live", RemoteRunKind::Detached, "nobody@127.0.0.1:1"));
  const QString done =
      create(root.path(), submitted("done", RemoteRunKind::Detached, "nobody@127.0.0.1:1"));
  RemoteFollowState ended;
  ended.connection = Connection::Ended;
  ended.remoteState = RemoteRunState::Finished;
  QCOMPARE(RemoteMirror(done).writeFollowState(ended), QString());
  QVERIFY(QDir(root.path()).mkpath(QStringLiteral("local-run")));
  writeStatus(root.filePath(QStringLiteral("local-run")), studio::RunState::Finished, 1);

  QElapsedTimer elapsed;
  {
    studio::ui::RemoteRuns runs;
    studio::remote::FollowOptions options;
    options.backoff_initial = std::chrono::milliseconds(100);
    options.backoff_max = std::chrono::milliseconds(400);
    runs.setFollowOptions(options);
    QVERIFY(!runs.follow(root.filePath(QStringLiteral("local-run"))));  // not a mirror
    QSignalSpy started(&runs, &studio::ui::RemoteRuns::followAllStarted);
    QSignalSpy lost(&runs, &studio::ui::RemoteRuns::disconnected);
    runs.followAll(root.path());
    QTRY_COMPARE(started.count(), 1);
    QCOMPARE(started.at(0).at(0).toStringList(), QStringList{live});
    QVERIFY(runs.isFollowing(live));
    QVERIFY(!runs.isFollowing(done));
    QTRY_VERIFY_WITH_TIMEOUT(lost.count() >= 2, 10000);
    QCOMPARE(lost.at(0).at(0).toString(), live);
    QVERIFY2(!lost.at(0).at(1).toString().isEmpty(), "no error given");
    QCOMPARE(lost.at(0).at(2).toInt(), 1);
    QVERIFY(lost.at(1).at(2).toInt() >= 2);  // counted on, with backoff
    const RunInfo info = studio::ui::readRunInfo(live);
    QCOMPARE(info.state, RunState::Starting);
    QVERIFY2(info.reason.startsWith(QStringLiteral("connection lost: ")), qPrintable(info.reason));
    QVERIFY2(info.reason.contains(QStringLiteral("(attempt ")), qPrintable(info.reason));
    // Stop cannot reach the host either: it says so, naming the host.
    QSignalSpy cancelFailed(&runs, &studio::ui::RemoteRuns::cancelFailed);
    runs.cancel(live);
    QTRY_COMPARE_WITH_TIMEOUT(cancelFailed.count(), 1, 15000);
    QCOMPARE(cancelFailed.at(0).at(0).toString(), live);
    QVERIFY2(cancelFailed.at(0).at(1).toString().contains(QStringLiteral("127.0.0.1")),
             qPrintable(cancelFailed.at(0).at(1).toString()));
    elapsed.start();
  }
  // The destructor stops the follower thread, which is sleeping between tries.
  QVERIFY2(elapsed.elapsed() < 1500, qPrintable(QString::number(elapsed.elapsed())));
  QCOMPARE(RemoteMirror(done).readFollowState()->connection, Connection::Ended);
}

// The points of a sweep submitted as one Slurm job array (remote::submit_sweep), mirrored here:
// the runs list keeps them together in point order, named "SWEEP / POINT", beside a run of its
// own; Compare Sweep finds them by their shared sweep and takes the swept keys from the records.
void TestRemoteMirror::pointsOfASlurmArraySweep() {
  QTemporaryDir root;
  QStringList points;
  const char* names[] = {"00-learning_rate=1e-3", "01-learning_rate=3e-3", "02-learning_rate=1e-2"};
  for (int i = 2; i >= 0; --i) {  // submitted last first: the list still orders them by point
    auto r = submitted("lr-20261204-2330-ab12-0" + std::to_string(i), RemoteRunKind::Slurm);
    r.record.job_id = "77_" + std::to_string(i);
    r.record.sweep_id = "lr-20261204-2330-ab12";
    r.record.sweep_point = names[i];
    r.record.sweep_name = "lr";
    r.record.sweep_keys = {"learning_rate"};
    r.remote_config = "stage: sft\noutput_dir: output\nlearning_rate: " +
                      std::string(names[i]).substr(17) + "\n";
    points.prepend(create(root.path(), r));
  }
  const QString single = create(root.path(), submitted("plain-run", RemoteRunKind::Slurm));
  studio::ui::RunStore store;
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 4);
  QStringList order;
  for (const RunInfo& run : store.runs()) {
    if (run.dir == single) {
      QVERIFY(run.sweep.isEmpty() && run.sweepDir.isEmpty());
      continue;
    }
    order << run.dir;
    QCOMPARE(run.sweep, QString("lr"));
    QCOMPARE(run.sweepDir, QString("ann@gpu1:2222:/scratch/ann/runs/lr-20261204-2330-ab12"));
    QCOMPARE(run.sweepKeys, QStringList{"learning_rate"});
  }
  QCOMPARE(order, points);  // together, in point order
  studio::ui::RunsModel model(&store);
  QTRY_COMPARE(model.rowCount(), 4);
  QStringList shown;
  for (int row = 0; row < model.rowCount(); ++row)
    shown << model.index(row, studio::ui::RunsModel::NameColumn).data().toString();
  QVERIFY2(shown.join('|').contains("lr / 00-learning_rate=1e-3|lr / 01-learning_rate=3e-3|"
                                    "lr / 02-learning_rate=1e-2"),
           qPrintable(shown.join('|')));
  const studio::ui::RunComparison c = studio::ui::compareRuns(points);
  QCOMPARE(c.sweep, QString("lr"));
  QCOMPARE(c.swept, QStringList{"learning_rate"});
  // A plain run among them: compared as plain runs, no sweep.
  QVERIFY(studio::ui::compareRuns({points[0], single}).swept.isEmpty());
}

QTEST_MAIN(TestRemoteMirror)
#include "tst_remote_mirror.moc"
