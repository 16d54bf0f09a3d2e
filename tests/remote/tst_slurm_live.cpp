// A real single-node Slurm (slurmctld + slurmd + munged, Debian's slurm-wlm and munge) started
// in a temporary folder on loopback ports, fed a batch script from sbatch_script() whose engine
// is a stand-in, and followed with squeue through parse_squeue. Skipped where the daemons are
// not installed or the test is not root (slurmd must be). There is no slurmdbd here, so sacct
// can only report that accounting is disabled; parse_sacct is covered by tst_slurm_state.
// With the engine built, a real run is also submitted the way the studio does it: over SSH (a
// real sshd on loopback whose sessions get SLURM_CONF) with submit_run, followed to the end with
// follow_run, and another one cancelled with cancel_run (scancel).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "loopback_port.h"
#include "sshd_server.h"
#include "studio/remote/run_follow.h"
#include "studio/remote/run_submit.h"
#include "studio/remote/slurm_script.h"
#include "studio/remote/slurm_state.h"
#ifdef STUDIO_TEST_UI_REMOTE
#include <QSignalSpy>

#include "studio/config/config_io.h"
#include "studio/ui/remote/remote_follower.h"
#include "studio/ui/remote/remote_submitter.h"
#include "studio/ui/runs/remote_mirror.h"
#include "studio/ui/runs/run_info.h"
#endif

using studio::remote::is_terminal;
using studio::remote::JobState;
using studio::remote::JobStatus;
using studio::remote::parse_sacct;
using studio::remote::parse_sbatch_output;
using studio::remote::parse_squeue;
using studio::remote::RemoteRunLayout;
using studio::remote::sacct_command;
using studio::remote::sbatch_script;
using studio::remote::sbatch_submit_command;
using studio::remote::SbatchOptions;
using studio::remote::scancel_command;
using studio::remote::squeue_command;

namespace {

// Records what the engine would see under srun, then sleeps and exits as told.
const QByteArray kStandIn =
    "#!/bin/sh\n"
    "printf '%s\\000' \"$@\" > standin-argv\n"
    "printf '%s\\n' \"step=$SLURM_STEP_ID nnodes=$SLURM_NNODES nodeid=$SLURM_NODEID "
    "addr=$MASTER_ADDR port=$MASTER_PORT\" > standin-env\n"
    "echo standin ran\n"
    "sleep \"${STANDIN_SLEEP:-0}\"\n"
    "exit \"${STANDIN_EXIT:-0}\"\n";

bool write_file(const QString& path, const QByteArray& text, bool executable = false) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return false;
  file.write(text);
  file.close();
  return !executable ||
         file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
}

QByteArray read_all(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

struct ShellRun {
  int exit_code = -1;
  std::string out;
  QByteArray err;
};

}  // namespace

class TestSlurmLive : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  QString conf_;
  QString node_;
  std::vector<std::unique_ptr<QProcess>> daemons_;
  RemoteRunLayout layout_;
  QString engine_;

  bool start_daemon(const QString& program, const QStringList& args) {
    auto proc = std::make_unique<QProcess>();
    proc->setProcessChannelMode(QProcess::MergedChannels);
    proc->setStandardOutputFile(tmp_.filePath(QFileInfo(program).fileName() + ".out"));
    end_with_test(*proc);  // also when a timeout or Qt Test's watchdog kills the test
    proc->start(program, args);
    bool ok = proc->waitForStarted(10000);
    daemons_.push_back(std::move(proc));
    return ok;
  }

  ShellRun run_sh(const std::string& line, const QStringList& extra_env = {}) {
    QProcess proc;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_CONF", conf_);
    for (const QString& kv : extra_env) env.insert(kv.section('=', 0, 0), kv.section('=', 1));
    proc.setProcessEnvironment(env);
    proc.start("/bin/sh", {"-c", QString::fromStdString(line)});
    ShellRun run;
    if (!proc.waitForFinished(30000)) {
      proc.kill();
      proc.waitForFinished();
      return run;
    }
    run.exit_code = proc.exitCode();
    run.out = proc.readAllStandardOutput().toStdString();
    run.err = proc.readAllStandardError();
    return run;
  }

  QString node_state() {
    ShellRun run = run_sh("sinfo -h -o %T");
    return QString::fromStdString(run.out).trimmed();
  }

  std::string submit(const QStringList& env) {
    SbatchOptions options;
    options.job_name = "studio-live";
    options.gpus_per_node = 0;
    options.time = "5";
    std::string script = sbatch_script(options, engine_.toStdString(), layout_.config_file);
    QString dir = QString::fromStdString(layout_.run_dir);
    if (!write_file(dir + "/job.sbatch", QByteArray::fromStdString(script))) return {};
    ShellRun run = run_sh(sbatch_submit_command(layout_, "job.sbatch"), env);
    if (run.exit_code != 0) {
      qWarning("sbatch failed: %s", run.err.constData());
      return {};
    }
    return parse_sbatch_output(run.out).job_id;
  }

  // The last lines of the daemons' logs, for a failure's message.
  QString log_tails() {
    QString text;
    for (const char* name : {"slurmctld.log", "slurmd.log"}) {
      QStringList lines = QString::fromUtf8(read_all(tmp_.filePath(name))).split('\n');
      text += QString("--- %1\n").arg(name) +
              lines.mid(std::max(0, static_cast<int>(lines.size()) - 25)).join('\n') + '\n';
    }
    return text;
  }

  std::optional<JobStatus> poll(const std::string& job_id) {
    return parse_squeue(run_sh(squeue_command(job_id)).out, job_id);
  }

  JobState state_of(const std::string& job_id) {
    auto job = poll(job_id);
    return job ? job->state : JobState::Unknown;
  }

