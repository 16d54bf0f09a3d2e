// parse_sbatch_output, parse_squeue and parse_sacct against outputs recorded in
// tests/remote/data/ (hand-written in the exact format the Slurm 22.05 tools print for the
// commands slurm_script.h builds).
#include <QFile>
#include <QtTest>

#include <stdexcept>
#include <string>

#include "studio/remote/slurm_state.h"

using studio::remote::is_terminal;
using studio::remote::job_state_from;
using studio::remote::job_state_name;
using studio::remote::JobState;
using studio::remote::parse_sacct;
using studio::remote::parse_sbatch_output;
using studio::remote::parse_squeue;

namespace {

std::string recorded(const QString& name) {
  QFile file(QStringLiteral(STUDIO_SOURCE_DIR "/tests/remote/data/") + name);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read recorded output %s", qPrintable(name));
  return file.readAll().toStdString();
}

}  // namespace

class TestSlurmState : public QObject {
  Q_OBJECT

 private slots:
  void stateWords_data() {
    QTest::addColumn<QString>("word");
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("terminal");
    QTest::newRow("PENDING") << "PENDING" << "pending" << false;
    QTest::newRow("PD") << "PD" << "pending" << false;
    QTest::newRow("RUNNING") << "RUNNING" << "running" << false;
    QTest::newRow("R") << "R" << "running" << false;
    QTest::newRow("COMPLETING") << "COMPLETING" << "completing" << false;
    QTest::newRow("REQUEUED") << "REQUEUED" << "requeued" << false;
    QTest::newRow("COMPLETED") << "COMPLETED" << "completed" << true;
    QTest::newRow("FAILED") << "FAILED" << "failed" << true;
    QTest::newRow("CANCELLED") << "CANCELLED" << "cancelled" << true;
    QTest::newRow("TIMEOUT") << "TIMEOUT" << "timeout" << true;
    QTest::newRow("OUT_OF_MEMORY") << "OUT_OF_MEMORY" << "out_of_memory" << true;
    QTest::newRow("NODE_FAIL") << "NODE_FAIL" << "node_fail" << true;
    QTest::newRow("PREEMPTED") << "PREEMPTED" << "preempted" << true;
    QTest::newRow("lowercase") << "running" << "unknown" << false;
    QTest::newRow("new word") << "STAGE_OUT" << "unknown" << false;
  }
  void stateWords() {
    QFETCH(QString, word);
    QFETCH(QString, name);
    QFETCH(bool, terminal);
    JobState state = job_state_from(word.toStdString());
    QCOMPARE(QString(job_state_name(state)), name);
    QCOMPARE(is_terminal(state), terminal);
  }

