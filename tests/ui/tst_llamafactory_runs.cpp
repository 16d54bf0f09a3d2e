// LLaMA-Factory runs in the studio, for real (issue #18 items 2 and 3): LLaMA-Factory 0.9.5 as
// scripts/setup.sh installs it (its own environment, STUDIO_LLAMAFACTORY_CLI) trains a tiny local
// model on the CPU for a few steps, launched by the studio's LocalLauncher through
// `studio-train supervise` with FORCE_TORCHRUN on 2 processes; the studio follows it (run state,
// steps, the dashboard's loss), overlays it on a studio-train run of the same config, and stops a
// long one with its whole process tree. Folders LLaMA-Factory left without the studio (no
// status.json) get their state from what Hugging Face's Trainer writes and how recently. The
// gradient norm its log lacks comes from the trainer_state.json the Trainer writes; a folder
// with only that file (a plain transformers or TRL run) is a run read from its log_history.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QtTest>

#include <set>

#include <signal.h>
#include <sys/time.h>

#include <qcustomplot.h>

#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "studio/config/llamafactory_target.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_info.h"

using namespace studio::ui;

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
const QString kCli = QStringLiteral(STUDIO_LLAMAFACTORY_CLI);

struct Proc {
  int code = -1;
  QString out, err;
};

Proc run(const QString& program, const QStringList& args, int timeoutMs = 120000) {
  QProcess p;
  p.start(program, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// Waits (processing events) until the run's state is no longer active, up to `ms`.
RunInfo waitForEnd(const QString& dir, int ms) {
  QDeadlineTimer deadline(ms);
  RunInfo info = readRunInfo(dir);
  while (!deadline.hasExpired()) {
    info = readRunInfo(dir);
    if (info.state != RunState::Starting && info.state != RunState::Running &&
        info.state != RunState::Unknown)
      return info;
    QTest::qWait(250);
  }
  return info;
}

// log_history's training entries (those with a loss) of a trainer_state.json.
QList<QJsonObject> logHistory(const QString& path) {
  QList<QJsonObject> out;
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return out;
  for (const QJsonValue& v : QJsonDocument::fromJson(f.readAll())["log_history"].toArray())
    if (v.toObject().contains("loss")) out << v.toObject();
  return out;
}

// Copies a folder tree (the LLaMA-Factory run's files), leaving out the names in `skip`.
bool copyTree(const QString& from, const QString& to, const QStringList& skip) {
  if (!QDir().mkpath(to)) return false;
  const QDir src(from);
  for (const QFileInfo& entry : src.entryInfoList(QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot)) {
    if (skip.contains(entry.fileName())) continue;
    const QString target = to + '/' + entry.fileName();
    if (entry.isDir() ? !copyTree(entry.filePath(), target, skip)
                      : !QFile::copy(entry.filePath(), target))
      return false;
  }
  return true;
}

QList<QJsonObject> trainerLog(const QString& dir) {
  QList<QJsonObject> out;
  QFile f(dir + "/trainer_log.jsonl");
  if (!f.open(QIODevice::ReadOnly)) return out;
  for (const QByteArray& line : f.readAll().split('\n'))
    if (!line.trimmed().isEmpty()) out << QJsonDocument::fromJson(line).object();
  return out;
}

void setMtime(const QString& path, qint64 secondsAgo) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::ReadWrite));
  QVERIFY(f.setFileTime(QDateTime::currentDateTime().addSecs(-secondsAgo),
                        QFileDevice::FileModificationTime));
}

}  // namespace