#ifdef STUDIO_TRAIN_EXE
  // A real sshd on loopback whose login shells find this test's cluster the way a cluster's
  // users find theirs (SLURM_CONF). Returns "" or why it did not start.
  QString start_sshd(SshdFixture& sshd) {
    return sshd.set_up(tmp_.path(), "SetEnv SLURM_CONF=" + conf_);
  }
  // The sshd for this test's cluster and the demo run's files: "" or what did not start.
  QString live_host(SshdFixture& sshd, studio::remote::RemoteHostRef& host) {
    if (QString error = start_sshd(sshd); !error.isEmpty()) return error;
    host = sshd.host_ref();
    return prepare_demo_run() ? QString() : QStringLiteral("the demo model or sft.yaml was not made");
  }
// A test function's start: `sshd` serving this machine as `host`, the demo run prepared, or the
// function fails there.
#define LIVE_HOST(sshd, host)                                \
  SshdFixture sshd;                                          \
  RemoteHostRef host;                                        \
  if (const QString live_error = live_host(sshd, host);      \
      !live_error.isEmpty())                                 \
    QFAIL(qPrintable(live_error))
  // The demo run submitted to this test's cluster as a batch job (no GPU, 10 minutes), with the
  // engine built here and `overrides`, its folder under tmp/`root`.
  studio::remote::SubmitRequest demo_request(const studio::remote::RemoteHostRef& host,
                                             const QString& root,
                                             const QStringList& overrides) {
    studio::remote::SubmitRequest request;
    request.config_file = tmp_.filePath("sft.yaml").toStdString();
    for (const QString& o : overrides) request.overrides.push_back(o.toStdString());
    request.host = host;
    request.remote_root = tmp_.filePath(root).toStdString();
    request.engine = STUDIO_TRAIN_EXE;
    SbatchOptions slurm;
    slurm.gpus_per_node = 0;
    slurm.time = "10";
    request.slurm = slurm;
    return request;
  }
  // A sweep of the demo run (no axes yet) to this test's cluster, `max_steps` steps a point (no
  // checkpoint, no evaluation on the way), its runs under tmp/`root`.
  studio::remote::SweepSubmitRequest demo_sweep(const studio::remote::RemoteHostRef& host,
                                                const QString& root, const std::string& name,
                                                int max_steps) {
    const QString never = QString::number(std::max(max_steps, 1000));
    studio::remote::SweepSubmitRequest sweep;
    sweep.run = demo_request(host, root,
                             {QStringLiteral("max_steps=%1").arg(max_steps),
                              "save_steps=" + never, "eval_steps=" + never});
    sweep.run.run_name = name;
    return sweep;
  }
  static studio::remote::SshSession connect_to(const studio::remote::RemoteHostRef& host) {
    return studio::remote::SshSession::connect(studio::remote::ssh_options(host),
                                               studio::remote::reject_unknown_host_keys());
  }

  // The demo model and an SFT config on it, in tmp_ (made once).
  bool prepare_demo_run() {
    if (QFile::exists(tmp_.filePath("sft.yaml"))) return true;
    QProcess init;
    init.start(STUDIO_TRAIN_EXE, {"init-model", "--config",
                                  STUDIO_SOURCE_DIR "/resources/demo/model/config.json", "--out",
                                  tmp_.filePath("model"), "--seed", "7"});
    if (!init.waitForFinished(120000) || init.exitCode() != 0) return false;
    QByteArray yaml = read_all(STUDIO_SOURCE_DIR "/resources/demo/sft_demo.yaml");
    yaml.replace("model_name_or_path: build/demo/model",
                 "model_name_or_path: " + tmp_.filePath("model").toUtf8());
    yaml.replace("dataset_dir: resources/demo/data",
                 "dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data");
    yaml.replace("logging_steps: 5", "logging_steps: 1");
    return write_file(tmp_.filePath("sft.yaml"), yaml);
  }
