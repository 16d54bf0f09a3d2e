// sbatch_script and the Slurm command lines: literal expected scripts, `bash -n` on each, and
// the script run by bash with stand-ins for scontrol and srun to see what the engine would get.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <stdexcept>
#include <string>

#include "studio/remote/slurm_script.h"
#include "studio/runs/remote_record.h"

using studio::remote::is_valid_slurm_time;
using studio::remote::RemoteRunLayout;
using studio::remote::sacct_command;
using studio::remote::sbatch_script;
using studio::remote::sbatch_array_submit_command;
using studio::remote::sbatch_submit_command;
using studio::remote::SbatchOptions;
using studio::remote::scancel_command;
using studio::remote::squeue_command;

namespace {

SbatchOptions full_options() {
  SbatchOptions o;
  o.job_name = "sp-run_7";
  o.nodes = 2;
  o.gpus_per_node = 4;
  o.partition = "gpu,gpu-long";
  o.time = "1-12:00:00";
  o.account = "proj-42";
  o.cpus_per_task = 32;
  o.master_port = 29511;
  o.extra_directives = {"--exclusive", "--mail-type=END"};
  o.requeue = false;
  o.checkpoint_before_end_s = 0;
  return o;
}

const std::string kNastyEngine = "/opt/my tools/it's $HOME/studio-train";

bool write_file(const QString& path, const std::string& text, bool executable = false) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return false;
  file.write(text.data(), static_cast<qint64>(text.size()));
  file.close();
  return !executable ||
         file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
}

}  // namespace

class TestSlurmScript : public QObject {
  Q_OBJECT

 private slots:
  void literalScripts_data() {
    QTest::addColumn<bool>("full");
    QTest::addColumn<QString>("expected");
    QTest::newRow("defaults") << false
                              << "#!/bin/bash\n"
                                 "#SBATCH --job-name=studio-train\n"
                                 "#SBATCH --nodes=1\n"
                                 "#SBATCH --ntasks-per-node=1\n"
                                 "#SBATCH --gpus-per-node=1\n"
                                 "#SBATCH --requeue\n"
                                 "#SBATCH --signal=B:USR1@300\n"
                                 "# Written by SeqStudio: one engine launcher per node, started "
                                 "by srun.\n"
                                 "set -euo pipefail\n"
                                 "umask 077\n"
                                 "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
                                 "| head -n 1)\n"
                                 "export MASTER_ADDR\n"
                                 "export MASTER_PORT=$((29500 + SLURM_JOB_ID % 10000))\n"
                                 "step=\n"
                                 "checkpointed=0\n"
                                 "on_time_limit() {\n"
                                 "  checkpointed=1\n"
                                 "  echo \"SeqStudio: job $SLURM_JOB_ID is near its time limit "
                                 "(SIGUSR1): writing a checkpoint, then requeueing the job\" >&2\n"
                                 "  if [ -n \"$step\" ]; then kill -USR1 \"$step\" 2>/dev/null "
                                 "|| true; fi\n"
                                 "}\n"
                                 "trap on_time_limit USR1\n"
                                 "srun --ntasks-per-node=1 --kill-on-bad-exit=1 "
                                 "studio-train train config.yaml --nproc 1 &\n"
                                 "step=$!\n"
                                 "set +e\n"
                                 "while :; do\n"
                                 "  wait \"$step\"\n"
                                 "  status=$?\n"
                                 "  kill -0 \"$step\" 2>/dev/null || break\n"
                                 "done\n"
                                 "if [ \"$checkpointed\" = 1 ]; then\n"
                                 "  echo \"SeqStudio: requeueing job $SLURM_JOB_ID (the engine "
                                 "stopped with status $status)\" >&2\n"
                                 "  scontrol requeue \"$SLURM_JOB_ID\"\n"
                                 "fi\n"
                                 "exit \"$status\"\n";
    QTest::newRow("everything") << true
                                << "#!/bin/bash\n"
                                   "#SBATCH --job-name=sp-run_7\n"
                                   "#SBATCH --nodes=2\n"
                                   "#SBATCH --ntasks-per-node=1\n"
                                   "#SBATCH --gpus-per-node=4\n"
                                   "#SBATCH --cpus-per-task=32\n"
                                   "#SBATCH --partition=gpu,gpu-long\n"
                                   "#SBATCH --time=1-12:00:00\n"
                                   "#SBATCH --account=proj-42\n"
                                   "#SBATCH --no-requeue\n"
                                   "#SBATCH --exclusive\n"
                                   "#SBATCH --mail-type=END\n"
                                   "# Written by SeqStudio: one engine launcher per node, started "
                                   "by srun.\n"
                                   "set -euo pipefail\n"
                                   "umask 077\n"
                                   "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
                                   "| head -n 1)\n"
                                   "export MASTER_ADDR\n"
                                   "export MASTER_PORT=29511\n"
                                   "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 "
                                   "--cpus-per-task=32 '/opt/my tools/it'\\''s $HOME/studio-train' train "
                                   "'run config.yaml' --nproc 4\n";
  }
  void literalScripts() {
    QFETCH(bool, full);
    QFETCH(QString, expected);
    std::string script = full ? sbatch_script(full_options(), kNastyEngine, "run config.yaml")
                              : sbatch_script(SbatchOptions{}, "studio-train", "config.yaml");
    QCOMPARE(QString::fromStdString(script), expected);

    QTemporaryDir tmp;
    QVERIFY(write_file(tmp.filePath("job.sbatch"), script));
    QProcess bash;
    bash.start("bash", {"-n", tmp.filePath("job.sbatch")});
    QVERIFY(bash.waitForFinished(10000));
    QVERIFY2(bash.exitCode() == 0, bash.readAllStandardError().constData());
  }