class TestLlamaFactoryRuns : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  QString model_;

  // The demo's SFT data on a tiny Qwen2 model, as a LLaMA-Factory user writes it.
  studio::RunConfig config(int maxSteps, const QStringList& extra = {}) {
    QStringList lines{"model_name_or_path: " + model_,
                      "stage: sft",
                      "do_train: true",
                      "finetuning_type: full",
                      "dataset: demo_sft",
                      "dataset_dir: " + kSource + "/resources/demo/data",
                      "template: qwen",
                      "cutoff_len: 128",
                      "max_samples: 64",
                      "preprocessing_num_workers: 1",
                      "output_dir: unused",
                      "logging_steps: 1",
                      "save_steps: 4",
                      "per_device_train_batch_size: 2",
                      "learning_rate: 1.0e-3",
                      "lr_scheduler_type: cosine",
                      QStringLiteral("max_steps: %1").arg(maxSteps),
                      "bf16: false",
                      "report_to: none",
                      "seed: 7"};
    lines << extra;
    const auto loaded = studio::load_config_string(lines.join('\n').toStdString(), "test.yaml");
    return loaded.config;
  }

  QString launch(LocalLauncher& launcher, const studio::RunConfig& cfg, LaunchRequest::Trainer t,
                 int nproc, QString* error) {
    LaunchRequest req;
    req.config = cfg;
    req.name = t == LaunchRequest::Trainer::LlamaFactory ? "lf" : "studio";
    req.nproc = nproc;
    req.trainer = t;
    req.llamafactoryCli = kCli;
    return launcher.launch(req, error);
  }

 private Q_SLOTS:
  void initTestCase();
  void unknownKeysAreThePackages();
  void differentDefaultsAreThePackages();
  void launchedFollowedAndOverlaid();
  void stopEndsTheWholeTree();
  void refusesWhatLlamaFactoryCannotRun();
  void attachedFolderStates();
};

void TestLlamaFactoryRuns::initTestCase() {
  QVERIFY(tmp_.isValid());
  QVERIFY2(QFileInfo(kCli).isExecutable(),
           qPrintable("no llamafactory-cli at " + kCli + ": run scripts/setup.sh"));
  const QString src = tmp_.filePath("model-src");
  QVERIFY(QDir().mkpath(src));
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    QVERIFY(QFile::copy(kSource + "/resources/demo/model/" + f, src + "/" + f));
  model_ = tmp_.filePath("model");
  const Proc p = run(QStringLiteral(STUDIO_TRAIN_EXE),
                     {"init-model", "--config", src + "/config.json", "--out", model_, "--seed", "7"});
  QVERIFY2(p.code == 0, qPrintable(p.err));
}

// A Python script over LLaMA-Factory's argument dataclasses (`classes`), `body` after the imports.
static QString lfArgumentsScript(const QString& body) {
  return "import dataclasses, enum, json\n"
         "from llamafactory.hparams import ModelArguments, DataArguments, FinetuningArguments, "
         "GeneratingArguments, TrainingArguments\n"
         "classes = (ModelArguments, DataArguments, FinetuningArguments, GeneratingArguments, "
         "TrainingArguments)\n" + body;
}

// The keys of the studio's table that LLaMA-Factory's argument dataclasses lack are exactly the
// ones the LLaMA-Factory YAML leaves out.
void TestLlamaFactoryRuns::unknownKeysAreThePackages() {
  const QString python = QFileInfo(kCli).absolutePath() + "/python";
  const Proc p = run(python, {"-c", lfArgumentsScript("print(json.dumps(sorted({f.name for c in "
                                                      "classes for f in dataclasses.fields(c)})))")});
  QVERIFY2(p.code == 0, qPrintable(p.err));
  std::set<std::string> lf;
  for (const auto& v : QJsonDocument::fromJson(p.out.toUtf8()).array())
    lf.insert(v.toString().toStdString());
  QVERIFY(lf.count("model_name_or_path") && lf.count("cutoff_len") && lf.count("pref_beta"));
  std::set<std::string> unknown, listed;
  for (const auto& f : studio::config_fields())
    if (!lf.count(std::string(f.key))) unknown.insert(std::string(f.key));
  for (auto k : studio::llamafactory_unknown_keys()) listed.insert(std::string(k));
  QCOMPARE(listed, unknown);
}