#endif

 private slots:
  void initTestCase() {
    QStringList missing;
    for (const char* tool : {"slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue",
                             "sinfo", "scancel", "sacct"}) {
      if (QStandardPaths::findExecutable(tool, {"/usr/sbin", "/usr/bin", "/sbin", "/bin"})
              .isEmpty()) {
        missing << tool;
      }
    }
    if (!missing.isEmpty()) {
      QSKIP(qPrintable("Slurm/munge not installed (missing " + missing.join(", ") +
                       "); apt-get install slurm-wlm munge to run this test"));
    }
    if (::geteuid() != 0) QSKIP("slurmd must run as root; run this test as root");
    QVERIFY(tmp_.isValid());
    // munged refuses a socket folder others cannot traverse.
    QVERIFY(QFile::setPermissions(tmp_.path(), QFile::ReadOwner | QFile::WriteOwner |
                                                   QFile::ExeOwner | QFile::ExeGroup |
                                                   QFile::ExeOther));
    const QString t = tmp_.path();
    QProcess key;
    key.start("mungekey", {"--create", "--keyfile=" + t + "/munge.key"});
    QVERIFY(key.waitForFinished(10000) && key.exitCode() == 0);
    QVERIFY(start_daemon("munged", {"-F", "--force", "-S", t + "/munge.sock",
                                    "--key-file=" + t + "/munge.key",
                                    "--log-file=" + t + "/munged.log",
                                    "--pid-file=" + t + "/munged.pid",
                                    "--seed-file=" + t + "/munged.seed"}));
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(t + "/munge.sock"), 10000);

    node_ = QSysInfo::machineHostName().section('.', 0, 0);
    int ctld_port = studio::test::free_loopback_port();
    int slurmd_port = studio::test::free_loopback_port();
    QVERIFY(ctld_port > 0 && slurmd_port > 0 && ctld_port != slurmd_port);
    QVERIFY(QDir().mkpath(t + "/state") && QDir().mkpath(t + "/spool"));
    QString conf = QString(
        "ClusterName=studiotest\n"
        "SlurmctldHost=%1(127.0.0.1)\n"
        "SlurmUser=root\nSlurmdUser=root\n"
        "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=%2/munge.sock\n"
        "StateSaveLocation=%2/state\nSlurmdSpoolDir=%2/spool\n"
        "SlurmctldPidFile=%2/slurmctld.pid\nSlurmdPidFile=%2/slurmd.pid\n"
        "SlurmctldLogFile=%2/slurmctld.log\nSlurmdLogFile=%2/slurmd.log\n"
        "SlurmctldPort=%3\nSlurmdPort=%4\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        "SchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "MpiDefault=none\nReturnToService=2\nMinJobAge=600\n"
        "NodeName=%1 NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n"
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")
                       .arg(node_, t)
                       .arg(ctld_port)
                       .arg(slurmd_port);
    conf_ = t + "/slurm.conf";
    QVERIFY(write_file(conf_, conf.toUtf8()));
    QVERIFY(start_daemon("slurmctld", {"-D", "-f", conf_}));
    QVERIFY(start_daemon("slurmd", {"-D", "-f", conf_, "-N", node_}));
    QTRY_COMPARE_WITH_TIMEOUT(node_state(), QString("idle"), 30000);

    QString run_dir = t + "/run 'x' $dir";
    QVERIFY(QDir().mkpath(run_dir + "/bin dir"));
    layout_.run_dir = run_dir.toStdString();
    engine_ = run_dir + "/bin dir/studio-train";
    QVERIFY(write_file(engine_, kStandIn, true));
  }

  // A sweep as one Slurm job array: every point checked before anything is uploaded (an invalid
  // one refuses the whole sweep and leaves no folder), then one run folder per point and array
  // task, each followed, listed and ended like a run of its own, at most `parallel` at once.
  void sweepSubmittedAsJobArray() {
#ifndef STUDIO_TRAIN_EXE
    QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
#else
    using namespace studio::remote;
    LIVE_HOST(sshd, host);
    auto connect = [&] { return connect_to(host); };
    const SshSession session = connect();

    SweepSubmitRequest sweep = demo_sweep(host, "sweeps", "lr", 4);

    // Point 01 cannot run in a world of 1: nothing is uploaded or submitted.
    SweepSubmitRequest bad = sweep;
    bad.axes = {"sequence_parallel_size=1,2"};
    try {
      submit_sweep(session, bad);
      QFAIL("an invalid point was submitted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains("sweep point 01-sequence_parallel_size=2"), e.what());
      QVERIFY2(QString(e.what()).contains("nothing was submitted"), e.what());
      QVERIFY2(!QString(e.what()).contains("sweep point 00-"), e.what());
    }
    QVERIFY(!QDir(tmp_.filePath("sweeps")).exists());
    SweepSubmitRequest without_slurm = sweep;
    without_slurm.axes = {"learning_rate=1e-3,3e-3"};
    without_slurm.run.slurm.reset();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, submit_sweep(session, without_slurm));

    sweep.axes = {"learning_rate=1e-3,3e-3,1e-2"};
    sweep.parallel = 2;
    const SweepSubmitResult done = submit_sweep(session, sweep);
    QCOMPARE(int(done.points.size()), 3);
    auto stop_jobs = qScopeGuard([&] { run_sh(scancel_command(done.job_id)); });
    const QString sweep_dir = tmp_.filePath("sweeps/") + QString::fromStdString(done.sweep_id);
    QVERIFY(read_all(sweep_dir + "/job.sbatch").contains("#SBATCH --array=0-2%2\n"));
    const auto sweep_json = QJsonDocument::fromJson(read_all(sweep_dir + "/sweep.json")).object();
    QCOMPARE(sweep_json["name"].toString(), QString("lr"));
    QCOMPARE(sweep_json["remote_runs"].toArray().size(), 3);
    const char* names[] = {"00-learning_rate=1e-3", "01-learning_rate=3e-3", "02-learning_rate=1e-2"};
    const double lrs[] = {1e-3, 3e-3, 1e-2};
    for (int i = 0; i < 3; ++i) {
      const RemoteRunRecord& point = done.points[static_cast<std::size_t>(i)];
      QCOMPARE(point.run_id, done.sweep_id + "-0" + std::to_string(i));
      QCOMPARE(point.job_id, done.job_id + "_" + std::to_string(i));
      QCOMPARE(point.sweep_point, std::string(names[i]));
      QCOMPARE(sweep_json["remote_runs"].toArray()[i].toString().toStdString(), point.run_id);
      // The record on the host is the one the studio reads back (with the task's job id).
      const RemoteRunRecord read = read_remote_record(session, sweep.run.remote_root, point.run_id);
      QCOMPARE(read.job_id, point.job_id);
      QCOMPARE(read.sweep_id, done.sweep_id);
      QCOMPARE(read.sweep_point, point.sweep_point);
    }
    // The scheduler holds the array to two tasks at once (this one-CPU node runs one anyway).
    const ShellRun show = run_sh("scontrol show job " + done.job_id);
    QVERIFY2(show.out.find("ArrayTaskThrottle=2") != std::string::npos, show.out.c_str());
    QTRY_VERIFY_WITH_TIMEOUT(std::all_of(done.points.begin(), done.points.end(),
                                         [&](const RemoteRunRecord& p) {
                                           return is_terminal(state_of(p.job_id));
                                         }),
                             240000);
    for (int i = 0; i < 3; ++i) {
      const RemoteRunRecord& point = done.points[static_cast<std::size_t>(i)];
      FollowCursor cursor;
      std::string events;
      FollowCallbacks callbacks;
      callbacks.on_events = [&](const std::string& bytes) { events += bytes; };
      FollowOptions options;
      options.poll_interval = std::chrono::milliseconds(300);
      std::atomic<bool> stop{false};
      const auto end = follow_run(connect, point, cursor, callbacks, options, stop);
      QVERIFY(end.has_value());
      const QString dir = QString::fromStdString(point.run_dir());
      QVERIFY2(to_string(end->state) == std::string("finished"),
               qPrintable(QString::fromStdString(end->reason) + "\n" +
                          read_all(dir + "/train.log").right(600)));
      QCOMPARE(state_of(point.job_id), JobState::Completed);
      QCOMPARE(QByteArray::fromStdString(events), read_all(dir + "/output/events.jsonl"));
      // The task trained its own point: its config and the learning rate of its first step.
      QVERIFY(read_all(dir + "/config.yaml").contains("output_dir: output\n"));
      double peak_lr = 0;
      int last_step = 0;
      for (const QByteArray& line : QByteArray::fromStdString(events).split('\n')) {
        const auto j = QJsonDocument::fromJson(line).object();
        if (j["event"].toString() != "step") continue;
        peak_lr = std::max(peak_lr, j["lr"].toDouble());
        last_step = j["step"].toInt();
      }
      QCOMPARE(last_step, 4);
      QVERIFY2(peak_lr <= lrs[i] * (1 + 1e-6) && peak_lr > lrs[i] * 0.5,
               qPrintable(QString("point %1: peak lr %2").arg(i).arg(peak_lr)));
      // The task's output is the point's own train.log (sbatch --output=../PREFIX%2a/train.log).
      QVERIFY(!read_all(dir + "/train.log").isEmpty());
    }
    QVERIFY(!QFile::exists(sweep_dir + "/train.log"));

#ifdef STUDIO_TEST_UI_REMOTE
    // The studio's way (the wizard's Sweep... on a Slurm target): RemoteSubmitter stages the
    // config, submits the array off the GUI thread and mirrors every point; the runs list reads
    // the mirrors as one sweep.
    studio::ui::RemoteSubmitter submitter;
    QSignalSpy submitted(&submitter, &studio::ui::RemoteSubmitter::sweepSubmitted);
    QSignalSpy failed(&submitter, &studio::ui::RemoteSubmitter::failed);
    const QString mirrors = tmp_.filePath("mirrors");
    studio::RunConfig config = studio::load_config_file(sweep.run.config_file).config;
    config.max_steps = 3;
    config.save_steps = 1000;
    config.eval_steps = 1000;
    SubmitRequest studio_request = sweep.run;
    studio_request.overrides.clear();
    studio_request.run_name = "studio-lr";
    QVERIFY(submitter.submitSweep(config, tmp_.path(), studio_request,
                                  {"learning_rate=2e-3,4e-3"}, false, 1, mirrors));
    QVERIFY(!submitter.submitSweep(config, tmp_.path(), studio_request, {"seed=1,2"}, false, 1,
                                   mirrors));  // one submit at a time
    QTRY_VERIFY_WITH_TIMEOUT(submitted.count() + failed.count() == 1, 120000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.front().front().toString()));
    const QStringList dirs = submitted.front().at(0).toStringList();
    const QString array = submitted.front().at(1).toString();
    auto stop_studio_jobs = qScopeGuard([&] { run_sh(scancel_command(array.toStdString())); });
    QCOMPARE(dirs.size(), 2);
    for (int i = 0; i < 2; ++i) {
      const studio::ui::RunInfo info = studio::ui::readRunInfo(dirs[i]);
      QVERIFY(info.remote);
      QCOMPARE(info.sweep, QString("studio-lr"));
      QCOMPARE(info.sweepPoint, QString(i == 0 ? "00-learning_rate=2e-3" : "01-learning_rate=4e-3"));
      QCOMPARE(info.sweepKeys, QStringList{"learning_rate"});
      QCOMPARE(info.sweepDir, studio::ui::readRunInfo(dirs[0]).sweepDir);
      const RemoteRunRecord record = studio::ui::RemoteMirror(dirs[i]).readRecord();
      QCOMPARE(QString::fromStdString(record.job_id), array + "_" + QString::number(i));
      const auto point_config = studio::load_config_file((dirs[i] + "/config.yaml").toStdString());
      QVERIFY(point_config.ok());
      QCOMPARE(point_config.config.learning_rate, i == 0 ? 2e-3 : 4e-3);
    }
    QTRY_VERIFY_WITH_TIMEOUT(state_of((array + "_1").toStdString()) == JobState::Completed &&
                                 state_of((array + "_0").toStdString()) == JobState::Completed,
                             240000);
