// Why a run failed, read from end reasons as studio-train, its launcher and the config reader
// write them (the texts below are copied from real runs: tests/sp/tst_step_time's failed runs
// check the live ones), and a rank's own lines picked out of a launcher's combined log.
#include <QtTest/QtTest>

#include "studio/runs/failure_cause.h"

using studio::FailureKind;

Q_DECLARE_METATYPE(FailureKind)

class TestFailureCause : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void explains_data() {
    QTest::addColumn<QString>("reason");
    QTest::addColumn<FailureKind>("kind");
    QTest::addColumn<int>("rank");
    QTest::addColumn<qint64>("step");
    QTest::addColumn<QString>("phase");
    QTest::addColumn<QStringList>("changes");
    QTest::addColumn<QString>("key");
    QTest::addRow("out of memory, through the launcher")
        << "rank 1 exited with code 1: studio-train train: out of memory on rank 1 at step 3, in "
           "the forward of micro-batch 1 of 1: CUDA out of memory. Tried to allocate 2.00 GiB "
           "(injected by STUDIO_INJECT_FAULT=oom). The memory estimate for this run is 0.0 GiB "
           "per rank; what lowers it (studio-train estimate shows each): ZeRO stage 3 "
           "(zero_stage: 3), offload_optimizer: true, tiled_mlp: true, "
           "per_device_train_batch_size: 1 with more gradient_accumulation_steps"
        << FailureKind::OutOfMemory << 1 << qint64(3) << "the forward of micro-batch 1 of 1"
        << QStringList{"ZeRO stage 3 (zero_stage: 3)", "offload_optimizer: true",
                       "tiled_mlp: true",
                       "per_device_train_batch_size: 1 with more gradient_accumulation_steps"}
        << "";
    QTest::addRow("diverged")
        << "step 3: the loss is nan and the gradient norm is nan (first on rank 0, in the loss of "
           "micro-batch 1 of 1): training stopped, and nothing of this step was saved; no "
           "checkpoint was saved yet. Lower learning_rate or set max_grad_norm, look for a bad "
           "sample in the data, or set skip_nonfinite_steps to skip such steps"
        << FailureKind::NotFinite << 0 << qint64(3) << "the loss of micro-batch 1 of 1"
        << QStringList{"Lower learning_rate or set max_grad_norm",
                       "look for a bad sample in the data",
                       "set skip_nonfinite_steps to skip such steps"}
        << "";
    QTest::addRow("killed") << "rank 1 was killed by signal 9 (SIGKILL)" << FailureKind::Killed
                            << 1 << qint64(-1) << "" << QStringList{} << "";
    QTest::addRow("config error")
        << "bad.yaml:4:13: cutoff_len: expected a whole number, got 'abc' (allowed: >= 1)"
        << FailureKind::Config << -1 << qint64(-1) << ""
        << QStringList{"cutoff_len on line 4 of bad.yaml"} << "cutoff_len";
    QTest::addRow("a peer died")
        << "rank 0: recv(zigzag ring attention: K/V) in group ring0.0 failed after 1800 s at "
           "most: [pair.cc:547] Connection closed by peer [127.0.0.1]:42142 (a peer rank "
           "probably died; see its log)"
        << FailureKind::PeerLost << 0 << qint64(-1)
        << "recv(zigzag ring attention: K/V) in group ring0.0"
        << QStringList{"another rank died first: its log says why"} << "";
    QTest::addRow("exit code only") << "rank 2 exited with code 3" << FailureKind::Exited << 2
                                    << qint64(-1) << "" << QStringList{"the rank's last log lines say why"} << "";
    QTest::addRow("anything else") << "trained nothing: no samples" << FailureKind::Other << -1
                                   << qint64(-1) << "" << QStringList{} << "";
  }
  void explains() {
    QFETCH(QString, reason);
    QFETCH(FailureKind, kind);
    QFETCH(int, rank);
    QFETCH(qint64, step);
    QFETCH(QString, phase);
    QFETCH(QStringList, changes);
    QFETCH(QString, key);
    const studio::FailureCause c = studio::explain_failure(reason.toStdString());
    QCOMPARE(int(c.kind), int(kind));
    QCOMPARE(c.rank, rank);
    QCOMPARE(qint64(c.step), step);
    QCOMPARE(QString::fromStdString(c.phase), phase);
    QCOMPARE(QString::fromStdString(c.key), key);
    if (kind == FailureKind::Killed) {
      QVERIFY(!c.changes.empty());  // where a SIGKILL comes from
      QVERIFY(QString::fromStdString(c.changes.front()).contains("out-of-memory killer"));
    } else {
      QStringList got;
      for (const auto& s : c.changes) got << QString::fromStdString(s);
      QCOMPARE(got, changes);
    }
    QVERIFY(!c.summary.empty());
    if (kind == FailureKind::Config) QCOMPARE(c.config_line, 4);
  }

  void rankLines() {
    const std::string log =
        "studio-train: launching 2 workers\n"
        "[####--------------------] 1/5  20%  loss 8.3537\r[#########---------------] 2/5\n"
        "error: rank 0: recv(K/V) failed\n"
        "[rank 1] first of rank 1\n"
        "[rank 12] not rank 1\n"
        "[rank 1] studio-train train: out of memory on rank 1 at step 3\n"
        "[launcher] rank 1 exited with code 1\n";
    const auto one = studio::rank_log_tail(log, 1, 10);
    QCOMPARE(int(one.size()), 2);
    QCOMPARE(QString::fromStdString(one[1]), "studio-train train: out of memory on rank 1 at step 3");
    QCOMPARE(int(studio::rank_log_tail(log, 1, 1).size()), 1);
    const auto zero = studio::rank_log_tail(log, 0, 10);
    QCOMPARE(int(zero.size()), 2);  // no progress bar, no tagged or launcher line
    QCOMPARE(QString::fromStdString(zero[1]), "error: rank 0: recv(K/V) failed");
    QVERIFY(studio::rank_log_tail(log, 5, 10).empty());
  }
};

QTEST_GUILESS_MAIN(TestFailureCause)
#include "tst_failure_cause.moc"