  void cpuOnlyRunsOneWorker() {
    SbatchOptions o;
    o.gpus_per_node = 0;
    std::string script = sbatch_script(o, "studio-train", "config.yaml");
    QVERIFY(script.find("--gpus-per-node") == std::string::npos);
    QVERIFY(script.find("--nproc 1 &\n") != std::string::npos);
  }

  // The script under bash with scontrol and srun replaced: what reaches the engine's launcher.
  void scriptEnvironment() {
    QTemporaryDir tmp;
    QString bin = tmp.filePath("bin");
    QVERIFY(QDir().mkpath(bin));
    QVERIFY(write_file(bin + "/scontrol",
                       "#!/bin/sh\n[ \"$1 $2 $3\" = \"show hostnames n[7-8]\" ] || exit 3\n"
                       "printf 'n7\\nn8\\n'\n",
                       true));
    QVERIFY(write_file(bin + "/srun",
                       "#!/bin/sh\nprintf '%s\\000' \"$@\" > srun-argv\n"
                       "printf '%s|%s\\n' \"$MASTER_ADDR\" \"$MASTER_PORT\" > srun-env\n",
                       true));
    SbatchOptions o = full_options();
    o.master_port = 0;
    QVERIFY(write_file(tmp.filePath("job.sbatch"),
                       sbatch_script(o, kNastyEngine, "run config.yaml")));
    QProcess bash;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("PATH", bin + ":" + env.value("PATH"));
    env.insert("SLURM_JOB_NODELIST", "n[7-8]");
    env.insert("SLURM_JOB_ID", "123456");
    bash.setProcessEnvironment(env);
    bash.setWorkingDirectory(tmp.path());
    bash.start("bash", {tmp.filePath("job.sbatch")});
    QVERIFY(bash.waitForFinished(10000));
    QVERIFY2(bash.exitCode() == 0, bash.readAllStandardError().constData());
    QFile envFile(tmp.filePath("srun-env"));
    QVERIFY(envFile.open(QIODevice::ReadOnly));
    QCOMPARE(envFile.readAll(), QByteArray("n7|32956\n"));  // 29500 + 123456 % 10000
    QFile argvFile(tmp.filePath("srun-argv"));
    QVERIFY(argvFile.open(QIODevice::ReadOnly));
    QByteArray want;
    for (const char* a : {"--ntasks-per-node=1", "--kill-on-bad-exit=1", "--cpus-per-task=32",
                          kNastyEngine.c_str(),
                          "train", "run config.yaml", "--nproc", "4"}) {
      want.append(a).append('\0');
    }
    QCOMPARE(argvFile.readAll(), want);
  }