  void sbatch_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("id");
    QTest::addColumn<QString>("cluster");
    QTest::newRow("plain") << "sbatch_plain.txt" << "4242" << "";
    QTest::newRow("parsable") << "sbatch_parsable.txt" << "4242" << "";
    QTest::newRow("parsable, cluster") << "sbatch_parsable_cluster.txt" << "4242" << "studio";
  }
  void sbatch() {
    QFETCH(QString, file);
    QFETCH(QString, id);
    QFETCH(QString, cluster);
    auto job = parse_sbatch_output(recorded(file));
    QCOMPARE(QString::fromStdString(job.job_id), id);
    QCOMPARE(QString::fromStdString(job.cluster), cluster);
  }

  void sbatchRejects_data() {
    QTest::addColumn<QString>("output");
    QTest::newRow("empty") << "";
    QTest::newRow("error text") << "sbatch: error: Batch job submission failed: Invalid account\n";
    QTest::newRow("id with text") << "4242 queued\n";
  }
  void sbatchRejects() {
    QFETCH(QString, output);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_sbatch_output(output.toStdString()));
  }

  void sbatchSkipsBanner() {
    auto job = parse_sbatch_output("Welcome to the cluster\r\nSubmitted batch job 17\r\n");
    QCOMPARE(job.job_id, std::string("17"));
  }

  void squeue_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("state");
    QTest::addColumn<QString>("reason");
    QTest::addColumn<QString>("elapsed");
    QTest::newRow("pending") << "squeue_pending.txt" << "pending" << "Resources" << "0:00";
    QTest::newRow("pending, priority") << "squeue_pending_priority.txt" << "pending"
                                       << "Priority" << "0:00";
    QTest::newRow("running") << "squeue_running.txt" << "running" << "on gpu-[01-02]"
                             << "1-02:03:04";
    QTest::newRow("completing") << "squeue_completing.txt" << "completing" << "on gpu-01"
                                << "12:31";
    QTest::newRow("failed") << "squeue_failed.txt" << "failed" << "NonZeroExitCode" << "0:41";
    QTest::newRow("completed") << "squeue_completed.txt" << "completed" << "on gpu-01" << "0:01";
  }
  void squeue() {
    QFETCH(QString, file);
    QFETCH(QString, state);
    QFETCH(QString, reason);
    QFETCH(QString, elapsed);
    auto job = parse_squeue(recorded(file), "4242");
    QVERIFY(job.has_value());
    QCOMPARE(QString::fromStdString(job->job_id), QString("4242"));
    QCOMPARE(QString(job_state_name(job->state)), state);
    QCOMPARE(QString::fromStdString(job->reason), reason);
    QCOMPARE(QString::fromStdString(job->elapsed), elapsed);
  }

  void squeueGone() { QVERIFY(!parse_squeue(recorded("squeue_gone.txt"), "4242").has_value()); }

  void squeueRejects_data() {
    QTest::addColumn<QString>("output");
    QTest::newRow("default format") << "JOBID PARTITION NAME USER ST TIME NODES NODELIST\n";
    QTest::newRow("other job") << "99|RUNNING|0:01|n1\n";
    QTest::newRow("five fields") << "4242|RUNNING|0:01|n1|x\n";
  }
  void squeueRejects() {
    QFETCH(QString, output);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_squeue(output.toStdString(), "4242"));
  }

  void sacct_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("state");
    QTest::addColumn<QString>("reason");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<int>("signal");
    QTest::addColumn<int>("steps");
    QTest::newRow("completed") << "sacct_completed.txt" << "completed" << "" << 0 << 0 << 3;
    QTest::newRow("cancelled") << "sacct_cancelled.txt" << "cancelled"
                               << "cancelled by uid 1000" << 0 << 15 << 3;
    QTest::newRow("oom") << "sacct_oom.txt" << "out_of_memory" << "out of memory" << 0 << 125
                         << 3;
    QTest::newRow("failed") << "sacct_failed.txt" << "failed" << "exit code 3 in step 4242.0"
                            << 1 << 0 << 3;
    QTest::newRow("killed") << "sacct_killed.txt" << "failed" << "signal 9 in step 4242.0" << 0
                            << 9 << 3;
    QTest::newRow("timeout") << "sacct_timeout.txt" << "timeout" << "time limit reached" << 0
                             << 0 << 3;
    QTest::newRow("node fail") << "sacct_node_fail.txt" << "node_fail" << "a node failed" << 1
                               << 0 << 2;
    QTest::newRow("pending") << "sacct_pending.txt" << "pending" << "" << 0 << 0 << 0;
    QTest::newRow("running") << "sacct_running.txt" << "running" << "" << 0 << 0 << 3;
  }
  void sacct() {
    QFETCH(QString, file);
    QFETCH(QString, state);
    QFETCH(QString, reason);
    QFETCH(int, exitCode);
    QFETCH(int, signal);
    QFETCH(int, steps);
    auto job = parse_sacct(recorded(file), "4242");
    QVERIFY(job.has_value());
    QCOMPARE(QString(job_state_name(job->state)), state);
    QCOMPARE(QString::fromStdString(job->reason), reason);
    QCOMPARE(job->exit_code, exitCode);
    QCOMPARE(job->signal, signal);
    QCOMPARE(static_cast<int>(job->steps.size()), steps);
  }

  void sacctSteps() {
    auto job = parse_sacct(recorded("sacct_cancelled.txt"), "4242");
    QVERIFY(job.has_value());
    QCOMPARE(job->state_text, std::string("CANCELLED by 1000"));
    QCOMPARE(job->elapsed, std::string("00:12:31"));
    QCOMPARE(job->steps[0].step_id, std::string("4242.batch"));
    QCOMPARE(job->steps[0].state, JobState::Cancelled);
    QCOMPARE(job->steps[0].signal, 15);
    QCOMPARE(job->steps[1].step_id, std::string("4242.extern"));
    QCOMPARE(job->steps[1].state, JobState::Completed);
    QCOMPARE(job->steps[2].step_id, std::string("4242.0"));
    QCOMPARE(job->steps[2].elapsed, std::string("00:12:30"));
  }

  void sacctUnknown() { QVERIFY(!parse_sacct(recorded("sacct_unknown.txt"), "4242").has_value()); }

  void sacctRejects_data() {
    QTest::addColumn<QString>("output");
    QTest::newRow("bad exit code") << "4242|FAILED|x|00:00:01\n";
    QTest::newRow("exit code without signal") << "4242|FAILED|1|00:00:01\n";
    QTest::newRow("other job") << "4243|FAILED|1:0|00:00:01\n";
    QTest::newRow("prefix of id") << "42420.batch|FAILED|1:0|00:00:01\n";
    QTest::newRow("three fields") << "4242|FAILED|1:0\n";
  }
  void sacctRejects() {
    QFETCH(QString, output);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_sacct(output.toStdString(), "4242"));
  }
};

QTEST_MAIN(TestSlurmState)
#include "tst_slurm_state.moc"
