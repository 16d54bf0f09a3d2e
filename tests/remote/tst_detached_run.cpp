// detached_start_command, cancel_command and status_command, run for real with `sh -c` (no
// SSH: sshd would hand the same line to the login shell) against a stand-in engine that lives,
// with its run folder, under paths full of shell syntax.
#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <stdexcept>
#include <string>
#include <vector>

#include "studio/remote/detached_run.h"

using studio::remote::cancel_command;
using studio::remote::detached_start_command;
using studio::remote::engine_argv;
using studio::remote::LauncherArgs;
using studio::remote::parse_start_output;
using studio::remote::parse_status_output;
using studio::remote::RemoteProcessState;
using studio::remote::RemoteRunLayout;
using studio::remote::status_command;

namespace {

// Every byte class a shell would act on: spaces, both quotes, $, backticks, ;, a newline.
const QByteArray kNasty = "a b 'q' \"dq\" $HOME `id`; x\nline";

// Records the argv it was given (NUL-terminated) and its session id, then waits; on SIGTERM it
// exits unless STANDIN_IGNORE_TERM is set, so cancel has to escalate to SIGKILL.
const QByteArray kStandIn =
    "#!/bin/sh\n"
    "printf '%s\\000' \"$@\" > standin-argv.tmp && mv standin-argv.tmp standin-argv\n"
    "ps -o sid= -p $$ | tr -d ' ' > standin-sid\n"
    "if [ -n \"$STANDIN_IGNORE_TERM\" ]; then trap '' TERM; else trap 'exit 0' TERM; fi\n"
    "while :; do sleep 1; done\n";

struct ShellRun {
  int exit_code = -1;
  QByteArray out;
  QByteArray err;
};

ShellRun run_sh(const QString& shell, const std::string& line, bool ignore_term = false) {
  QProcess proc;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  if (ignore_term) env.insert("STANDIN_IGNORE_TERM", "1");
  proc.setProcessEnvironment(env);
  proc.start(shell, {"-c", QString::fromStdString(line)});
  ShellRun run;
  if (!proc.waitForStarted(10000) || !proc.waitForFinished(30000)) {
    proc.kill();
    proc.waitForFinished();
    run.err = "did not finish";
    return run;
  }
  run.exit_code = proc.exitStatus() == QProcess::NormalExit ? proc.exitCode() : -1;
  run.out = proc.readAllStandardOutput();
  run.err = proc.readAllStandardError();
  return run;
}

QByteArray read_all(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// The state letter of /proc/PID/stat ('R', 'S', 'Z', ...), or 0 when the process is gone.
char proc_state(long long pid) {
  QByteArray stat = read_all(QString("/proc/%1/stat").arg(pid));
  qsizetype close = stat.lastIndexOf(')');
  return close < 0 || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

// Alive as far as anyone is concerned: this sandbox's init does not reap orphans, so a stopped
// engine stays a zombie.
bool is_alive(long long pid) {
  char s = proc_state(pid);
  return s != 0 && s != 'Z' && s != 'X';
}

QByteArray nul_joined(const std::vector<std::string>& args) {
  QByteArray out;
  for (const std::string& a : args) out.append(a.data(), static_cast<qsizetype>(a.size())).append('\0');
  return out;
}

}  // namespace

class TestDetachedRun : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  QString engine_;  // the stand-in, named studio-train, in a folder with a nasty name
  std::vector<long long> started_;

  RemoteRunLayout make_layout(const QString& name) {
    QString dir = tmp_.path() + "/" + name + QString::fromUtf8(kNasty);
    QDir().mkpath(dir);
    RemoteRunLayout layout;
    layout.run_dir = dir.toStdString();
    layout.config_file = "cfg " + kNasty.toStdString() + ".yaml";
    return layout;
  }

  LauncherArgs nasty_launcher() {
    LauncherArgs args;
    args.nproc = 2;
    args.master_addr = "h$x`y`;'z\"";
    args.master_port = 29511;
    return args;
  }

  long long start(const QString& shell, const RemoteRunLayout& layout, bool ignore_term = false) {
    ShellRun run = run_sh(shell, detached_start_command(layout, engine_.toStdString(),
                                                        nasty_launcher()),
                          ignore_term);
    if (run.exit_code != 0) {
      qWarning("start failed (%d): %s", run.exit_code, run.err.constData());
      return 0;
    }
    long long pid = parse_start_output(run.out.toStdString());
    started_.push_back(pid);
    return pid;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    QString bin = tmp_.path() + "/bin " + QString::fromUtf8(kNasty);
    QVERIFY(QDir().mkpath(bin));
    engine_ = bin + "/studio-train";
    QFile file(engine_);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(kStandIn);
    file.close();
    QVERIFY(file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  }

  void cleanupTestCase() {
    for (long long pid : started_) ::kill(static_cast<pid_t>(-pid), SIGKILL);
  }

  void launcherFlags_data() {
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("nnodes");
    QTest::addColumn<int>("rank");
    QTest::addColumn<QString>("addr");
    QTest::addColumn<int>("port");
    QTest::addColumn<QStringList>("flags");
    QTest::newRow("one node") << 4 << 1 << 0 << "" << 0 << QStringList{"--nproc", "4"};
    QTest::newRow("one node, port") << 1 << 1 << 0 << "" << 29400
                                    << QStringList{"--nproc", "1", "--master-port", "29400"};
    QTest::newRow("node 1 of 2")
        << 8 << 2 << 1 << "10.0.0.1" << 29500
        << QStringList{"--nproc", "8", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                       "10.0.0.1", "--master-port", "29500"};
  }
  void launcherFlags() {
    QFETCH(int, nproc);
    QFETCH(int, nnodes);
    QFETCH(int, rank);
    QFETCH(QString, addr);
    QFETCH(int, port);
    QFETCH(QStringList, flags);
    LauncherArgs args{nproc, nnodes, rank, addr.toStdString(), port};
    QStringList got;
    for (const std::string& f : args.to_flags()) got << QString::fromStdString(f);
    QCOMPARE(got, flags);
  }

  void rejectsBadInput_data() {
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("nnodes");
    QTest::addColumn<int>("rank");
    QTest::addColumn<QString>("addr");
    QTest::addColumn<int>("port");
    QTest::addColumn<QString>("message");
    QTest::newRow("no workers") << 0 << 1 << 0 << "" << 0 << "--nproc is 0";
    QTest::newRow("rank too big") << 1 << 2 << 2 << "h" << 1 << "--node-rank 2 is outside 0..1";
    QTest::newRow("negative rank") << 1 << 2 << -1 << "h" << 1 << "--node-rank -1";
    QTest::newRow("port") << 1 << 1 << 0 << "" << 70000 << "--master-port 70000";
    QTest::newRow("multi-node, no addr") << 1 << 2 << 0 << "" << 29500 << "needs --master-addr";
    QTest::newRow("multi-node, no port") << 1 << 2 << 0 << "h" << 0 << "needs --master-addr";
    QTest::newRow("addr as option") << 1 << 1 << 0 << "-oops" << 0 << "not a host name";
    QTest::newRow("addr with space") << 1 << 1 << 0 << "a b" << 0 << "not a host name";
  }
  void rejectsBadInput() {
    QFETCH(int, nproc);
    QFETCH(int, nnodes);
    QFETCH(int, rank);
    QFETCH(QString, addr);
    QFETCH(int, port);
    QFETCH(QString, message);
    LauncherArgs args{nproc, nnodes, rank, addr.toStdString(), port};
    try {
      args.to_flags();
      QFAIL("accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
    }
  }

  void rejectsBadLayout() {
    RemoteRunLayout layout;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, layout.validate());  // no run_dir
    layout.run_dir = "/r";
    layout.validate();
    layout.pid_file = "sub/train.pid";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, layout.validate());
    layout.pid_file = "-p";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, layout.validate());
    layout.pid_file = "train.pid";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cancel_command(layout, "a/b"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cancel_command(layout, "studio-train", -1));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             detached_start_command(layout, "-x", LauncherArgs{}));
    QCOMPARE(layout.status_file(), std::string("output/status.json"));
  }

  void parsesOutputs() {
    auto s = parse_status_output("no-pid-file\n");
    QCOMPARE(s.state, RemoteProcessState::NotStarted);
    s = parse_status_output("running 42\n{\"state\": \"running\"}\n");
    QCOMPARE(s.state, RemoteProcessState::Running);
    QCOMPARE(s.pid, 42LL);
    QCOMPARE(s.status_json, std::string("{\"state\": \"running\"}\n"));
    s = parse_status_output("not-running 7");
    QCOMPARE(s.state, RemoteProcessState::NotRunning);
    QCOMPARE(s.pid, 7LL);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_status_output("Welcome to node1\n"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_status_output("running x1\n"));
    QCOMPARE(parse_start_output("123\n"), 123LL);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_start_output(""));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_start_output("-5\n"));
  }

  void startStatusCancel_data() {
    QTest::addColumn<QString>("shell");
    QTest::newRow("sh") << "/bin/sh";
    QString bash = QStandardPaths::findExecutable("bash");
    if (!bash.isEmpty()) QTest::newRow("bash") << bash;
  }
  void startStatusCancel() {
    QFETCH(QString, shell);
    RemoteRunLayout layout = make_layout("run-" + QFileInfo(shell).fileName() + " ");
    QString dir = QString::fromStdString(layout.run_dir);

    ShellRun before = run_sh(shell, status_command(layout));
    QCOMPARE(before.exit_code, 0);
    QCOMPARE(before.out, QByteArray("no-pid-file\n"));

    long long pid = start(shell, layout);
    QVERIFY(pid > 0);
    // The starting shell has exited (run_sh waited for it); the engine lives on.
    QVERIFY(is_alive(pid));
    QCOMPARE(read_all(dir + "/train.pid"), QByteArray::number(pid) + "\n");

    // Byte-exact argv, as the kernel holds it and as the program received it.
    std::vector<std::string> want = engine_argv(engine_.toStdString(), layout.config_file,
                                                nasty_launcher());
    QTRY_VERIFY(QFile::exists(dir + "/standin-argv"));
    QCOMPARE(read_all(dir + "/standin-argv"),
             nul_joined(std::vector<std::string>(want.begin() + 1, want.end())));
    QCOMPARE(read_all(QString("/proc/%1/cmdline").arg(pid)),
             "/bin/sh" + QByteArray(1, '\0') + nul_joined(want));

    // Its own session and process group, with nothing of the starting shell attached.
    QTRY_COMPARE(read_all(dir + "/standin-sid").trimmed(), QByteArray::number(pid));
    QCOMPARE(static_cast<long long>(::getpgid(static_cast<pid_t>(pid))), pid);
    QCOMPARE(read_all(QString("/proc/%1/fd/0").arg(pid)), QByteArray());  // /dev/null
    QCOMPARE(QFile::symLinkTarget(QString("/proc/%1/fd/0").arg(pid)), QString("/dev/null"));
    QCOMPARE(QFile::symLinkTarget(QString("/proc/%1/fd/1").arg(pid)), dir + "/train.log");
    QCOMPARE(QFile::symLinkTarget(QString("/proc/%1/fd/2").arg(pid)), dir + "/train.log");
    // No descriptor left on the starting shell's pipes: sshd would keep the session open (and
    // the caller waiting) until the last holder closed them.
    const QDir fds(QString("/proc/%1/fd").arg(pid));
    for (const QString& fd : fds.entryList(QDir::Files | QDir::System)) {
      QString target = QFile::symLinkTarget(fds.filePath(fd));
      QVERIFY2(!target.startsWith("pipe:") && !target.startsWith("socket:"), qPrintable(target));
    }
    // SIGHUP is ignored, as with nohup: SigIgn bit 1 (signal 1).
    QByteArray status = read_all(QString("/proc/%1/status").arg(pid));
    qsizetype at = status.indexOf("SigIgn:\t");
    QVERIFY(at >= 0);
    bool ok = false;
    qulonglong ignored = status.mid(at + 8, 16).toULongLong(&ok, 16);
    QVERIFY(ok);
    QVERIFY(ignored & 1ULL);

    // A second start in the same folder is refused while the first engine lives.
    ShellRun second = run_sh(shell, detached_start_command(layout, engine_.toStdString(),
                                                           nasty_launcher()));
    QCOMPARE(second.exit_code, 3);
    QVERIFY2(second.err.contains("already running in this folder"), second.err.constData());
    QCOMPARE(read_all(dir + "/train.pid"), QByteArray::number(pid) + "\n");

    ShellRun running = run_sh(shell, status_command(layout));
    QCOMPARE(running.exit_code, 0);
    auto parsed = parse_status_output(running.out.toStdString());
    QCOMPARE(parsed.state, RemoteProcessState::Running);
    QCOMPARE(parsed.pid, pid);
    QVERIFY(parsed.status_json.empty());

    QVERIFY(QDir().mkpath(dir + "/output"));
    QFile json(dir + "/output/status.json");
    QVERIFY(json.open(QIODevice::WriteOnly));
    json.write("{\n  \"state\": \"running\"\n}\n");
    json.close();
    parsed = parse_status_output(run_sh(shell, status_command(layout)).out.toStdString());
    QCOMPARE(parsed.status_json, std::string("{\n  \"state\": \"running\"\n}\n"));

    ShellRun cancel = run_sh(shell, cancel_command(layout, "studio-train", 5));
    QCOMPARE(cancel.exit_code, 0);
    QCOMPARE(cancel.out, "stopped " + QByteArray::number(pid) + "\n");
    QVERIFY(!is_alive(pid));

    parsed = parse_status_output(run_sh(shell, status_command(layout)).out.toStdString());
    QCOMPARE(parsed.state, RemoteProcessState::NotRunning);
    ShellRun again = run_sh(shell, cancel_command(layout));
    QCOMPARE(again.out, "not-running " + QByteArray::number(pid) + "\n");
  }

  void cancelEscalatesToKill() {
    RemoteRunLayout layout = make_layout("stubborn ");
    long long pid = start("/bin/sh", layout, /*ignore_term=*/true);
    QVERIFY(pid > 0);
    QTRY_VERIFY(QFile::exists(QString::fromStdString(layout.run_dir) + "/standin-sid"));
    ShellRun cancel = run_sh("/bin/sh", cancel_command(layout, "studio-train", 1));
    QCOMPARE(cancel.exit_code, 0);
    QCOMPARE(cancel.out, "killed " + QByteArray::number(pid) + "\n");
    QTRY_VERIFY(!is_alive(pid));
  }

  void cancelSparesReusedPid() {
    // A pid file naming a live process that is not the engine: a pid reused after the run.
    RemoteRunLayout layout = make_layout("reused ");
    QProcess stranger;
    stranger.start("sleep", {"30"});
    QVERIFY(stranger.waitForStarted());
    long long pid = stranger.processId();
    QFile file(QString::fromStdString(layout.run_dir) + "/train.pid");
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::number(pid) + "\n");
    file.close();
    ShellRun cancel = run_sh("/bin/sh", cancel_command(layout, "studio-train", 1));
    QCOMPARE(cancel.out, "not-running " + QByteArray::number(pid) + "\n");
    auto parsed = parse_status_output(run_sh("/bin/sh", status_command(layout)).out.toStdString());
    QCOMPARE(parsed.state, RemoteProcessState::NotRunning);
    QCOMPARE(stranger.state(), QProcess::Running);
    // The stale pid file does not block a new run, whose pid replaces it.
    long long pid2 = start("/bin/sh", layout);
    QVERIFY(pid2 > 0 && pid2 != pid);
    QCOMPARE(run_sh("/bin/sh", cancel_command(layout, "studio-train", 5)).out,
             "stopped " + QByteArray::number(pid2) + "\n");
    QCOMPARE(stranger.state(), QProcess::Running);
    stranger.kill();
    stranger.waitForFinished();
  }

  void corruptPidFileIsAnError() {
    RemoteRunLayout layout = make_layout("corrupt ");
    QFile file(QString::fromStdString(layout.run_dir) + "/train.pid");
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("12; rm -rf /\n");
    file.close();
    ShellRun cancel = run_sh("/bin/sh", cancel_command(layout));
    QCOMPARE(cancel.exit_code, 2);
    QVERIFY2(cancel.err.contains("does not hold a pid"), cancel.err.constData());
  }

  void missingEngineOrFolderFails() {
    RemoteRunLayout layout = make_layout("missing ");
    ShellRun run = run_sh("/bin/sh", detached_start_command(layout, "/nonexistent/studio-train",
                                                            LauncherArgs{}));
    QCOMPARE(run.exit_code, 127);
    QVERIFY2(run.err.contains("is not an executable file"), run.err.constData());
    QVERIFY(!QFile::exists(QString::fromStdString(layout.run_dir) + "/train.pid"));

    layout.run_dir += "/not there";
    run = run_sh("/bin/sh", detached_start_command(layout, engine_.toStdString(), LauncherArgs{}));
    QVERIFY(run.exit_code != 0);
    QVERIFY(run.out.isEmpty());
  }
};

QTEST_MAIN(TestDetachedRun)
#include "tst_detached_run.moc"