// The keys whose default LLaMA-Factory 0.9.5 (with transformers' TrainingArguments) sets to
// another value than studio-train are exactly the ones a LLaMA-Factory YAML writes even at
// studio-train's default; and such a file does write them.
void TestLlamaFactoryRuns::differentDefaultsAreThePackages() {
  const QString python = QFileInfo(kCli).absolutePath() + "/python";
  const Proc p = run(python, {"-c", lfArgumentsScript("out = {}\n"
                                    "for c in classes:\n"
                                    "  for f in dataclasses.fields(c):\n"
                                    "    d = f.default\n"
                                    "    if d is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:\n"
                                    "      d = f.default_factory()\n"
                                    "    if isinstance(d, enum.Enum): d = d.value\n"
                                    "    if d is dataclasses.MISSING or d is None: continue\n"
                                    "    try: json.dumps(d)\n"
                                    "    except TypeError: continue\n"
                                    "    out[f.name] = d\n"
                                    "print(json.dumps(out))\n")});
  QVERIFY2(p.code == 0, qPrintable(p.err));
  const QJsonObject lf = QJsonDocument::fromJson(p.out.toUtf8()).object();
  QVERIFY(lf.contains("cutoff_len") && lf.contains("learning_rate"));
  // Ours, as the YAML would say it; LLaMA-Factory's as its dataclass field says it.
  auto text = [](const YAML::Node& n) -> QString {
    if (n.IsSequence()) {
      QStringList parts;
      for (const auto& item : n) parts << QString::fromStdString(item.as<std::string>());
      return parts.join(',');
    }
    return n.IsScalar() ? QString::fromStdString(n.Scalar()) : QString();
  };
  auto same = [](const QString& ours, const QJsonValue& theirs) {
    if (theirs.isBool()) return ours == (theirs.toBool() ? "true" : "false");
    if (theirs.isDouble()) {
      bool ok = false;
      const double v = ours.toDouble(&ok);
      return ok && v == theirs.toDouble();
    }
    if (theirs.isArray()) {
      QStringList parts;
      for (const auto& item : theirs.toArray()) parts << item.toVariant().toString();
      return ours == parts.join(',');
    }
    return ours == theirs.toString();
  };
  const studio::RunConfig defaults;
  std::set<std::string> differ, listed;
  QStringList said;
  for (const auto& f : studio::config_fields()) {
    const QString key = QString::fromStdString(std::string(f.key));
    if (!studio::llamafactory_knows(f.key) || !lf.contains(key)) continue;
    const YAML::Node node = f.to_node(defaults);
    if (!node.IsDefined() || node.IsNull()) continue;  // unset here: nothing to compare
    if (!same(text(node), lf[key])) {
      differ.insert(std::string(f.key));
      said << key + ": " + text(node) + " here, " + lf[key].toVariant().toString() + " there";
    }
  }
  for (auto k : studio::llamafactory_different_defaults()) listed.insert(std::string(k));
  QVERIFY2(differ == listed, qPrintable(said.join('\n')));
  // A LLaMA-Factory YAML of a config at those defaults still says them.
  studio::RunConfig cfg;
  cfg.model_name_or_path = "m";
  cfg.template_name = "qwen";
  const QString yaml = QString::fromStdString(studio::to_yaml(cfg, studio::YamlStyle::LlamaFactory));
  for (const auto& key : listed)
    QVERIFY2(yaml.contains(QString::fromStdString(key) + ":"), qPrintable(yaml));
  QVERIFY2(yaml.contains("finetuning_type: full"), qPrintable(yaml));
}