#endif
#endif
  }

  // Stop Sweep on a Slurm target: one scancel of the array ends the running task and the
  // pending ones alike (they never start). Through the studio's RemoteRuns::cancelSweep, off
  // the GUI thread, on the points' mirror folders (RemoteMirror::create, as a submit makes
  // them); records of another sweep or array are refused before anything is cancelled.
  void sweepCancelledAsOneArray() {
#ifndef STUDIO_TRAIN_EXE
    QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
#else
    using namespace studio::remote;
    LIVE_HOST(sshd, host);
    const SshSession session = connect_to(host);
    SweepSubmitRequest sweep = demo_sweep(host, "long-sweeps", "long", 100000);
    sweep.axes = {"learning_rate=1e-3,3e-3,1e-2"};
    sweep.parallel = 1;
    const SweepSubmitResult done = submit_sweep(session, sweep);
    auto stop_jobs = qScopeGuard([&] { run_sh(scancel_command(done.job_id)); });
    QCOMPARE(int(done.points.size()), 3);
    QTRY_COMPARE_WITH_TIMEOUT(state_of(done.points[0].job_id), JobState::Running, 60000);

    // Not one sweep's, not one array's, or none: refused, nothing cancelled.
    std::vector<RemoteRunRecord> other_sweep = done.points;
    other_sweep[2].sweep_id = "another";
    std::vector<RemoteRunRecord> other_array = done.points;
    other_array[1].job_id = "999_1";
    std::vector<RemoteRunRecord> plain_run = {done.points[0]};
    plain_run[0].kind = RemoteRunKind::Detached;
    for (const auto& [records, said] :
         {std::pair{other_sweep, std::string("belongs to sweep another")},
          std::pair{other_array, std::string("is Slurm job 999_1, not a task of job array")},
          std::pair{plain_run, std::string("is not a point of a sweep")},
          std::pair{std::vector<RemoteRunRecord>{}, std::string("no point")}}) {
      try {
        cancel_sweep(session, records);
        QFAIL(("cancelled: " + said).c_str());
      } catch (const std::invalid_argument& e) {
        QVERIFY2(std::string(e.what()).find(said) != std::string::npos, e.what());
      }
    }
    QCOMPARE(state_of(done.points[0].job_id), JobState::Running);

#ifdef STUDIO_TEST_UI_REMOTE
    // The studio's mirrors of the three points, as the runs list holds them.
    const QString mirrors = tmp_.filePath("long-mirrors");
    QStringList dirs;
    for (const RemoteRunRecord& point : done.points) {
      SubmitResult mirrored;
      mirrored.record = point;
      mirrored.remote_config =
          read_all(QString::fromStdString(point.run_dir()) + "/config.yaml").toStdString();
      QString why;
      dirs << studio::ui::RemoteMirror::create(mirrors, mirrored, &why);
      QVERIFY2(!dirs.back().isEmpty(), qPrintable(why));
    }
    studio::ui::RemoteRuns runs;
    QSignalSpy cancelled(&runs, &studio::ui::RemoteRuns::cancelFinished);
    QSignalSpy refused(&runs, &studio::ui::RemoteRuns::cancelFailed);
    runs.cancelSweep("the long sweep", dirs);
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.size() + refused.size(), 1, 60000);
    QVERIFY2(refused.isEmpty(), refused.isEmpty() ? "" : qPrintable(refused[0].at(1).toString()));
    QCOMPARE(cancelled[0].at(0).toString(), QString("the long sweep"));
    QCOMPARE(cancelled[0].at(1).toStringList(),
             QStringList{QString("job array %1 (sweep long, 3 points): cancel requested")
                             .arg(QString::fromStdString(done.job_id))});