  // The time-limit path under bash, with srun and scontrol replaced: Slurm's SIGUSR1 to the batch
  // shell reaches srun (which passes it on to the engine's launchers), the script waits for srun
  // to end, then requeues the job (or, with --no-requeue, only ends), and exits with srun's
  // status. LLaMA-Factory jobs get neither the signal nor the requeue.
  void timeLimitSignal_data() {
    QTest::addColumn<bool>("requeue");
    QTest::addColumn<bool>("llamafactory");
    QTest::newRow("checkpoint, then requeue") << true << false;
    QTest::newRow("checkpoint, --no-requeue") << false << false;
    QTest::newRow("LLaMA-Factory: none of it") << true << true;
  }
  void timeLimitSignal() {
    QFETCH(bool, requeue);
    QFETCH(bool, llamafactory);
    QTemporaryDir tmp;
    QString bin = tmp.filePath("bin");
    QVERIFY(QDir().mkpath(bin));
    QVERIFY(write_file(bin + "/scontrol",
                       "#!/bin/sh\nif [ \"$1\" = show ]; then echo n1; exit 0; fi\n"
                       "printf '%s\\n' \"$*\" >> scontrol-calls\n",
                       true));
    // srun: ready once its trap is set; SIGUSR1 ends it with the engine's "stopped" status.
    QVERIFY(write_file(bin + "/srun",
                       "#!/bin/bash\ntrap 'echo USR1 > srun-got; exit 130' USR1\n"
                       "touch srun-ready\nfor i in $(seq 600); do sleep 0.05; done\nexit 9\n",
                       true));
    SbatchOptions o;
    o.requeue = requeue;
    if (llamafactory) o.llamafactory_cli = "llamafactory-cli";
    const std::string script = sbatch_script(o, "studio-train", "config.yaml");
    QCOMPARE(script.find("--signal=B:USR1@300") != std::string::npos, !llamafactory);
    QCOMPARE(script.find("#SBATCH --requeue") != std::string::npos, requeue && !llamafactory);
    QCOMPARE(script.find("#SBATCH --no-requeue") != std::string::npos, !requeue);
    QVERIFY(write_file(tmp.filePath("job.sbatch"), script));
    QProcess bash;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("PATH", bin + ":" + env.value("PATH"));
    env.insert("SLURM_JOB_NODELIST", "n1");
    env.insert("SLURM_JOB_ID", "4242");
    bash.setProcessEnvironment(env);
    bash.setWorkingDirectory(tmp.path());
    bash.start("bash", {tmp.filePath("job.sbatch")});
    QVERIFY(bash.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(tmp.filePath("srun-ready")), 10000);
    ::kill(static_cast<pid_t>(bash.processId()), SIGUSR1);  // what Slurm's --signal=B: does
    QVERIFY(bash.waitForFinished(20000));
    const QByteArray err = bash.readAllStandardError();
    if (llamafactory) {
      // exec srun: the signal went to srun itself, no requeue.
      QCOMPARE(bash.exitCode(), 130);
      QVERIFY(!QFile::exists(tmp.filePath("scontrol-calls")));
      return;
    }
    QVERIFY2(bash.exitStatus() == QProcess::NormalExit && bash.exitCode() == 130, err.constData());
    QFile got(tmp.filePath("srun-got"));
    QVERIFY(got.open(QIODevice::ReadOnly));
    QCOMPARE(got.readAll(), QByteArray("USR1\n"));
    QVERIFY2(err.contains("job 4242 is near its time limit (SIGUSR1): writing a checkpoint"),
             err.constData());
    QFile calls(tmp.filePath("scontrol-calls"));
    if (requeue) {
      QVERIFY(calls.open(QIODevice::ReadOnly));
      QCOMPARE(calls.readAll(), QByteArray("requeue 4242\n"));
      QVERIFY(err.contains("requeueing job 4242 (the engine stopped with status 130)"));
    } else {
      QVERIFY(!calls.exists());
    }
  }