// LLaMA-Factory on 2 processes (torchrun, Gloo on the CPU) trains 8 steps, launched as a studio
// run; the studio sees it finish at step 8 of 8 and draws its 8 losses; a studio-train run of
// the same config overlays it on the same axes.
void TestLlamaFactoryRuns::launchedFollowedAndOverlaid() {
  LocalLauncher launcher;
  launcher.setEngineProgram(QStringLiteral(STUDIO_TRAIN_EXE));
  launcher.setRunsRoot(tmp_.filePath("runs"));
  QString error;
  const studio::RunConfig cfg = config(8);
  const QString lfDir = launch(launcher, cfg, LaunchRequest::Trainer::LlamaFactory, 2, &error);
  QVERIFY2(!lfDir.isEmpty(), qPrintable(error));
  // The YAML LLaMA-Factory reads has none of the studio's own keys.
  const auto saved = studio::load_config_file((lfDir + "/config.yaml").toStdString());
  QVERIFY(saved.ok());
  for (const auto& [key, pos] : saved.config.source.key_pos)
    QVERIFY2(studio::llamafactory_knows(key), key.c_str());

  RunDashboard dash;
  dash.showRun(lfDir);
  const RunInfo done = waitForEnd(lfDir, 240000);
  QVERIFY2(done.state == RunState::Finished,
           qPrintable(done.stateText + ": " + done.reason + "\n" +
                      QString::fromUtf8([&] {
                        QFile f(lfDir + "/train.log");
                        return f.open(QIODevice::ReadOnly) ? f.readAll().right(3000) : QByteArray();
                      }())));
  QCOMPARE(done.lastStep, qint64(8));
  QCOMPARE(done.maxSteps, qint64(8));
  const auto log = trainerLog(lfDir);
  QVERIFY(log.size() >= 8);
  QVERIFY(QFileInfo::exists(lfDir + "/checkpoint-8/trainer_state.json"));

  QTRY_VERIFY_WITH_TIMEOUT(dash.series(lfDir) && dash.series(lfDir)->size() == 8, 10000);
  const RunSeries& lf = *dash.series(lfDir);
  QCOMPARE(lf.facts().totalSteps, qint64(8));
  for (int i = 0; i < 8; ++i)
    QCOMPARE(lf.values(Metric::Loss)[std::size_t(i)], log[i]["loss"].toDouble());
  // The gradient norm is not in trainer_log.jsonl: it comes from the Trainer's own state, the
  // final trainer_state.json, step for step.
  const QList<QJsonObject> history = logHistory(lfDir + "/trainer_state.json");
  QCOMPARE(history.size(), 8);
  QVERIFY(!log[0].contains("grad_norm"));
  QTRY_VERIFY_WITH_TIMEOUT(lf.values(Metric::GradNorm).size() == 8 &&
                               std::isfinite(lf.values(Metric::GradNorm)[7]),
                           10000);
  for (int i = 0; i < 8; ++i) {
    QCOMPARE(history[i]["step"].toInt(), i + 1);
    QCOMPARE(lf.values(Metric::GradNorm)[std::size_t(i)], history[i]["grad_norm"].toDouble());
  }

  // The same folder as a transformers run leaves it (no trainer_log.jsonl): read from the
  // newest trainer_state.json, with the same losses, and finished by train_results.json.
  const QString hfDir = tmp_.filePath("hf-only");
  QVERIFY(copyTree(lfDir, hfDir, {"trainer_log.jsonl", "running_log.txt", "status.json",
                                  "studio-launch.json", "train.log"}));
  QFile::remove(hfDir + "/trainer_state.json");  // as during training: checkpoints only
  QFile::remove(hfDir + "/train_results.json");
  QFile::remove(hfDir + "/all_results.json");
  QVERIFY(isRunFolder(hfDir));
  RunInfo hf = readRunInfo(hfDir);
  QCOMPARE(hf.lastStep, qint64(8));
  QCOMPARE(hf.maxSteps, qint64(8));
  QCOMPARE(hf.state, RunState::Finished);
  QVERIFY2(hf.reason.contains("Hugging Face Trainer run (checkpoint-8/trainer_state.json)"),
           qPrintable(hf.reason));
  RunDashboard hfDash;
  hfDash.showRun(hfDir);
  QTRY_VERIFY_WITH_TIMEOUT(hfDash.series(hfDir) && hfDash.series(hfDir)->size() == 8, 10000);
  for (int i = 0; i < 8; ++i) {
    QCOMPARE(hfDash.series(hfDir)->values(Metric::Loss)[std::size_t(i)], log[i]["loss"].toDouble());
    QCOMPARE(hfDash.series(hfDir)->values(Metric::GradNorm)[std::size_t(i)],
             history[i]["grad_norm"].toDouble());
  }

  // studio-train, same config and model: overlaid, both curves on the loss chart.
  const QString ourDir = launch(launcher, cfg, LaunchRequest::Trainer::StudioTrain, 1, &error);
  QVERIFY2(!ourDir.isEmpty(), qPrintable(error));
  QCOMPARE(waitForEnd(ourDir, 240000).state, RunState::Finished);
  dash.addOverlayRun(ourDir);
  QTRY_VERIFY_WITH_TIMEOUT(dash.series(ourDir) && dash.series(ourDir)->size() == 8, 10000);
  dash.flush();
  QCOMPARE(int(dash.runs().size()), 2);
  QVERIFY(!dash.graphs(studio::ui::ChartKind::Loss, ourDir).empty());
  QVERIFY(!dash.graphs(studio::ui::ChartKind::Loss, lfDir).empty());
  // Both start from the same weights on the same data: the first losses agree closely.
  const double a = lf.values(Metric::Loss)[0], b = dash.series(ourDir)->values(Metric::Loss)[0];
  QVERIFY2(std::abs(a - b) < 0.05 * std::abs(a), qPrintable(QString("%1 vs %2").arg(a).arg(b)));
}