#else
    QCOMPARE(cancel_sweep(session, done.points),
             std::vector<std::string>{"job array " + done.job_id +
                                      " (sweep long, 3 points): cancel requested"});
#endif
    for (const RemoteRunRecord& point : done.points)
      QTRY_COMPARE_WITH_TIMEOUT(state_of(point.job_id), JobState::Cancelled, 120000);
    // The pending points never started: no engine wrote their folders' status.
    for (int i = 1; i < 3; ++i)
      QVERIFY(!QFile::exists(QString::fromStdString(done.points[static_cast<std::size_t>(i)].run_dir()) +
                             "/output/status.json"));
#endif
  }

  // The command line's sweep on a CPU-only cluster: `studio submit --slurm --gpus-per-node 0
  // --sweep` prints the points' run ids, and `studio cancel --sweep`, given one point's run id,
  // cancels the whole array with one scancel: the running point and the pending ones.
  void sweepCancelledFromTheCommandLine() {
#if !defined(STUDIO_TRAIN_EXE) || !defined(STUDIO_EXE)
    QSKIP("studio or studio-train is not built");
#else
    using namespace studio::remote;
    LIVE_HOST(sshd, host);
    const QString root = tmp_.filePath("cli-sweeps");
    const QStringList connection = sshd.cli_connection(root);
    auto studio = [](const QStringList& args, QByteArray* out, QByteArray* err) {
      QProcess p;
      p.start(QStringLiteral(STUDIO_EXE), args);
      if (!p.waitForFinished(120000)) {
        p.kill();
        p.waitForFinished();
        return -1;
      }
      *out = p.readAllStandardOutput();
      *err = p.readAllStandardError();
      return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    };
    QByteArray out, err;
    const int submitted =
        studio(QStringList{"submit"} << connection << "--engine" << STUDIO_TRAIN_EXE << "--slurm"
                   << "--gpus-per-node" << "0" << "--time" << "10" << "--set"
                   << "max_steps=100000" << "--set" << "save_steps=100000" << "--set"
                   << "eval_steps=100000" << "--name" << "cli" << "--sweep"
                   << "learning_rate=1e-3,3e-3,1e-2" << "--parallel" << "1"
                   << tmp_.filePath("sft.yaml"),
               &out, &err);
    // Cancelled whatever fails below: its tasks would hold the one-CPU node for the tests after.
    const QRegularExpressionMatch said =
        QRegularExpression("as Slurm job array (\\d+) \\(3 tasks\\)").match(QString::fromUtf8(err));
    const std::string array = said.hasMatch() ? said.captured(1).toStdString() : std::string();
    auto stop_jobs = qScopeGuard([&] {
      if (!array.empty()) run_sh(scancel_command(array));
    });
    QCOMPARE(submitted, 0);
    QVERIFY2(said.hasMatch(), err.constData());
    const QStringList ids = QString::fromUtf8(out).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(ids.size(), 3);
    const SshSession session = connect_to(host);
    std::vector<RemoteRunRecord> points;
    for (const QString& id : ids)
      points.push_back(read_remote_record(session, root.toStdString(), id.toStdString()));
    for (std::size_t i = 0; i < points.size(); ++i)
      QCOMPARE(points[i].job_id, array + "_" + std::to_string(i));
    QTRY_COMPARE_WITH_TIMEOUT(state_of(points[0].job_id), JobState::Running, 60000);

    QCOMPARE(studio(QStringList{"cancel"} << connection << "--sweep" << ids[1], &out, &err), 0);
    QCOMPARE(out, QByteArray::fromStdString("job array " + array +
                                            " (sweep cli, 3 points): cancel requested\n"));
    for (const RemoteRunRecord& point : points)
      QTRY_COMPARE_WITH_TIMEOUT(state_of(point.job_id), JobState::Cancelled, 120000);
    for (int i = 1; i < 3; ++i)
      QVERIFY(!QFile::exists(QString::fromStdString(points[static_cast<std::size_t>(i)].run_dir()) +
                             "/output/status.json"));
#endif
  }

  void cleanupTestCase() {
    // Reverse order: slurmd and slurmctld still talk to munged while they stop.
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      (*it)->terminate();
      if (!(*it)->waitForFinished(10000)) {
        (*it)->kill();
        (*it)->waitForFinished();
      }
    }
  }

  void completedJob() {
    std::string id = submit({});
    QVERIFY(!id.empty());
    QTRY_VERIFY_WITH_TIMEOUT(is_terminal(state_of(id)), 30000);
    auto job = poll(id);
    QVERIFY(job.has_value());
    QCOMPARE(job->state, JobState::Completed);

    QString dir = QString::fromStdString(layout_.run_dir);
    QByteArray want;
    for (const char* a : {"train", "config.yaml", "--nproc", "1"}) want.append(a).append('\0');
    QCOMPARE(read_all(dir + "/standin-argv"), want);
    int port = 29500 + static_cast<int>(std::stoll(id) % 10000);
    QCOMPARE(QString::fromUtf8(read_all(dir + "/standin-env")).trimmed(),
             QString("step=0 nnodes=1 nodeid=0 addr=%1 port=%2").arg(node_).arg(port));
    QVERIFY(read_all(dir + "/train.log").contains("standin ran\n"));
  }

  void failedJob() {
    std::string id = submit({"STANDIN_EXIT=3"});
    QVERIFY(!id.empty());
    QTRY_VERIFY_WITH_TIMEOUT(is_terminal(state_of(id)), 30000);
    auto job = poll(id);
    QVERIFY(job.has_value());
    QCOMPARE(job->state, JobState::Failed);
    QCOMPARE(job->reason, std::string("NonZeroExitCode"));
  }

  // Cancelled while the engine runs. The stand-in's first file says its step has started, so
  // scancel meets the running engine, not srun between allocation and launch. Slurm sends
  // SIGTERM, and SIGKILL KillWait (30 s by default) later to whatever still runs, and the job
  // stays COMPLETING until the node reports every process gone: 3 s here when the machine is
  // quiet, 55 s once in CI under the whole suite's load. Hence 120 s, and Slurm's own logs
  // when even that is not enough.
  void cancelledJob() {
    const QString argv_file = QString::fromStdString(layout_.run_dir) + "/standin-argv";
    QFile::remove(argv_file);
    std::string id = submit({"STANDIN_SLEEP=120"});
    QVERIFY(!id.empty());
    QTRY_COMPARE_WITH_TIMEOUT(state_of(id), JobState::Running, 30000);
    QCOMPARE(poll(id)->reason, "on " + node_.toStdString());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(argv_file), 30000);
    ShellRun cancel = run_sh(scancel_command(id));
    QCOMPARE(cancel.exit_code, 0);
    QElapsedTimer waited;
    waited.start();
    JobState state = state_of(id);
    while (state != JobState::Cancelled && waited.elapsed() < 120000) {
      QTest::qWait(500);
      state = state_of(id);
    }
    if (state != JobState::Cancelled) {
      // Qt Test cuts a failure's message at 1 KiB: the logs go out line by line before it.
      for (const QString& line : log_tails().split('\n')) qInfo("%s", qPrintable(line));
    }
    QVERIFY2(state == JobState::Cancelled,
             qPrintable(QString("job %1 is %2 %3 s after scancel (Slurm's logs above)")
                            .arg(QString::fromStdString(id))
                            .arg(studio::remote::job_state_name(state))
                            .arg(waited.elapsed() / 1000)));
  }

  void unknownJobIsNotListed() {
    ShellRun run = run_sh(squeue_command("987654"));
    QVERIFY(run.exit_code != 0);  // "slurm_load_jobs error: Invalid job id specified"
    QVERIFY(!parse_squeue(run.out, "987654").has_value());
  }

  void sacctWithoutAccounting() {
    ShellRun run = run_sh(sacct_command("1"));
    QVERIFY(run.exit_code != 0);
    QVERIFY2(run.err.contains("accounting storage is disabled"), run.err.constData());
    QVERIFY(!parse_sacct(run.out, "1").has_value());
  }

  void engineRunSubmittedOverSsh() {
#ifndef STUDIO_TRAIN_EXE
    QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
#else
    using namespace studio::remote;
    LIVE_HOST(sshd, host);
    auto connect = [&] { return connect_to(host); };

    SubmitRequest request =
        demo_request(host, "runs", {"max_steps=6", "save_steps=1000", "eval_steps=1000"});
    const SshSession session = connect();
    const SubmitResult done = submit_run(session, request);
    QCOMPARE(done.record.kind, RemoteRunKind::Slurm);
    QVERIFY(!done.record.job_id.empty());
    FollowCursor cursor;
    std::string events;
    FollowCallbacks callbacks;
    callbacks.on_events = [&](const std::string& bytes) { events += bytes; };
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(300);
    std::atomic<bool> stop{false};
    const auto end = follow_run(connect, done.record, cursor, callbacks, options, stop);
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    const QString run_dir = QString::fromStdString(done.record.run_dir());
    QCOMPARE(QByteArray::fromStdString(events), read_all(run_dir + "/output/events.jsonl"));
    QVERIFY(events.find("\"step\":6,") != std::string::npos);
    QCOMPARE(state_of(done.record.job_id), JobState::Completed);

    // LLaMA-Factory as the trainer of the job: supervise under srun, FORCE_TORCHRUN, its
    // trainer_log.jsonl followed to the end.
    SubmitRequest lf = request;
    lf.llamafactory_cli = STUDIO_LLAMAFACTORY_CLI;
    const SubmitResult lf_done = submit_run(session, lf);
    FollowCursor lf_cursor;
    std::string lf_events;
    callbacks.on_events = [&](const std::string& bytes) { lf_events += bytes; };
    const auto lf_end = follow_run(connect, lf_done.record, lf_cursor, callbacks, options, stop);
    QVERIFY(lf_end.has_value());
    const QString lf_dir = QString::fromStdString(lf_done.record.run_dir());
    // QTest cuts a message at about 1,000 bytes: the state and its reason first, then the end of
    // LLaMA-Factory's log.
    QVERIFY2(to_string(lf_end->state) == std::string("finished"),
             qPrintable(QString("%1: %2\n...%3")
                            .arg(to_string(lf_end->state), QString::fromStdString(lf_end->reason),
                                 QString::fromUtf8(read_all(lf_dir + "/train.log").right(600)))));
    QCOMPARE(QByteArray::fromStdString(lf_events), read_all(lf_dir + "/output/trainer_log.jsonl"));
    QVERIFY(lf_events.find("\"current_steps\": 6,") != std::string::npos);
    QCOMPARE(state_of(lf_done.record.job_id), JobState::Completed);
    callbacks.on_events = [&](const std::string& bytes) { events += bytes; };

    request.overrides = {"max_steps=100000"};
    const SubmitResult long_run = submit_run(session, request);
    // A failed check returns at once: the endless job must not outlive the test.
    auto stop_job = qScopeGuard([&] { run_sh(scancel_command(long_run.record.job_id)); });
    QTRY_COMPARE_WITH_TIMEOUT(to_string(query_status(session, long_run.record).state),
                              "running", 120000);
    const auto lines = cancel_run(session, long_run.record);
    QCOMPARE(lines.front(), "job " + long_run.record.job_id + ": cancel requested");
    QTRY_COMPARE_WITH_TIMEOUT(to_string(query_status(session, long_run.record).state),
                              "stopped", 60000);
#endif
  }

  // A job that Slurm requeues continues where it was, and the studio follows it as one run:
  // first the batch script gets the time-limit warning (sent here with `scancel --batch
  // --signal=USR1`, which is what --signal=B:USR1@300 makes Slurm do before the limit): the
  // engine writes a checkpoint of its last step and the script requeues the job; then an
  // operator's `scontrol requeue` (as a preemption does: SIGTERM to the job, with save_on_stop a
  // checkpoint). Each time the next run resumes from that checkpoint (SLURM_RESTART_COUNT),
  // every step is done exactly once, the losses are those of a run never interrupted, and the
  // follower sees the job queued again, never ended, until it completes.
  void engineRunRequeued() {
#ifndef STUDIO_TRAIN_EXE
    QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
#else
    using namespace studio::remote;
    LIVE_HOST(sshd, host);
    auto connect = [&] { return connect_to(host); };
    const QStringList keys{"max_steps=40", "save_steps=1000", "eval_steps=1000",
                           "save_on_stop=true"};

    SubmitRequest request = demo_request(host, "requeued", keys);
    const SshSession session = connect();
    const SubmitResult done = submit_run(session, request);
    const std::string id = done.record.job_id;
    auto stop_job = qScopeGuard([&] { run_sh(scancel_command(id)); });
    const QString run_dir = QString::fromStdString(done.record.run_dir());
    QVERIFY(read_all(run_dir + "/job.sbatch")
                .contains("#SBATCH --signal=B:USR1@300"));

    // The follower, as the studio runs it, in a thread of its own.
    std::mutex mu;
    std::vector<std::string> states;
    std::string followed;
    std::optional<RemoteRunStatus> end;
    std::atomic<bool> stop{false};
    std::thread follower([&] {
      FollowCursor cursor;
      FollowCallbacks callbacks;
      callbacks.on_events = [&](const std::string& bytes) {
        std::lock_guard<std::mutex> lock(mu);
        followed += bytes;
      };
      callbacks.on_status = [&](const RemoteRunStatus& st) {
        std::lock_guard<std::mutex> lock(mu);
        const std::string name = to_string(st.state);
        if (states.empty() || states.back() != name) states.push_back(name);
      };
      FollowOptions options;
      options.poll_interval = std::chrono::milliseconds(200);
      try {
        end = follow_run(connect, done.record, cursor, callbacks, options, stop);
      } catch (const std::exception& e) {
        qWarning("follow_run: %s", e.what());
      }
    });
    auto join = qScopeGuard([&] {
      stop = true;
      follower.join();
    });
    const QString events_file = run_dir + "/output/events.jsonl";
    // The highest step in events.jsonl (-1 before the first).
    auto last_step = [&] {
      int last = -1;
      for (const QByteArray& line : read_all(events_file).split('\n')) {
        const auto j = QJsonDocument::fromJson(line).object();
        if (j["event"].toString() == "step") last = std::max(last, j["step"].toInt());
      }
      return last;
    };
    // Slurm holds a requeued job back for a while (BeginTime, 2 minutes here); the test lets it
    // start sooner, as an operator may: once the node is idle again, and 3 s after the requeue
    // (slurmd refuses a job whose credential is not newer, to the second, than its revocation
    // by the requeue: "Job credential revoked").
    std::vector<int> stopped_at;  // the last step done before each requeue
    auto start_now = [&] {
      QTRY_COMPARE_WITH_TIMEOUT(state_of(id), JobState::Pending, 60000);
      QTRY_COMPARE_WITH_TIMEOUT(node_state(), QString("idle"), 60000);
      QTest::qWait(3000);
      stopped_at.push_back(last_step());
      ShellRun update = run_sh("scontrol update JobId=" + id + " StartTime=now");
      QVERIFY2(update.exit_code == 0, update.err.constData());
    };
    QTRY_VERIFY_WITH_TIMEOUT(last_step() >= 5, 120000);
    ShellRun sig = run_sh("scancel --batch --signal=USR1 " + id);
    QVERIFY2(sig.exit_code == 0, sig.err.constData());
    // Requeued by its own script, started again, past its checkpoint.
    start_now();
    QTRY_VERIFY_WITH_TIMEOUT(read_all(events_file).contains("SLURM_RESTART_COUNT=1"), 120000);
    QCOMPARE(int(stopped_at.size()), 1);
    QTRY_VERIFY_WITH_TIMEOUT(last_step() >= stopped_at[0] + 5, 120000);
    ShellRun requeue = run_sh("scontrol requeue " + id);
    QVERIFY2(requeue.exit_code == 0, requeue.err.constData());
    start_now();
    QTRY_VERIFY_WITH_TIMEOUT(read_all(events_file).contains("SLURM_RESTART_COUNT=2"), 120000);
    QTRY_VERIFY_WITH_TIMEOUT(end.has_value() || !follower.joinable(), 240000);
    {
      std::lock_guard<std::mutex> lock(mu);
      QVERIFY(end.has_value());
    }
    QCOMPARE(to_string(end->state), "finished");
    QCOMPARE(state_of(id), JobState::Completed);

    // One run across three jobs' worth of starts: the restarts, with their checkpoints, and
    // every step once, in order.
    const QByteArray all = read_all(events_file);
    QCOMPARE(QByteArray::fromStdString(followed), all);
    std::vector<int> steps;
    std::vector<double> losses;
    std::vector<QJsonObject> restarts;
    int starts = 0;
    for (const QByteArray& line : all.split('\n')) {
      const auto j = QJsonDocument::fromJson(line).object();
      const QString kind = j["event"].toString();
      if (kind == "start") ++starts;
      if (kind == "restart") restarts.push_back(j);
      if (kind == "step") {
        steps.push_back(j["step"].toInt());
        losses.push_back(j["loss"].toDouble());
      }
    }
    QCOMPARE(starts, 3);
    QCOMPARE(int(restarts.size()), 2);
    for (int k = 0; k < 2; ++k) {
      const QString reason = restarts[k]["reason"].toString();
      QVERIFY2(reason == QString("Slurm requeued job %1 (SLURM_RESTART_COUNT=%2)")
                             .arg(QString::fromStdString(id))
                             .arg(k + 1),
               qPrintable(reason));
      const int at = restarts[k]["step"].toInt();
      QVERIFY2(at > 0, qPrintable(reason));
      QCOMPARE(restarts[k]["resume_from"].toString(),
               run_dir + "/output/checkpoint-" + QString::number(at));
    }
    // The time-limit warning and the operator's requeue (SIGTERM, with save_on_stop) each left a
    // checkpoint of the last step done.
    QCOMPARE(int(stopped_at.size()), 2);
    QCOMPARE(restarts[0]["step"].toInt(), stopped_at[0]);
    QCOMPARE(restarts[1]["step"].toInt(), stopped_at[1]);
    std::vector<int> want(40);
    std::iota(want.begin(), want.end(), 1);
    QCOMPARE(steps, want);
    {
      std::lock_guard<std::mutex> lock(mu);
      // Running, queued again (never stopped or failed), running, ..., finished.
      const auto queued = std::count(states.begin(), states.end(), "queued");
      QVERIFY2(queued >= 2, qPrintable(QString::fromStdString(
                                 std::accumulate(states.begin(), states.end(), std::string(),
                                                 [](std::string a, const std::string& b) {
                                                   return a + b + " ";
                                                 }))));
      for (const std::string& st : states)
        QVERIFY2(st != "stopped" && st != "failed" && st != "lost", st.c_str());
    }

    // The same 40 steps never interrupted, on this machine: the same losses.
    QProcess plain;
    QStringList args{"train", tmp_.filePath("sft.yaml")};
    for (const QString& k : keys) args << "--set" << k;
    args << "--set" << "output_dir=" + tmp_.filePath("uninterrupted");
    plain.start(STUDIO_TRAIN_EXE, args);
    QVERIFY(plain.waitForFinished(300000));
    QVERIFY2(plain.exitCode() == 0, plain.readAllStandardError().right(2000).constData());
    std::vector<double> want_losses;
    for (const QByteArray& line : read_all(tmp_.filePath("uninterrupted/events.jsonl")).split('\n')) {
      const auto j = QJsonDocument::fromJson(line).object();
      if (j["event"].toString() == "step") want_losses.push_back(j["loss"].toDouble());
    }
    QCOMPARE(want_losses.size(), losses.size());
    for (size_t k = 0; k < losses.size(); ++k)
      QVERIFY2(std::abs(losses[k] - want_losses[k]) <= 1e-6 * std::max(1.0, std::abs(want_losses[k])),
               qPrintable(QString("step %1: %2 against %3").arg(k + 1).arg(losses[k]).arg(want_losses[k])));
#endif
  }
};

QTEST_MAIN(TestSlurmLive)
#include "tst_slurm_live.moc"
