// Faults injected into real runs (`studio-train train --nproc 2`: worker processes, Gloo): the
// whole run SIGKILLed at each point of writing a checkpoint, a disk that fills up while saving, a
// corrupted checkpoint on resume, and a step whose loss is NaN. Each time what the user has left
// must be usable: the previous checkpoint loads and the resumed run continues with the losses and
// parameters of the run that was never interrupted; no half-written checkpoint is taken as the
// latest; status.json says what happened, where, and what to do. Plain (ZeRO 0, data parallel)
// and sharded (ZeRO-3 with offload, SP 2) runs.
#include <QRegularExpression>
#include <QtTest/QtTest>

#include <sys/mount.h>
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <map>
#include <memory>

#include "loopback_port.h"
#include "train_runs.h"

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
using train_runs::max_relative_param_error;
using train_runs::read_json;
using train_runs::Run;

std::map<int, double> step_losses(const QString& dir) {
  std::map<int, double> out;
  for (const auto& e : train_runs::events(dir))
    if (e["event"].toString() == "step")  // null: NaN or infinite, as written
      out[e["step"].toInt()] = e["loss"].isNull() ? std::nan("") : e["loss"].toDouble();
  return out;
}

// The run in a session of its own (setsid), with `env` added: an injected kill takes the whole
// process group, which must not be this test's.
Run run_alone(const QStringList& args, const QStringList& env = {}) {
  QProcess p;
  auto e = QProcessEnvironment::systemEnvironment();
  e.insert("STUDIO_VERIFY_COLLECTIVES", "1");
  for (const QString& kv : env) e.insert(kv.section('=', 0, 0), kv.section('=', 1));
  p.setProcessEnvironment(e);
  p.start("setsid", QStringList{"-w", QStringLiteral(STUDIO_TRAIN_EXE)} + args);
  if (!p.waitForFinished(300000)) {
    p.kill();
    p.waitForFinished();
    return {-1, "timed out"};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

qint64 folder_bytes(const QString& dir) {
  qint64 n = 0;
  QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) n += QFileInfo(it.next()).size();
  return n;
}

}  // namespace