  void rejectsBadOptions_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("message");
    QTest::newRow("name with newline") << "job_name" << "a\nb" << "newlines";
    QTest::newRow("name with space") << "job_name" << "a b" << "whitespace";
    QTest::newRow("name with #") << "job_name" << "a#b" << "'#'";
    QTest::newRow("empty name") << "job_name" << "" << "must not be empty";
    QTest::newRow("time words") << "time" << "2 hours" << "D-HH:MM:SS";
    QTest::newRow("time colon") << "time" << "1:2:3:4" << "D-HH:MM:SS";
    QTest::newRow("time dash only") << "time" << "1-" << "D-HH:MM:SS";
    QTest::newRow("partition") << "partition" << "gpu;rm" << "letters, digits";
    QTest::newRow("account") << "account" << "a b" << "letters, digits";
    QTest::newRow("directive") << "extra" << "exclusive" << "sbatch option";
    QTest::newRow("directive newline") << "extra" << "--a\n--b" << "newlines";
  }
  void rejectsBadOptions() {
    QFETCH(QString, field);
    QFETCH(QString, value);
    QFETCH(QString, message);
    SbatchOptions o;
    std::string v = value.toStdString();
    if (field == "job_name") o.job_name = v;
    if (field == "time") o.time = v;
    if (field == "partition") o.partition = v;
    if (field == "account") o.account = v;
    if (field == "extra") o.extra_directives = {v};
    try {
      sbatch_script(o, "studio-train", "config.yaml");
      QFAIL("accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
    }
  }

  void rejectsBadCounts() {
    SbatchOptions o;
    o.nodes = 0;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.validate());
    o = SbatchOptions{};
    o.gpus_per_node = -1;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.validate());
    o = SbatchOptions{};
    o.master_port = 65536;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.validate());
    o = SbatchOptions{};
    o.checkpoint_before_end_s = -1;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.validate());
    o.checkpoint_before_end_s = 65536;  // sbatch's own bound
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, o.validate());
  }

  void slurmTimes_data() {
    QTest::addColumn<QString>("time");
    QTest::addColumn<bool>("valid");
    for (const char* t : {"30", "30:00", "12:30:00", "2-0", "2-12", "2-12:30", "2-12:30:00",
                          "UNLIMITED", "infinite"}) {
      QTest::newRow(t) << t << true;
    }
    for (const char* t : {"", "1h", "-5", "1:2:3:4", "1-2:3:4:5", ":30", "1- 2", "forever"}) {
      QTest::newRow(qPrintable(QString("bad '%1'").arg(t))) << t << false;
    }
  }
  void slurmTimes() {
    QFETCH(QString, time);
    QFETCH(bool, valid);
    QCOMPARE(is_valid_slurm_time(time.toStdString()), valid);
  }

  void commands() {
    QCOMPARE(squeue_command("123"),
             std::string("squeue -h -r -t all -j 123 -o '%i|%T|%M|%R'"));
    QCOMPARE(sacct_command("123_4"),
             std::string("sacct -n -P -j 123_4 --format=JobID,State,ExitCode,Elapsed"));
    QCOMPARE(scancel_command("9"), std::string("scancel 9"));
    for (const char* bad : {"", "12;rm", "-1", "12 13", "abc"}) {
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, scancel_command(bad));
    }
    RemoteRunLayout layout;
    layout.run_dir = "/runs/a b";
    layout.log_file = "train%j.log";
    QCOMPARE(sbatch_submit_command(layout, "job.sbatch"),
             std::string("umask 077 && cd '/runs/a b' && exec sbatch --parsable --output=train%%j.log "
                         "--open-mode=append job.sbatch"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sbatch_submit_command(layout, "-x"));
    QCOMPARE(sbatch_array_submit_command("/runs/lr sweep", "lr-1-", 3, "job.sbatch"),
             std::string("umask 077 && cd '/runs/lr sweep' && exec sbatch --parsable "
                         "--output=../lr-1-%3a/train.log --open-mode=append job.sbatch"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             sbatch_array_submit_command("/runs", "a/b-", 2, "job.sbatch"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             sbatch_array_submit_command("/runs", "a%j-", 2, "job.sbatch"));
  }

  // A sweep's job array: the --array line (with its throttle), and each task, run by bash with
  // stand-ins, enters its own point's folder (../PREFIX + zero-padded index) and trains it there
  // with its own MASTER_PORT (each task has its own SLURM_JOB_ID).
  void arrayTasks_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("parallel");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("task");
    QTest::addColumn<QString>("array");
    QTest::addColumn<QString>("folder");
    QTest::newRow("3 points, 2 at once, task 0") << 3 << 2 << 2 << 0 << "--array=0-2%2" << "sw-00";
    QTest::newRow("3 points, no limit, task 2") << 3 << 0 << 2 << 2 << "--array=0-2" << "sw-02";
    QTest::newRow("150 points, task 7") << 150 << 10 << 3 << 7 << "--array=0-149%10" << "sw-007";
    QTest::newRow("1001 points, task 1000") << 1001 << 0 << 4 << 1000 << "--array=0-1000" << "sw-1000";
  }
  void arrayTasks() {
    QFETCH(int, size);
    QFETCH(int, parallel);
    QFETCH(int, width);
    QFETCH(int, task);
    QFETCH(QString, array);
    QFETCH(QString, folder);
    QCOMPARE(QString::fromStdString(studio::remote::array_task_dir("sw-", width, task)), folder);
    SbatchOptions o;
    o.gpus_per_node = 2;
    o.array_size = size;
    o.array_parallel = parallel;
    o.array_dir_prefix = "sw-";
    o.array_index_width = width;
    const std::string script = sbatch_script(o, "studio-train", "config.yaml");
    QVERIFY2(script.find("#SBATCH " + array.toStdString() + "\n") != std::string::npos, script.c_str());
    QTemporaryDir tmp;
    const QString bin = tmp.filePath("bin");
    QVERIFY(QDir().mkpath(bin));
    QVERIFY(QDir().mkpath(tmp.filePath("sweep")));
    QVERIFY(QDir().mkpath(tmp.filePath(folder)));
    QVERIFY(QDir().mkpath(tmp.filePath("sw-01")));  // a neighbour the task must not enter
    QVERIFY(write_file(bin + "/scontrol", "#!/bin/sh\nprintf 'n1\\n'\n", true));
    QVERIFY(write_file(bin + "/srun",
                       "#!/bin/sh\nprintf '%s\\000' \"$@\" > srun-argv\n"
                       "printf '%s|%s\\n' \"$(basename \"$PWD\")\" \"$MASTER_PORT\" > srun-env\n",
                       true));
    QVERIFY(write_file(tmp.filePath("sweep/job.sbatch"), script));
    QProcess bash;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("PATH", bin + ":" + env.value("PATH"));
    env.insert("SLURM_JOB_NODELIST", "n1");
    env.insert("SLURM_JOB_ID", QString::number(4000 + task));
    env.insert("SLURM_ARRAY_JOB_ID", "4000");
    env.insert("SLURM_ARRAY_TASK_ID", QString::number(task));
    bash.setProcessEnvironment(env);
    bash.setWorkingDirectory(tmp.filePath("sweep"));
    bash.start("bash", {tmp.filePath("sweep/job.sbatch")});
    QVERIFY(bash.waitForFinished(10000));
    QVERIFY2(bash.exitCode() == 0, bash.readAllStandardError().constData());
    QFile envFile(tmp.filePath(folder + "/srun-env"));
    QVERIFY2(envFile.open(QIODevice::ReadOnly), qPrintable(folder + " was not entered"));
    QCOMPARE(QString::fromUtf8(envFile.readAll()),
             QString("%1|%2\n").arg(folder).arg(29500 + (4000 + task) % 10000));
    QFile argvFile(tmp.filePath(folder + "/srun-argv"));
    QVERIFY(argvFile.open(QIODevice::ReadOnly));
    QVERIFY(argvFile.readAll().contains(QByteArray("train\0config.yaml\0--nproc\0" "2\0", 28)));
  }

  // A sweep point's record: its sweep and point go to studio-remote.json and back; a sweep
  // folder name that is not a run folder name is refused, naming the key.
  void sweepPointRecord() {
    studio::RemoteRunRecord r;
    r.run_id = "lr-20261204-223000-ab12-01";
    r.kind = studio::RemoteRunKind::Slurm;
    r.job_id = "77_1";
    r.sweep_id = "lr-20261204-223000-ab12";
    r.sweep_point = "01-learning_rate=3e-3";
    const auto back = studio::RemoteRunRecord::from_json(r.to_json(), "t");
    QCOMPARE(back.sweep_id, r.sweep_id);
    QCOMPARE(back.sweep_point, r.sweep_point);
    QCOMPARE(back.job_id, std::string("77_1"));
    studio::RemoteRunRecord single = r;
    single.sweep_id.clear();
    QVERIFY(single.to_json().find("sweep") == std::string::npos);
    QVERIFY(studio::RemoteRunRecord::from_json(single.to_json(), "t").sweep_id.empty());
    std::string bad = r.to_json();
    bad.replace(bad.find("\"lr-20261204-223000-ab12\""), 25, "\"../x\"");
    try {
      studio::RemoteRunRecord::from_json(bad, "host:rec.json");
      QFAIL("accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains("host:rec.json: run record key 'sweep_id'"), e.what());
    }
  }

  void rejectsBadArrays_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("parallel");
    QTest::addColumn<QString>("prefix");
    QTest::addColumn<int>("width");
    QTest::addColumn<QString>("message");
    QTest::newRow("negative size") << -1 << 0 << "sw-" << 2 << "array_size '-1'";
    QTest::newRow("over MaxArraySize") << 1002 << 0 << "sw-" << 2 << "MaxArraySize";
    QTest::newRow("negative parallel") << 4 << -2 << "sw-" << 2 << "array_parallel '-2'";
    QTest::newRow("prefix with a slash") << 4 << 0 << "../sw-" << 2 << "array_dir_prefix";
    QTest::newRow("prefix with a quote") << 4 << 0 << "sw'-" << 2 << "array_dir_prefix";
    QTest::newRow("empty prefix") << 4 << 0 << "" << 2 << "array_dir_prefix";
    QTest::newRow("width 0") << 4 << 0 << "sw-" << 0 << "array_index_width";
  }
  void rejectsBadArrays() {
    QFETCH(int, size);
    QFETCH(int, parallel);
    QFETCH(QString, prefix);
    QFETCH(int, width);
    QFETCH(QString, message);
    SbatchOptions o;
    o.array_size = size;
    o.array_parallel = parallel;
    o.array_dir_prefix = prefix.toStdString();
    o.array_index_width = width;
    try {
      o.validate();
      QFAIL("accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
    }
  }
};

QTEST_MAIN(TestSlurmScript)
#include "tst_slurm_script.moc"