// Stop on a long LLaMA-Factory run: the supervisor, torchrun and both workers end, and the
// status says stopped with exit code 130.
void TestLlamaFactoryRuns::stopEndsTheWholeTree() {
  LocalLauncher launcher;
  launcher.setEngineProgram(QStringLiteral(STUDIO_TRAIN_EXE));
  launcher.setRunsRoot(tmp_.filePath("runs-stop"));
  QString error;
  const QString dir =
      launch(launcher, config(100000, {"save_steps: 100000"}), LaunchRequest::Trainer::LlamaFactory,
             2, &error);
  QVERIFY2(!dir.isEmpty(), qPrintable(error));
  QTRY_VERIFY_WITH_TIMEOUT(trainerLog(dir).size() >= 2, 180000);
  QCOMPARE(readRunInfo(dir).state, RunState::Running);
  QSignalSpy finished(&launcher, &LocalLauncher::stopFinished);
  launcher.stop(dir, 20);
  QVERIFY(finished.wait(60000));
  const RunInfo info = readRunInfo(dir);
  QCOMPARE(info.state, RunState::Stopped);
  QFile status(dir + "/status.json");
  QVERIFY(status.open(QIODevice::ReadOnly));
  QCOMPARE(QJsonDocument::fromJson(status.readAll()).object()["exit_code"].toInt(), 130);
  // Nothing of it is left: no process runs with its config.
  const Proc ps = run(QStringLiteral("pgrep"), {"-f", dir + "/config.yaml"});
  QVERIFY2(ps.out.trimmed().isEmpty(), qPrintable(ps.out));
}

void TestLlamaFactoryRuns::refusesWhatLlamaFactoryCannotRun() {
  LocalLauncher launcher;
  launcher.setEngineProgram(QStringLiteral(STUDIO_TRAIN_EXE));
  launcher.setRunsRoot(tmp_.filePath("runs-refused"));
  QString error;
  QVERIFY(launch(launcher, config(8, {"sequence_parallel_size: 2"}),
                 LaunchRequest::Trainer::LlamaFactory, 2, &error)
              .isEmpty());
  QVERIFY2(error.contains("sequence_parallel_size: 2 is not a LLaMA-Factory 0.9.5 key") &&
               error.contains("studio-train"),
           qPrintable(error));
  LaunchRequest missing;
  missing.config = config(8);
  missing.trainer = LaunchRequest::Trainer::LlamaFactory;
  missing.llamafactoryCli = QStringLiteral("/nonexistent/bin/llamafactory-cli");
  QVERIFY(launcher.launch(missing, &error).isEmpty());
  QVERIFY2(error.contains("/nonexistent/bin/llamafactory-cli was not found"), qPrintable(error));
  // Nothing left behind.
  QCOMPARE(QDir(tmp_.filePath("runs-refused")).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size(), 0);
}