class TestFaults : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;
  std::map<QString, QString> reference_;  // setup -> the uninterrupted run's output folder

  // The keys of a setup: "plain" (ZeRO 0 over dp 2) or "zero3" (ZeRO-3 with offload, SP 2).
  static QStringList setup_keys(const QString& setup) {
    if (setup == "zero3")
      return {"zero_stage: 3", "offload_optimizer: true", "offload_param: true",
              "sequence_parallel_size: 2"};
    if (setup == "zero1") return {"zero_stage: 1"};  // an optimizer file per rank
    return {};
  }

  QString write_config(const QString& name, const QString& out, const QStringList& extra) {
    const QStringList lines{"model_name_or_path: " + model_,
                            "stage: sft",
                            "do_train: true",
                            "finetuning_type: full",
                            "dataset: demo_sft",
                            "dataset_dir: " + kSource + "/resources/demo/data",
                            "template: qwen",
                            "cutoff_len: 64",
                            "max_samples: 64",
                            "output_dir: " + out,
                            "logging_steps: 1",
                            "save_steps: 2",
                            "learning_rate: 1.0e-3",
                            "lr_scheduler_type: cosine",
                            "warmup_steps: 0",
                            "max_grad_norm: 1.0",
                            "per_device_train_batch_size: 2",
                            "max_steps: 6",
                            "eval_strategy: 'no'",
                            "seed: 3",
                            "adam_epsilon: 1.0e-6"};
    return train_runs::write_yaml(dir_.filePath(name + ".yaml"), lines, extra);
  }

  // Trains config `name` into `out` (2 processes); the result of the run.
  Run train(const QString& name, const QString& out, const QStringList& extra,
            const QStringList& env = {}) {
    return run_alone({"train", write_config(name, out, extra), "--nproc", "2"}, env);
  }

  // The uninterrupted 4-process run (dp 2 x SP 2) the restart tests end like.
  QString restart_reference() {
    const QString ref = dir_.filePath("restart-ref");
    if (QFile::exists(ref + "/status.json")) return ref;
    const Run r = run_alone({"train", write_config("restart-ref", ref, {"sequence_parallel_size: 2"}),
                             "--nproc", "4"});
    if (r.code != 0) qWarning("%s", qPrintable(r.err.right(3000)));
    return r.code == 0 ? ref : QString();
  }

  // One node's launcher of a two-node run on this machine (2 workers), in a session of its own
  // so that the test can kill the node's whole process group.
  std::unique_ptr<QProcess> start_node(const QString& config, int node, int port,
                                       const QStringList& flags, const QStringList& env) {
    auto p = std::make_unique<QProcess>();
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert("STUDIO_VERIFY_COLLECTIVES", "1");
    for (const QString& kv : env) e.insert(kv.section('=', 0, 0), kv.section('=', 1));
    p->setProcessEnvironment(e);
    p->start("setsid", QStringList{"-w", QStringLiteral(STUDIO_TRAIN_EXE), "train", config,
                                   "--nproc", "2", "--nnodes", "2", "--node-rank",
                                   QString::number(node), "--master-addr", "127.0.0.1",
                                   "--master-port", QString::number(port)} +
                           flags);
    p->waitForStarted(10000);
    return p;
  }

  QString reference(const QString& setup) {
    if (reference_.count(setup)) return reference_[setup];
    const QString out = dir_.filePath("ref-" + setup);
    const Run r = train("ref-" + setup, out, setup_keys(setup));
    if (r.code != 0) qWarning("%s", qPrintable(r.err.right(3000)));
    return reference_[setup] = r.code == 0 ? out : QString();
  }

  // The resumed run's losses and final parameters against the uninterrupted run's.
  void expect_like_reference(const QString& out, const QString& setup) {
    const auto ref = step_losses(reference(setup));
    const auto got = step_losses(out);  // both timelines; the resumed one is the later events
    QCOMPARE(got.size(), ref.size());
    for (const auto& [step, loss] : ref)
      QVERIFY2(
          std::abs(got.at(step) - loss) <= 1e-6 * std::abs(loss),
          qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(got.at(step)).arg(loss)));
    QVERIFY(max_relative_param_error(reference(setup), out) <= 1e-6);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    model_ = train_runs::make_tiny_model(dir_.path(), train_runs::TinyModel{});
    QVERIFY(!model_.isEmpty());
  }

  // SIGKILL of the whole run at each point of writing checkpoint-4: checkpoint-2 (or, once
  // committed, checkpoint-4) is what a restart resumes from, and the resumed run ends exactly as
  // the uninterrupted one.
  void killWhileSaving_data() {
    QTest::addColumn<QString>("setup");
    QTest::addColumn<QString>("point");
    QTest::addColumn<int>("resumesAt");
    for (const char* setup : {"plain", "zero3"}) {
      QTest::addRow("%s, staged", setup) << setup << "save.staged" << 2;
      QTest::addRow("%s, model written", setup) << setup << "save.model" << 2;
      QTest::addRow("%s, optimizer written", setup) << setup << "save.optimizer" << 2;
      QTest::addRow("%s, committed", setup) << setup << "save.committed" << 4;
    }
  }
  void killWhileSaving() {
    QFETCH(QString, setup);
    QFETCH(QString, point);
    QFETCH(int, resumesAt);
    const QString name = "kill-" + setup + "-" + point;
    const QString out = dir_.filePath(name);
    const Run killed = train(name, out, setup_keys(setup), {"STUDIO_INJECT_FAULT=" + point + "@4"});
    QVERIFY2(killed.code != 0, qPrintable(killed.err.right(2000)));
    QVERIFY(QFile::exists(out + "/checkpoint-2/trainer_state.json"));
    QCOMPARE(QFile::exists(out + "/checkpoint-4"), resumesAt == 4);
    const auto before = train_runs::events(out);
    QVERIFY(!before.empty());
    QVERIFY(before.back()["event"].toString() != "end");  // killed: nobody wrote how it ended

    // Started again as it was: it resumes from the last complete checkpoint.
    const Run resumed = train(name, out, setup_keys(setup));
    QVERIFY2(resumed.code == 0, qPrintable(resumed.err.right(3000)));
    bool said = false;
    for (const auto& e : train_runs::events(out))
      said |= e["event"].toString() == "log" &&
              e["message"].toString().contains(
                  QStringLiteral("checkpoint-%1 at step %1").arg(resumesAt));
    QVERIFY2(said, "the resumed run names the checkpoint it resumed from");
    expect_like_reference(out, setup);
    QCOMPARE(QDir(out).entryList(QDir::Dirs | QDir::Hidden).filter(".saving"), QStringList());
  }

  // A disk that fills up while checkpoint-4 is written: the run stops with the path and the
  // system's reason in status.json, checkpoint-2 is intact (a run resumed from it elsewhere ends
  // as the uninterrupted one), and no partial folder is left.
  void diskFullWhileSaving() {
    if (::geteuid() != 0) QSKIP("mounting a small tmpfs needs root (CI runs as root)");
    const QString setup = "plain";
    const QString ref = reference(setup);
    QVERIFY(!ref.isEmpty());
    // Room for the events, one checkpoint and a half: the second save cannot finish.
    const qint64 checkpoint = folder_bytes(ref + "/checkpoint-2");
    QVERIFY(checkpoint > 0);
    const QString mnt = dir_.filePath("small-disk");
    QVERIFY(QDir().mkpath(mnt));
    const QByteArray size = QByteArray::number(checkpoint * 3 / 2 + (256 << 10));
    QVERIFY2(::mount("tmpfs", mnt.toLocal8Bit().constData(), "tmpfs", 0,
                     ("size=" + size).constData()) == 0,
             strerror(errno));
    struct Unmount {
      QString path;
      ~Unmount() { ::umount2(path.toLocal8Bit().constData(), MNT_DETACH); }
    } unmount{mnt};
    const QString out = mnt + "/run";
    const Run full = train("full-disk", out, setup_keys(setup));
    QVERIFY(full.code != 0);
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    const QString reason = status["reason"].toString();
    QVERIFY2(reason.contains("cannot write checkpoint " + out + "/checkpoint-4"),
             qPrintable(reason));
    QVERIFY2(reason.contains("No space left on device"), qPrintable(reason));
    QVERIFY(QFile::exists(out + "/checkpoint-2/trainer_state.json"));
    QVERIFY(!QFile::exists(out + "/checkpoint-4"));
    QCOMPARE(QDir(out).entryList(QDir::Dirs | QDir::Hidden).filter(".saving"), QStringList());

    // checkpoint-2, copied off the full disk, resumes into the uninterrupted run's end.
    const QString moved = dir_.filePath("full-disk-resumed");
    QVERIFY(QDir().mkpath(moved));
    QVERIFY(QProcess::execute("cp", {"-a", out + "/checkpoint-2", moved + "/"}) == 0);
    QVERIFY(QFile::copy(out + "/events.jsonl", moved + "/events.jsonl"));
    const Run resumed = train("full-disk-resumed", moved, setup_keys(setup));
    QVERIFY2(resumed.code == 0, qPrintable(resumed.err.right(3000)));
    expect_like_reference(moved, setup);
  }

  // Saving does not stop the step: checkpoint-2's files take 3 s longer to write (on every
  // rank, STUDIO_INJECT_FAULT=save.slow@2), and steps 3 and 4 are done meanwhile; the save of
  // step 4 waits for it (at most one in flight), so checkpoint-2 is committed before
  // checkpoint-4. The run ends with the uninterrupted run's losses and weights, and each
  // checkpoint's manifest matches its files.
  void savingDoesNotStopTheStep_data() {
    QTest::addColumn<QString>("setup");
    QTest::newRow("plain") << "plain";
    QTest::newRow("zero3 + offload, sp 2") << "zero3";
  }
  void savingDoesNotStopTheStep() {
    QFETCH(QString, setup);
    const QString name = "slow-save-" + setup;
    const QString out = dir_.filePath(name);
    const Run r = train(name, out, setup_keys(setup), {"STUDIO_INJECT_FAULT=save.slow@2"});
    QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
    QStringList order;  // "step N" and "checkpoint N" as written
    double waited = -1, wrote = -1, copies_mib = -1;
    for (const auto& e : train_runs::events(out)) {
      const QString kind = e["event"].toString();
      if (kind == "step" || kind == "checkpoint") order << kind + " " + QString::number(e["step"].toInt());
      const QString message = e["message"].toString();
      if (kind == "log" && message.startsWith("checkpoint 2: ")) {
        const QRegularExpression re(
            "the step waited ([0-9.]+) s for the copies to host memory \\(([0-9.]+) MiB on rank "
            "0\\); rank 0 wrote its files in ([0-9.]+) s while");
        const auto m = re.match(message);
        QVERIFY2(m.hasMatch(), qPrintable(message));
        waited = m.captured(1).toDouble();
        copies_mib = m.captured(2).toDouble();
        wrote = m.captured(3).toDouble();
      }
    }
    // The host memory the copies hold, measured by the engine's allocator, is what the estimate
    // says (studio-train estimate --json: checkpoint_host_bytes.rank0), within 5%.
    QProcess estimate;
    estimate.start(QStringLiteral(STUDIO_TRAIN_EXE),
                   {"estimate", dir_.filePath(name + ".yaml"), "--nproc", "2", "--json", "--cpu"});
    QVERIFY(estimate.waitForFinished(60000));
    const QJsonObject est = QJsonDocument::fromJson(estimate.readAllStandardOutput()).object();
    const double want_mib = est["checkpoint_host_bytes"].toObject()["rank0"].toDouble() / (1 << 20);
    QVERIFY2(want_mib > 0 && std::abs(copies_mib - want_mib) <= 0.05 * want_mib,
             qPrintable(QString("copies %1 MiB, estimate %2 MiB").arg(copies_mib).arg(want_mib)));
    QVERIFY2(order.indexOf("checkpoint 2") > order.indexOf("step 4"), qPrintable(order.join(", ")));
    QVERIFY2(order.indexOf("checkpoint 2") < order.indexOf("checkpoint 4"),
             qPrintable(order.join(", ")));
    QVERIFY2(wrote >= 3.0 && waited >= 0 && waited < 1.0,
             qPrintable(QString("waited %1 s, wrote %2 s").arg(waited).arg(wrote)));
    for (const char* c : {"checkpoint-2", "checkpoint-4", "checkpoint-6"})
      QVERIFY2(QFile::exists(out + "/" + c + "/manifest.json"), c);
    QCOMPARE(QDir(out).entryList(QDir::Dirs | QDir::Hidden).filter(".saving"), QStringList());
    expect_like_reference(out, setup);
  }

  // A damaged latest checkpoint (its files no longer match the sizes and CRC-32C its
  // manifest.json recorded): named explicitly (resume_from_checkpoint), resuming stops at once
  // with the file named and the way back to the checkpoint before it; found by itself (the run
  // started again in its output_dir), it is passed over with a warning saying why, and the run
  // resumes from the one before and ends as the uninterrupted run.
  void damagedCheckpointOnResume_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("damage");
    QTest::addColumn<QString>("says");
    QTest::newRow("model truncated") << "model.safetensors" << "truncate"
                                     << "model.safetensors: %1 bytes, manifest.json says %2";
    QTest::newRow("model byte flipped") << "model.safetensors" << "flip"
                                        << "model.safetensors: CRC-32C ";
    QTest::newRow("optimizer file missing") << "optimizer-00001-of-00002.safetensors" << "remove"
                                            << "optimizer-00001-of-00002.safetensors is missing "
                                               "(manifest.json lists it)";
    QTest::newRow("rng state garbage") << "rng_state.pt" << "garbage"
                                       << "rng_state.pt: 19 bytes, manifest.json says %2";
  }
  void damagedCheckpointOnResume() {
    QFETCH(QString, file);
    QFETCH(QString, damage);
    QFETCH(QString, says);
    const QString name = "damaged-" + QString(QTest::currentDataTag()).replace(' ', '-');
    const QString out = dir_.filePath(name);
    // Stopped after step 5 (SIGTERM to the launcher): checkpoint-2 and checkpoint-4.
    const Run first = train(name, out, setup_keys("zero1"), {"STUDIO_INJECT_FAULT=stop@5"});
    QVERIFY2(first.code == 130, qPrintable(first.err.right(2000)));
    QVERIFY(QFile::exists(out + "/checkpoint-4/manifest.json"));
    const QString victim = out + "/checkpoint-4/" + file;
    const qint64 size = QFileInfo(victim).size();
    QVERIFY2(size > 0, qPrintable(victim));
    if (damage == "remove") {
      QVERIFY(QFile::remove(victim));
    } else {
      QFile f(victim);
      QVERIFY(f.open(QIODevice::ReadWrite));
      if (damage == "truncate") QVERIFY(f.resize(size / 2));
      if (damage == "garbage") {
        QVERIFY(f.resize(0));
        f.write("not a torch archive");
      }
      if (damage == "flip") {
        QVERIFY(f.seek(size / 2));
        char c = 0;
        QVERIFY(f.getChar(&c));
        QVERIFY(f.seek(size / 2));
        QVERIFY(f.putChar(static_cast<char>(c ^ 0x10)));
      }
    }
    const QString problem = says.contains("%1") ? says.arg(size / 2).arg(size)
                            : says.contains("%2") ? QString(says).replace("%2", QString::number(size))
                                                  : says;

    // Named: stops, naming the file and the checkpoint before it.
    QStringList named = setup_keys("zero1");
    named << "resume_from_checkpoint: " + out + "/checkpoint-4";
    const Run stopped = train(name + "-named", out, named);
    QVERIFY(stopped.code != 0);
    const QString reason = read_json(out + "/status.json")["reason"].toString();
    QVERIFY2(reason.startsWith("cannot resume from " + out + "/checkpoint-4: " + problem),
             qPrintable(reason));
    QVERIFY2(reason.contains("resume_from_checkpoint: " + out + "/checkpoint-2"),
             qPrintable(reason));

    // Found: passed over, with the reason, for checkpoint-2; the run ends as if never stopped.
    const Run resumed = train(name, out, setup_keys("zero1"));
    QVERIFY2(resumed.code == 0, qPrintable(resumed.err.right(3000)));
    bool warned = false;
    for (const auto& e : train_runs::events(out))
      warned = warned || e["message"].toString().startsWith(
                             "not resuming from " + out + "/checkpoint-4: " + problem);
    QVERIFY2(warned, qPrintable(resumed.err.right(3000)));
    expect_like_reference(out, "zero1");
  }

  // A step whose loss is NaN (injected on rank 1 at step 3): by default the run stops there,
  // saying which step and why, with nothing of it saved; with skip_nonfinite_steps the step
  // makes no update and training goes on.
  void nonFiniteLoss_data() {
    QTest::addColumn<QString>("setup");
    QTest::addColumn<int>("skip");
    QTest::newRow("plain, stop") << "plain" << 0;
    QTest::newRow("plain, skip") << "plain" << 2;
    QTest::newRow("zero3, stop") << "zero3" << 0;
    QTest::newRow("zero3, skip") << "zero3" << 1;
  }
  void nonFiniteLoss() {
    QFETCH(QString, setup);
    QFETCH(int, skip);
    const QString name = QStringLiteral("nan-%1-%2").arg(setup).arg(skip);
    const QString out = dir_.filePath(name);
    QStringList keys = setup_keys(setup);
    keys << QStringLiteral("skip_nonfinite_steps: %1").arg(skip);
    const Run r = train(name, out, keys, {"STUDIO_INJECT_FAULT=loss.nan@3#1"});
    const QJsonObject status = read_json(out + "/status.json");
    const auto losses = step_losses(out);
    if (skip == 0) {
      QVERIFY(r.code != 0);
      QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
      const QString reason = status["reason"].toString();
      QVERIFY2(reason.startsWith("step 3: the loss is nan and the gradient norm is nan (first on "
                                 "rank 1, in the loss of micro-batch 1 of 1): training "
                                 "stopped, and nothing of this step was saved; the last "
                                 "checkpoint is " +
                                 out + "/checkpoint-2."),
               qPrintable(reason));
      QVERIFY2(reason.contains("skip_nonfinite_steps"), qPrintable(reason));
      QCOMPARE(int(losses.size()), 2);  // no step event for step 3
      QVERIFY(!QFile::exists(out + "/model.safetensors"));
      return;
    }
    QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
    QCOMPARE(status["state"].toString(), QStringLiteral("finished"));
    QCOMPARE(int(losses.size()), 6);
    for (const auto& [step, loss] : losses) QCOMPARE(std::isfinite(loss), step != 3);
    bool warned = false;
    for (const auto& e : train_runs::events(out))
      warned |= e["event"].toString() == "log" && e["level"].toString() == "warning" &&
                e["message"].toString().startsWith(
                    "step 3: the loss is nan and the gradient norm "
                    "is nan (first on rank 1, in the loss of micro-batch 1 of 1): skipped, no "
                    "update");
    QVERIFY(warned);
    // The skipped step's line says it diverged, as Python writes it (not null: "no value").
    QFile lines(out + "/events.jsonl");
    QVERIFY(lines.open(QIODevice::ReadOnly));
    const QByteArray text = lines.readAll();
    QVERIFY2(text.contains(R"("grad_norm":NaN)") && text.contains(R"("loss":NaN)"),
             text.left(3000).constData());
    // The steps before the skipped one are the uninterrupted run's; the final parameters are
    // finite (no NaN reached the weights).
    const auto ref = step_losses(reference(setup));
    for (int step : {1, 2})
      QVERIFY(std::abs(losses.at(step) - ref.at(step)) <= 1e-6 * ref.at(step));
    QVERIFY(std::isfinite(max_relative_param_error(reference(setup), out)));
  }

  // A stop request in the middle of step 3 (SIGTERM to the launcher, which passes it on, as the
  // studio's Stop and Ctrl-C do): every rank ends step 3 and stops there together; the run is
  // "stopped", not failed. With save_on_stop it leaves checkpoint-3, and starting it again
  // resumes there and ends as the run that was never stopped; without, checkpoint-2 stays the
  // newest.
  void stopMidStep_data() {
    QTest::addColumn<QString>("setup");
    QTest::addColumn<bool>("saveOnStop");
    for (const char* setup : {"plain", "zero3"}) {
      QTest::addRow("%s, save_on_stop", setup) << setup << true;
      QTest::addRow("%s, no save", setup) << setup << false;
    }
  }
  void stopMidStep() {
    QFETCH(QString, setup);
    QFETCH(bool, saveOnStop);
    const QString name = QStringLiteral("stop-%1-%2").arg(setup).arg(saveOnStop);
    const QString out = dir_.filePath(name);
    QStringList keys = setup_keys(setup);
    if (saveOnStop) keys << "save_on_stop: true";
    const Run stopped = train(name, out, keys, {"STUDIO_INJECT_FAULT=stop@3#1"});
    QVERIFY2(stopped.code == 130, qPrintable(stopped.err.right(3000)));  // as after Ctrl-C
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("stopped"));
    QCOMPARE(status["exit_code"].toInt(), 130);  // as the process exits
    QCOMPARE(status["step"].toInt(), 3);
    const QString reason = status["reason"].toString();
    const auto losses = step_losses(out);
    QCOMPARE(int(losses.size()), 3);  // steps 1-3, and not one more
    if (!saveOnStop) {
      QCOMPARE(reason, QStringLiteral("stopped at step 3"));
      QVERIFY(!QFile::exists(out + "/checkpoint-3"));
      QVERIFY(QFile::exists(out + "/checkpoint-2/trainer_state.json"));
      return;
    }
    QCOMPARE(reason, "stopped at step 3; saved to resume from: resume_from_checkpoint: " + out +
                         "/checkpoint-3");
    QVERIFY(QFile::exists(out + "/checkpoint-3/trainer_state.json"));
    const Run resumed = train(name, out, keys);
    QVERIFY2(resumed.code == 0, qPrintable(resumed.err.right(3000)));
    bool said = false;
    for (const auto& e : train_runs::events(out))
      said |= e["event"].toString() == "log" &&
              e["message"].toString().contains("checkpoint-3 at step 3");
    QVERIFY2(said, "the restarted run resumes from the checkpoint written on stop");
    expect_like_reference(out, setup);
  }

  // A rank that stalls without dying (SIGSTOP at the start of step 3, as under a debugger or on a
  // frozen node): rank 0's watchdog says so on stderr long before ddp_timeout, and the run then
  // fails naming the stalled rank in status.json, not only "a peer is hung or dead". When the
  // stalled rank is rank 0, which holds the rendezvous store, the others name it too.
  void stalledRank_data() {
    QTest::addColumn<QString>("setup");
    QTest::addColumn<int>("rank");
    QTest::newRow("plain, rank 1") << "plain" << 1;
    QTest::newRow("zero3, rank 1") << "zero3" << 1;
    QTest::newRow("plain, rank 0") << "plain" << 0;
  }
  void stalledRank() {
    QFETCH(QString, setup);
    QFETCH(int, rank);
    const QString name = QStringLiteral("stall-%1-%2").arg(setup).arg(rank);
    const QString out = dir_.filePath(name);
    QElapsedTimer clock;
    clock.start();
    const Run r = train(name, out, setup_keys(setup) << "ddp_timeout: 10",
                        {QStringLiteral("STUDIO_INJECT_FAULT=stall@3#%1").arg(rank)});
    QVERIFY2(r.code != 0, qPrintable(r.err.right(3000)));
    QVERIFY2(clock.elapsed() < 120000, "ended within ddp_timeout and the launcher's grace");
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    const QString reason = status["reason"].toString();
    qInfo("status.json's reason: %s", qPrintable(reason));
    if (rank == 1) {
      QVERIFY2(reason.contains("watchdog: rank 1 has sent no heartbeat in 3 s (stalled: stopped, "
                               "frozen or swapping, or its node is gone): rank 1 was at step 3"),
               qPrintable(reason));
      QVERIFY2(r.err.contains("studio-train: watchdog: rank 1 has sent no heartbeat for"),
               qPrintable(r.err.right(3000)));
    } else {
      QVERIFY2(reason.contains("watchdog: the rendezvous store on rank 0 (127.0.0.1:") &&
                   reason.contains("does not answer either: rank 0 is stalled"),
               qPrintable(reason));
    }
  }

  // Two ranks die one after the other (rank 2 at step 3; in the restarted world rank 1 at step
  // 6) in a 4-process run (dp 2 x SP 2) with --max-restarts 2: the launcher starts the whole
  // world again from the newest committed checkpoint each time, and the run ends as the
  // uninterrupted one: each step's loss (the resumed attempt's, the later line) within 1e-6 and
  // the final weights within 1e-6. Each restart is an event naming the failed rank, its cause and
  // the checkpoint it resumed from. With checkpoints written in the foreground
  // (STUDIO_CHECKPOINT_WRITES) those are checkpoint-2, then checkpoint-4. Written in the
  // background (the default), a checkpoint is committed at the first step boundary after every
  // rank has written it, so a rank killed at the start of the next step may take the one in
  // flight with it: the restart then takes the one before (or starts over), still ending as the
  // uninterrupted run.
  void restartsAfterKilledRanks_data() {
    QTest::addColumn<bool>("background");
    QTest::newRow("checkpoints in the foreground") << false;
    QTest::newRow("checkpoints in the background") << true;
  }
  void restartsAfterKilledRanks() {
    QFETCH(bool, background);
    const QStringList keys{"sequence_parallel_size: 2"};
    const QString ref = restart_reference();
    QVERIFY(!ref.isEmpty());
    Run r;
    const QString out = dir_.filePath(background ? "restarts-bg" : "restarts");
    QStringList env{"STUDIO_INJECT_FAULT=crash@3#2%0,crash@6#1%1"};
    if (!background) env << "STUDIO_CHECKPOINT_WRITES=foreground";
    r = run_alone({"train", write_config(QFileInfo(out).fileName(), out, keys), "--nproc", "4",
                   "--max-restarts", "2"},
                  env);
    QVERIFY2(r.code == 0, qPrintable(r.err.right(4000)));
    if (!background)
      QVERIFY2(r.err.contains("restart 1 of 2: resuming from " + out + "/checkpoint-2"),
               qPrintable(r.err.right(4000)));
    std::vector<QJsonObject> restarts;
    int starts = 0;
    for (const auto& e : train_runs::events(out)) {
      if (e["event"].toString() == "restart") restarts.push_back(e);
      starts += e["event"].toString() == "start";
    }
    QCOMPARE(starts, 3);
    QCOMPARE(int(restarts.size()), 2);
    const int failed[] = {2, 1}, resumed[] = {2, 4};
    int previous = 0;
    for (int i = 0; i < 2; ++i) {
      const QJsonObject& e = restarts[size_t(i)];
      QCOMPARE(e["attempt"].toInt(), i + 1);
      QCOMPARE(e["max_restarts"].toInt(), 2);
      QCOMPARE(e["failed_rank"].toInt(), failed[i]);
      QVERIFY2(e["reason"].toString().contains(
                   QStringLiteral("rank %1 was killed by signal 9 (SIGKILL)").arg(failed[i])),
               qPrintable(e["reason"].toString()));
      const int step = e["step"].toInt();
      if (background) {
        // The newest committed one: at most the one in flight when the rank died.
        QVERIFY2(step >= previous && step <= resumed[i] && step % 2 == 0, qPrintable(QString::number(step)));
        previous = step;
      } else {
        QCOMPARE(step, resumed[i]);
      }
      QCOMPARE(e["resume_from"].toString(),
               step > 0 ? out + QStringLiteral("/checkpoint-%1").arg(step) : QString());
      qInfo("restart %d resumed from step %d", i + 1, step);
    }
    QCOMPARE(read_json(out + "/status.json")["state"].toString(), QStringLiteral("finished"));
    const auto want = step_losses(ref), got = step_losses(out);
    QCOMPARE(got.size(), want.size());
    for (const auto& [step, loss] : want)
      QVERIFY2(std::abs(got.at(step) - loss) <= 1e-6 * std::abs(loss),
               qPrintable(QStringLiteral("step %1: %2 vs %3").arg(step).arg(got.at(step)).arg(loss)));
    QVERIFY(max_relative_param_error(ref, out) <= 1e-6);
  }

  // The launcher SIGKILLed mid-run (each step made 1 s slower so that the test can act): the
  // kernel sends every worker SIGTERM (PR_SET_PDEATHSIG), so the ranks stop together at the next
  // step boundary and, with save_on_stop, write that step's checkpoint; rank 0 records the stop.
  // Started again, the run resumes there and ends as the uninterrupted one.
  void killedLauncher() {
    const QString out = dir_.filePath("killed-launcher");
    const QString config = write_config("killed-launcher", out, {"save_on_stop: true"});
    QProcess launcher;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("STUDIO_INJECT_FAULT", "slow");
    launcher.setProcessEnvironment(env);
    launcher.start("setsid", {"-w", QStringLiteral(STUDIO_TRAIN_EXE), "train", config, "--nproc", "2"});
    QVERIFY(launcher.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(step_losses(out).count(2) == 1, 120000);
    QVERIFY(::kill(static_cast<pid_t>(launcher.processId()), SIGKILL) == 0);
    QVERIFY(launcher.waitForFinished(10000));
    // The workers, orphaned, end on their own.
    QTRY_COMPARE_WITH_TIMEOUT(read_json(out + "/status.json")["state"].toString(),
                              QStringLiteral("stopped"), 60000);
    const QString reason = read_json(out + "/status.json")["reason"].toString();
    const QRegularExpression re("^stopped at step ([0-9]+); saved to resume from: "
                                "resume_from_checkpoint: (.*)$");
    const auto m = re.match(reason);
    QVERIFY2(m.hasMatch(), qPrintable(reason));
    QVERIFY(m.captured(1).toInt() >= 2 && m.captured(1).toInt() < 6);
    QCOMPARE(m.captured(2), out + "/checkpoint-" + m.captured(1));
    const Run again = train("killed-launcher", out, {"save_on_stop: true"});
    QVERIFY2(again.code == 0, qPrintable(again.err.right(3000)));
    expect_like_reference(out, "plain");
  }

  // Restarts across two nodes (two launchers on this machine, 2 workers each: dp 2 x SP 2, node
  // 1 holding ranks 2 and 3), --max-restarts 2: the launchers meet at node 0's rendezvous (a c10d
  // TCPStore at --master-addr:--master-port) before each round.
  //  - a rank killed on node 1 (rank 3 at step 3): both nodes restart the world from the newest
  //    checkpoint on a port node 0 chose, the restart event names rank 3 and its cause, and the
  //    run ends as the uninterrupted one (losses and weights within 1e-6);
  //  - node 1 killed whole (its launcher and workers, SIGKILL, while rank 2 is stalled at step
  //    4), then started again: node 0 waits at the rendezvous, node 1 joins the round it waits
  //    in, and the run ends as the uninterrupted one;
  //  - node 1 killed and not started again: node 0 ends after --rdzv-timeout, status.json saying
  //    which node did not come back.
  void restartsAcrossNodes_data() {
    QTest::addColumn<QString>("fault");
    QTest::newRow("a rank killed on node 1") << "rank";
    QTest::newRow("node 1 killed, then back") << "node back";
    QTest::newRow("node 1 killed, never back") << "node gone";
  }
  void restartsAcrossNodes() {
    QFETCH(QString, fault);
    const QString ref = restart_reference();
    QVERIFY(!ref.isEmpty());
    const QString name = "nodes-" + QString(fault).replace(' ', '-');
    const QString out = dir_.filePath(name);
    // overwrite_output_dir: a launcher started again validates its config while output_dir
    // already holds the run (the round it joins says where to resume).
    const QString config = write_config(
        name, out, {"sequence_parallel_size: 2", "overwrite_output_dir: true"});
    const int port = studio::test::free_loopback_port();
    QVERIFY(port > 0);
    const QStringList flags{"--max-restarts", "2", "--rdzv-timeout",
                            fault == "node gone" ? "8" : "120"};
    const QStringList faults{fault == "rank" ? "STUDIO_INJECT_FAULT=crash@3#3%0"
                                             : "STUDIO_INJECT_FAULT=stall@4#2%0"};
    auto node0 = start_node(config, 0, port, flags, faults);
    auto node1 = start_node(config, 1, port, flags, faults);
    QByteArray err0;
    auto read0 = [&] {
      err0 += node0->readAllStandardError();
      return err0;
    };
    if (fault != "rank") {
      // Rank 2 stops itself at step 4; then node 1 dies whole.
      QTRY_VERIFY_WITH_TIMEOUT(step_losses(out).count(3) == 1, 120000);
      QTest::qWait(1500);
      QVERIFY(::kill(-static_cast<pid_t>(node1->processId()), SIGKILL) == 0);
      QVERIFY(node1->waitForFinished(10000));
      QTRY_VERIFY_WITH_TIMEOUT(read0().contains("studio-train: restart 1 of 2"), 60000);
      if (fault == "node back") node1 = start_node(config, 1, port, flags, faults);
    }
    QVERIFY(node0->waitForFinished(300000));
    read0();
    if (fault == "node gone") {
      QCOMPARE(node0->exitCode(), 1);
      const QJsonObject status = read_json(out + "/status.json");
      QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
      const QString reason = status["reason"].toString();
      QVERIFY2(reason.startsWith("restart 1: node(s) 1 of 2 did not join within 8 s (the "
                                 "rendezvous at 127.0.0.1:" + QString::number(port) +
                                 "): the run ends"),
               qPrintable(reason));
      return;
    }
    QVERIFY(node1->waitForFinished(60000));
    const QByteArray err1 = node1->readAllStandardError();
    QVERIFY2(node0->exitCode() == 0, read0().right(4000).constData());
    QVERIFY2(node1->exitCode() == 0, err1.right(4000).constData());
    if (fault == "node back")
      QVERIFY2(err1.contains("studio-train: node 1 joins the run at restart 1, where the other "
                             "nodes wait"),
               err1.right(3000).constData());
    std::vector<QJsonObject> restarts;
    for (const auto& e : train_runs::events(out))
      if (e["event"].toString() == "restart") restarts.push_back(e);
    QCOMPARE(int(restarts.size()), 1);
    const QJsonObject& e = restarts.front();
    if (fault == "rank") {
      // Node 1's own failure, which node 0's workers only saw as lost peers.
      QCOMPARE(e["failed_rank"].toInt(), 3);
      QVERIFY2(e["reason"].toString().contains("rank 3 was killed by signal 9 (SIGKILL)"),
               qPrintable(e["reason"].toString()));
    }
    const int step = e["step"].toInt();
    QCOMPARE(e["resume_from"].toString(),
             step > 0 ? out + QStringLiteral("/checkpoint-%1").arg(step) : QString());
    QCOMPARE(read_json(out + "/status.json")["state"].toString(), QStringLiteral("finished"));
    const auto want = step_losses(ref), got = step_losses(out);
    QCOMPARE(got.size(), want.size());
    for (const auto& [k, loss] : want)
      QVERIFY2(std::abs(got.at(k) - loss) <= 1e-6 * std::abs(loss),
               qPrintable(QStringLiteral("step %1: %2 vs %3").arg(k).arg(got.at(k)).arg(loss)));
    QVERIFY(max_relative_param_error(ref, out) <= 1e-6);
  }

  // Out of memory on rank 1 in step 3 (torch's error, injected): the run stops and says which
  // rank, step and phase, torch's words, the estimate and what lowers it.
  void outOfMemorySaysWhereAndWhatToChange() {
    const QString out = dir_.filePath("oom");
    const Run r = train("oom", out, {}, {"STUDIO_INJECT_FAULT=oom@3#1"});
    QVERIFY(r.code != 0);
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    const QString reason = status["reason"].toString();
    for (const char* part :
         {"rank 1 exited with code 1", "out of memory on rank 1 at step 3, in the forward of "
                                       "micro-batch 1 of 1: CUDA out of memory. Tried to allocate",
          "The memory estimate for this run is", "what lowers it (studio-train estimate shows each): ",
          "offload_optimizer: true", "ZeRO stage 3"})
      QVERIFY2(reason.contains(QString::fromUtf8(part)), qPrintable(part + QString(" not in: ") + reason));
    QVERIFY(QFile::exists(out + "/checkpoint-2/trainer_state.json"));  // what was saved stays
  }

  // Restarts run out (MAX_RESTARTS=1, LLaMA-Factory's variable, and two crashes): the second
  // failure ends the run, recorded as failed with the rank that failed.
  void restartsRunOut() {
    const QString out = dir_.filePath("restarts-run-out");
    const Run r = run_alone({"train", write_config("restarts-run-out", out, {}), "--nproc", "2"},
                            {"MAX_RESTARTS=1", "STUDIO_INJECT_FAULT=crash@3#1%0,crash@5#0%1"});
    QVERIFY2(r.code != 0, qPrintable(r.err.right(3000)));
    int restarts = 0;
    for (const auto& e : train_runs::events(out)) restarts += e["event"].toString() == "restart";
    QCOMPARE(restarts, 1);
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    QVERIFY2(status["reason"].toString().contains("rank 0 was killed by signal 9"),
             qPrintable(status["reason"].toString()));
  }
};

QTEST_MAIN(TestFaults)
#include "tst_faults.moc"