// A folder LLaMA-Factory wrote on its own (no status.json): finished once Trainer saved its
// results or the last step is the last; else running while recently written, else unknown.
void TestLlamaFactoryRuns::attachedFolderStates() {
  const QString dir = tmp_.filePath("attached");
  QVERIFY(QDir().mkpath(dir));
  QStringList lines;
  for (int step = 1; step <= 8; ++step)
    lines << QStringLiteral(R"({"current_steps": %1, "total_steps": 8, "loss": %2, "lr": 0.001, )"
                            R"("epoch": 0.1, "percentage": 12.5, "elapsed_time": "0:00:0%1", )"
                            R"("remaining_time": "0:00:01"})")
                 .arg(step)
                 .arg(8.0 - 0.1 * step);
  auto write = [&](int steps) {
    QFile f(dir + "/trainer_log.jsonl");
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write((lines.mid(0, steps).join('\n') + '\n').toUtf8());
  };
  write(8);
  QFile(dir + "/train_results.json").open(QIODevice::WriteOnly);
  RunInfo info = readRunInfo(dir);
  QCOMPARE(info.state, RunState::Finished);
  QVERIFY2(info.reason.contains("train_results.json"), qPrintable(info.reason));
  QCOMPARE(info.maxSteps, qint64(8));

  QFile::remove(dir + "/train_results.json");
  info = readRunInfo(dir);
  QCOMPARE(info.state, RunState::Finished);
  QVERIFY2(info.reason.contains("reached step 8 of 8"), qPrintable(info.reason));

  write(3);
  info = readRunInfo(dir);
  QCOMPARE(info.state, RunState::Running);
  QVERIFY2(info.reason.contains("at step 3 of 8"), qPrintable(info.reason));

  setMtime(dir + "/trainer_log.jsonl", 3600);
  QFile running(dir + "/running_log.txt");
  QVERIFY(running.open(QIODevice::WriteOnly));
  running.write("[INFO|2026-11-25 10:00:00] trainer.py:1 >> step 3\n");
  running.close();
  setMtime(dir + "/running_log.txt", 3600);
  info = readRunInfo(dir);
  QCOMPARE(info.state, RunState::Unknown);
  QVERIFY2(info.reason.contains("nothing written for 60 min"), qPrintable(info.reason));
  QCOMPARE(info.logPath, dir + "/running_log.txt");

  // A transformers run half way (checkpoint-4 of 8 written just now): running, read from there.
  const QString hf = tmp_.filePath("hf-running");
  QVERIFY(QDir().mkpath(hf + "/checkpoint-4"));
  QFile state(hf + "/checkpoint-4/trainer_state.json");
  QVERIFY(state.open(QIODevice::WriteOnly));
  state.write(R"({"global_step": 4, "max_steps": 8, "log_history": [)"
              R"({"loss": 2.0, "grad_norm": 1.5, "learning_rate": 0.001, "step": 2}, )"
              R"({"loss": 1.8, "grad_norm": 1.2, "learning_rate": 0.001, "step": 4}]})");
  state.close();
  QVERIFY(isRunFolder(hf));
  QVERIFY(!isRunFolder(hf + "/checkpoint-4"));  // part of the run, not one
  info = readRunInfo(hf);
  QCOMPARE(info.state, RunState::Running);
  QVERIFY2(info.reason.contains("Hugging Face Trainer run (checkpoint-4/trainer_state.json) at "
                                "step 4 of 8"),
           qPrintable(info.reason));
  QCOMPARE(info.lastLoss, 1.8);
}

QTEST_MAIN(TestLlamaFactoryRuns)
#include "tst_llamafactory_runs.moc"
