// LLaMA-Factory's trainer_log.jsonl read as events (runs/trainer_log.cpp): LogCallback's lines,
// odd fields under the same tolerant rule as events.jsonl, and the file picked by its name.
// Hugging Face's trainer_state.json (its log_history) read the same way, found in a run folder
// or its newest checkpoint-N, and read again whole as each checkpoint writes a newer one.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QThread>

#include <utime.h>
#include <QtTest>

#include <cmath>
#include <limits>

#include "studio/runs/events.h"

using namespace studio;

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

double nan_value() { return std::nan(""); }

std::string_view view(const QByteArray& b) {
  return std::string_view(b.constData(), static_cast<std::size_t>(b.size()));
}

// A trainer_state.json as transformers' TrainerState.save_to_json writes it (indent 2, keys
// sorted), with `steps` logged steps of loss 3 - 0.1 * step and grad norm 10 + step, an eval
// every 4 steps, and the closing summary when `final`.
QByteArray trainerState(int steps, int maxSteps, bool final = false) {
  QStringList history;
  for (int step = 1; step <= steps; ++step) {
    history << QStringLiteral(R"({"epoch": %1, "grad_norm": %2, "learning_rate": 0.001, "loss": %3, "step": %4})")
                   .arg(step * 0.25)
                   .arg(10.0 + step)
                   .arg(3.0 - 0.1 * step)
                   .arg(step);
    if (step % 4 == 0)
      history << QStringLiteral(R"({"epoch": %1, "eval_loss": %2, "eval_runtime": 0.5, "eval_samples_per_second": 16.0, "eval_steps_per_second": 2.0, "step": %3})")
                     .arg(step * 0.25)
                     .arg(2.0 - 0.1 * step)
                     .arg(step);
  }
  if (final)
    history << QStringLiteral(R"({"epoch": %1, "step": %2, "total_flos": 1234.0, "train_loss": 2.5, "train_runtime": 12.3, "train_samples_per_second": 5.2, "train_steps_per_second": 0.65})")
                   .arg(steps * 0.25)
                   .arg(steps);
  return QStringLiteral("{\n  \"best_global_step\": null,\n  \"best_metric\": null,\n  \"epoch\": %1,\n"
                        "  \"eval_steps\": 4,\n  \"global_step\": %2,\n  \"is_world_process_zero\": true,\n"
                        "  \"log_history\": [\n    %3\n  ],\n  \"logging_steps\": 1,\n  \"max_steps\": %4,\n"
                        "  \"num_train_epochs\": 2,\n  \"save_steps\": 4,\n  \"total_flos\": 1234.0,\n"
                        "  \"train_batch_size\": 2,\n  \"trial_name\": null,\n  \"trial_params\": null\n}\n")
      .arg(steps * 0.25)
      .arg(steps)
      .arg(history.join(QStringLiteral(",\n    ")))
      .arg(maxSteps)
      .toUtf8();
}

void writeFile(const QString& path, const QByteArray& bytes, qint64 secondsAgo = 0) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  QCOMPARE(f.write(bytes), qint64(bytes.size()));
  f.close();
  const time_t when = time(nullptr) - secondsAgo;
  const utimbuf times{when, when};
  QCOMPARE(::utime(QFile::encodeName(path).constData(), &times), 0);
}

}  // namespace

class TestTrainerLog : public QObject {
  Q_OBJECT

 private slots:
  void trainerLogLines_data();
  void trainerLogLines();
  void trainerLogFile();
  void trainerStateDocuments_data();
  void trainerStateDocuments();
  void trainerStateFolder();
  void pythonNonFinite_data();
  void pythonNonFinite();
};

// LLaMA-Factory's trainer_log.jsonl lines as written by its LogCallback (keys as in
// ../shared/reference/monitoring-and-remote.md), and the same lines with odd fields: each read
// as our step/eval events, an odd field converted or dropped and the rest of the line kept.
void TestTrainerLog::trainerLogLines_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<QString>("kinds");   // the events made: "step", "eval", "step eval", ""
  QTest::addColumn<double>("loss");     // the step's (NaN: none)
  QTest::addColumn<double>("elapsed");
  QTest::addColumn<QString>("issue");   // the first issue's description, "" when none
  QTest::addColumn<QString>("error");   // the line is not read: why
  const QByteArray sft =
      R"({"current_steps": 10, "total_steps": 100, "loss": 1.2345, "lr": 4.5e-05, "epoch": 0.33, )"
      R"("percentage": 10.0, "elapsed_time": "0:01:02", "remaining_time": "0:09:18", )"
      R"("throughput": 1234.5, "total_tokens": 81920})";
  const double nan = std::nan("");
  QTest::newRow("sft step") << sft << "step" << 1.2345 << 62.0 << "" << "";
  QTest::newRow("eval") << QByteArray(R"({"current_steps": 20, "total_steps": 100, "eval_loss": 0.9, "epoch": 0.66, "percentage": 20.0, "elapsed_time": "0:02:10", "remaining_time": "0:08:40"})")
                        << "eval" << nan << nan << "" << "";
  QTest::newRow("dpo step with vram")
      << QByteArray(R"({"current_steps": 5, "total_steps": 50, "loss": 0.6931, "reward": 0.12, "accuracy": 0.75, "lr": 1e-06, "epoch": 0.1, "percentage": 10.0, "elapsed_time": "1 day, 2:03:04", "remaining_time": "9 days, 0:00:00", "vram_allocated": 12.5, "vram_reserved": 16.0})")
      << "step" << 0.6931 << 93784.0 << "" << "";
  QTest::newRow("the closing summary") << QByteArray(R"({"current_steps": 100, "total_steps": 100, "epoch": 3.0, "percentage": 100.0, "elapsed_time": "0:10:00", "remaining_time": "0:00:00"})")
                                       << "" << nan << nan << "" << "";
  QTest::newRow("loss as text: converted")
      << QByteArray(R"({"current_steps": 10, "loss": "1.5", "lr": 1e-05, "elapsed_time": "0:00:10"})")
      << "step" << 1.5 << 10.0 << "field 'loss': expected a number, got string \"1.5\": read as 1.5" << "";
  QTest::newRow("loss unreadable: dropped, the rest kept")
      << QByteArray(R"({"current_steps": 10, "loss": [1], "lr": 1e-05, "elapsed_time": "0:00:10"})")
      << "step" << nan << 10.0 << "field 'loss': expected a number, got array: dropped" << "";
  QTest::newRow("elapsed in seconds: converted")
      << QByteArray(R"({"current_steps": 10, "loss": 2.0, "elapsed_time": 75.5})")
      << "step" << 2.0 << 75.5 << "field 'elapsed_time': expected a duration \"H:MM:SS\", got number 75.5: read as 75.5 s" << "";
  QTest::newRow("elapsed garbled: dropped")
      << QByteArray(R"({"current_steps": 10, "loss": 2.0, "elapsed_time": "soon"})")
      << "step" << 2.0 << nan << "field 'elapsed_time': expected a duration \"H:MM:SS\", got string \"soon\": dropped" << "";
  QTest::newRow("steps as text: converted")
      << QByteArray(R"({"current_steps": "10", "loss": 2.0})")
      << "step" << 2.0 << nan << "field 'current_steps': expected an integer, got string \"10\": read as 10" << "";
  QTest::newRow("no steps: not read")
      << QByteArray(R"({"loss": 2.0})") << "" << nan << nan << ""
      << "trainer_log line: missing field 'current_steps'";
  QTest::newRow("steps unreadable: not read")
      << QByteArray(R"({"current_steps": "ten", "loss": 2.0})") << "" << nan << nan << ""
      << "trainer_log line: field 'current_steps': expected an integer, got string";
  QTest::newRow("not an object") << QByteArray("[1, 2]") << "" << nan << nan << ""
                                 << "not a JSON object but array";
}

void TestTrainerLog::trainerLogLines() {
  QFETCH(QByteArray, line);
  QFETCH(QString, kinds);
  QFETCH(double, loss);
  QFETCH(double, elapsed);
  QFETCH(QString, issue);
  QFETCH(QString, error);
  EventStreamParser parser(EventStreamParser::kDefaultMaxLineBytes, LineFormat::TrainerLog);
  const std::vector<Event> events = parser.feed(view(line + "\n"));
  if (!error.isEmpty()) {
    QVERIFY(events.empty());
    QCOMPARE(parser.bad_lines(), std::uint64_t{1});
    QVERIFY2(qs(parser.problems().first_bad_reason).startsWith(error),
             parser.problems().first_bad_reason.c_str());
    return;
  }
  QCOMPARE(parser.bad_lines(), std::uint64_t{0});
  QStringList got;
  for (const Event& e : events) got << qs(event_kind_name(e.kind));
  QCOMPARE(got.join(' '), kinds);
  if (const auto* step = events.empty() ? nullptr : events[0].get<StepEvent>()) {
    QCOMPARE(std::isnan(step->loss), std::isnan(loss));
    if (!std::isnan(loss)) QCOMPARE(step->loss, loss);
    QCOMPARE(std::isnan(step->elapsed), std::isnan(elapsed));
    if (!std::isnan(elapsed)) QCOMPARE(step->elapsed, elapsed);
    QCOMPARE(step->step, std::int64_t{QTest::currentDataTag() == QByteArray("dpo step with vram") ? 5 : 10});
    if (QTest::currentDataTag() == QByteArray("sft step")) {
      QCOMPARE(step->lr, 4.5e-05);
      QCOMPARE(step->epoch, 0.33);
      QCOMPARE(step->tokens_per_sec, 1234.5);
      QVERIFY(std::isnan(step->time));  // LLaMA-Factory logs no wall time
    }
    if (QTest::currentDataTag() == QByteArray("dpo step with vram")) {
      QVERIFY(step->dpo.has_value());
      QCOMPARE(step->dpo->rewards_chosen, 0.12);
      QCOMPARE(step->dpo->rewards_accuracies, 0.75);
      QCOMPARE(int(step->gpus.size()), 1);
      QCOMPARE(step->gpus[0].allocated_mib, 12.5 * 1024);
      QCOMPARE(step->gpus[0].reserved_mib, 16.0 * 1024);
    }
  }
  if (kinds == "eval") QCOMPARE(events[0].get<EvalEvent>()->loss, 0.9);
  if (issue.isEmpty()) {
    for (const Event& e : events) QVERIFY(e.issues.empty());
    QVERIFY(!parser.problems().any());
  } else {
    QCOMPARE(int(events[0].issues.size()), 1);
    QCOMPARE(qs(events[0].issues[0].describe()), issue);
    QCOMPARE(parser.problems().lines_with_issues, std::uint64_t{1});
  }
}

// A file named trainer_log.jsonl is read as LLaMA-Factory's (the reader picks the format by the
// name), and a run folder that only LLaMA-Factory wrote reads its events from there.
void TestTrainerLog::trainerLogFile() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string folder = dir.path().toStdString();
  QCOMPARE(run_events_file(folder), folder + "/events.jsonl");  // nothing yet: ours
  QFile f(dir.filePath("trainer_log.jsonl"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  for (int step = 1; step <= 30; ++step)
    f.write(QStringLiteral("{\"current_steps\": %1, \"total_steps\": 30, \"loss\": %2, "
                           "\"lr\": 1e-05, \"epoch\": 0.1, \"percentage\": 10.0, "
                           "\"elapsed_time\": \"0:00:%3\", \"remaining_time\": \"0:00:01\"}\n")
                .arg(step)
                .arg(step == 7 ? QStringLiteral("\"x\"") : QString::number(3.0 - step * 0.05))
                .arg(step, 2, 10, QLatin1Char('0'))
                .toUtf8());
  f.close();
  QCOMPARE(line_format_of(dir.filePath("trainer_log.jsonl").toStdString()), LineFormat::TrainerLog);
  QCOMPARE(line_format_of("/x/events.jsonl"), LineFormat::Events);
  QCOMPARE(run_events_file(folder), folder + "/trainer_log.jsonl");
  EventFileReader reader(run_events_file(folder));
  const EventPollResult r = reader.poll();
  QVERIFY(r.error.empty());
  QCOMPARE(int(r.events.size()), 30);
  QCOMPARE(r.events[6].get<StepEvent>()->step, std::int64_t{7});
  QVERIFY(std::isnan(r.events[6].get<StepEvent>()->loss));
  QCOMPARE(r.events[29].get<StepEvent>()->elapsed, 30.0);
  QCOMPARE(qs(reader.parser().problems().summary(kTrainerLogFileName)),
           QStringLiteral("trainer_log.jsonl: 1 line had fields not as the format says, kept "
                          "without them or converted (0 fields converted, 1 dropped; first: line "
                          "7: field 'loss': expected a number, got string \"x\": dropped)"));
  // Once our events.jsonl is there, it is the one read.
  QFile ours(dir.filePath("events.jsonl"));
  QVERIFY(ours.open(QIODevice::WriteOnly));
  ours.close();
  QCOMPARE(run_events_file(folder), folder + "/events.jsonl");
}

// log_history entries as transformers and TRL write them: training steps (with the gradient
// norm LLaMA-Factory's log lacks), evals, DPO's rewards/*, the closing summary, and the odd
// entry, tolerated as trainer_log lines are.
void TestTrainerLog::trainerStateDocuments_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<QString>("events");  // "kind:step" each, space separated
  QTest::addColumn<double>("gradNorm");  // the first step event's (NaN: none)
  QTest::addColumn<double>("rejected");  // its rewards/rejected (NaN: none)
  QTest::addColumn<QString>("problems");  // ReadProblems::summary("trainer_state.json")
  QTest::addColumn<QString>("error");     // not read at all: why
  const double nan = std::nan("");
  QTest::newRow("sft, with evals and the summary")
      << trainerState(5, 10, true) << "step:1 step:2 step:3 step:4 eval:4 step:5" << 11.0 << nan
      << "" << "";
  QTest::newRow("dpo (TRL's keys)")
      << QByteArray(R"({"global_step": 2, "max_steps": 2, "log_history": [{"epoch": 0.5, "grad_norm": 3.5, "learning_rate": 5e-07, "logits/chosen": -1.2, "logits/rejected": -1.3, "logps/chosen": -40.5, "logps/rejected": -42.0, "loss": 0.6931, "rewards/accuracies": 0.5, "rewards/chosen": 0.01, "rewards/margins": 0.015, "rewards/rejected": -0.005, "step": 1}, {"epoch": 1.0, "loss": 0.69, "learning_rate": 1e-06, "step": 2}]})")
      << "step:1 step:2" << 3.5 << -0.005 << "" << "";
  QTest::newRow("an entry without a step: skipped, the rest kept")
      << QByteArray(R"({"max_steps": 3, "log_history": [{"loss": 2.0, "learning_rate": 0.1}, {"loss": 1.5, "grad_norm": 2.0, "learning_rate": 0.1, "step": 2}, 7]})")
      << "step:2" << 2.0 << nan
      << "trainer_state.json: 2 lines skipped whole (first: line 1: log_history[0]: missing field "
         "'step'; last: line 3: log_history[2]: not a JSON object but number)"
      << "";
  QTest::newRow("grad_norm as text: converted")
      << QByteArray(R"({"log_history": [{"grad_norm": "NaN", "loss": 1.0, "step": 1}, {"grad_norm": "4.5", "loss": 0.9, "step": 2}]})")
      << "step:1 step:2" << nan << nan
      << "trainer_state.json: 2 lines had fields not as the format says, kept without them or "
         "converted (2 fields converted, 0 dropped; first: line 1: field 'grad_norm': expected "
         "a number, got string \"NaN\": read as NaN)"
      << "";
  QTest::newRow("ours: no log_history")
      << QByteArray(R"({"step": 40, "epoch": 1, "data_position": 320, "scheduler": {"last_step": 40}})")
      << "" << nan << nan << "" << "no log_history array: not a Hugging Face Trainer state";
  QTest::newRow("cut short while written")
      << trainerState(3, 10).left(200) << "" << nan << nan << ""
      << "not valid JSON (a trainer_state.json being written, or damaged): line 9, column 39: a "
         "string in double quotes is not valid: missing closing quote";
  QTest::newRow("not an object") << QByteArray("[1, 2]") << "" << nan << nan << ""
                                 << "not a JSON object but array";
}

void TestTrainerLog::trainerStateDocuments() {
  QFETCH(QByteArray, text);
  QFETCH(QString, events);
  QFETCH(double, gradNorm);
  QFETCH(double, rejected);
  QFETCH(QString, problems);
  QFETCH(QString, error);
  std::vector<Event> out;
  std::string why;
  ReadProblems found;
  const bool ok = parse_trainer_state(view(text), out, why, found);
  QCOMPARE(ok, error.isEmpty());
  QCOMPARE(qs(why), error);
  QStringList kinds;
  for (const Event& e : out) kinds << QStringLiteral("%1:%2").arg(event_kind_name(e.kind)).arg(*e.step());
  QCOMPARE(kinds.join(' '), events);
  QCOMPARE(qs(found.summary(kTrainerStateFileName)), problems);
  if (out.empty()) return;
  const auto* first = out.front().get<StepEvent>();
  QVERIFY(first != nullptr);
  QVERIFY(!out.front().amends);
  if (std::isnan(gradNorm))
    QVERIFY(std::isnan(first->grad_norm));
  else
    QCOMPARE(first->grad_norm, gradNorm);
  const double r = first->dpo ? first->dpo->rewards_rejected : nan_value();
  if (std::isnan(rejected))
    QVERIFY(std::isnan(r));
  else
    QCOMPARE(r, rejected);
  if (events.startsWith("step:1 step:2 step:3")) {  // the generated SFT state
    QCOMPARE(first->loss, 2.9);
    QCOMPARE(first->lr, 0.001);
    QCOMPARE(first->epoch, 0.25);
    QCOMPARE(first->total_steps, std::int64_t{10});
    QCOMPARE(out[4].get<EvalEvent>()->loss, 1.6);
  }
}

// A transformers run folder: trainer_state.json in each checkpoint-N/ while it trains, at the
// top at the end. The newest one is read (ours, without log_history, never), and the reader
// moves on to each newer one, reading it whole again; a file caught half-written is not an
// error until it stays so.
void TestTrainerLog::trainerStateFolder() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string folder = dir.path().toStdString();
  QCOMPARE(newest_trainer_state(folder), std::string());
  // Our own checkpoint's trainer_state.json is not Hugging Face's.
  writeFile(dir.filePath("checkpoint-2/trainer_state.json"),
            R"({"step": 2, "epoch": 0, "data_position": 16})", 30);
  QCOMPARE(newest_trainer_state(folder), std::string());
  QCOMPARE(run_events_file(folder), folder + "/events.jsonl");
  writeFile(dir.filePath("checkpoint-4/trainer_state.json"), trainerState(4, 8), 20);
  const std::string four = folder + "/checkpoint-4/trainer_state.json";
  QCOMPARE(newest_trainer_state(folder), four);
  QCOMPARE(run_events_file(folder), four);
  QCOMPARE(line_format_of(four), LineFormat::TrainerState);
  QCOMPARE(run_folder_of(four), folder);
  QCOMPARE(run_folder_of(folder + "/trainer_state.json"), folder);
  QCOMPARE(run_folder_of(folder + "/trainer_log.jsonl"), folder);

  EventFileReader reader(run_events_file(folder));
  EventPollResult r = reader.poll();
  QVERIFY2(r.error.empty(), r.error.c_str());
  QVERIFY(!r.restarted);
  QCOMPARE(int(r.events.size()), 5);  // 4 steps and an eval
  QCOMPARE(reader.path(), four);
  QVERIFY(reader.poll().events.empty());  // unchanged: nothing again

  // The next checkpoint: its file is read whole, the series start over.
  writeFile(dir.filePath("checkpoint-8/trainer_state.json"), trainerState(8, 8), 10);
  r = reader.poll();
  QVERIFY(r.restarted);
  QVERIFY2(qs(r.restart_reason).contains("checkpoint-8/trainer_state.json is newer than"),
           r.restart_reason.c_str());
  QCOMPARE(int(r.events.size()), 10);
  QCOMPARE(reader.path(), folder + "/checkpoint-8/trainer_state.json");
  QCOMPARE(r.events[8].get<StepEvent>()->grad_norm, 18.0);  // step 8, before its eval

  // The end of training writes the top one; a version caught half-written is retried quietly.
  writeFile(dir.filePath("trainer_state.json"), trainerState(8, 8, true).left(300));
  QCOMPARE(newest_trainer_state(folder), folder + "/trainer_state.json");
  r = reader.poll();
  QVERIFY(r.events.empty());
  QVERIFY2(r.error.empty(), r.error.c_str());
  writeFile(dir.filePath("trainer_state.json"), trainerState(8, 8, true));
  r = reader.poll();
  QVERIFY(r.restarted);
  QCOMPARE(int(r.events.size()), 10);  // the summary adds no event
  QCOMPARE(reader.path(), folder + "/trainer_state.json");
  // One that stays broken is reported, naming the file; what was read is kept.
  writeFile(dir.filePath("trainer_state.json"), "{\"log_history\": [", 5);
  r = reader.poll();
  QVERIFY(r.events.empty());
  QVERIFY2(qs(r.error).startsWith(dir.filePath("trainer_state.json") + ": not valid JSON"),
           r.error.c_str());

  // A LLaMA-Factory log, then ours, take over from Hugging Face's state.
  writeFile(dir.filePath("trainer_log.jsonl"), "");
  QCOMPARE(run_events_file(folder), folder + "/trainer_log.jsonl");
}

QTEST_MAIN(TestTrainerLog)
// What Python's json writes for a diverged step (NaN, Infinity, -Infinity as bare words): read
// as those numbers, the step marked as written non-finite, and the rest of the line (the
// learning rate) or of the file (every other entry) kept. Before, such a trainer_state.json was
// rejected whole and such a trainer_log.jsonl line skipped whole.
void TestTrainerLog::pythonNonFinite_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<bool>("state");        // a trainer_state.json; else trainer_log.jsonl lines
  QTest::addColumn<QString>("key");       // the field written non-finite
  QTest::addColumn<double>("value");      // as read
  QTest::addColumn<int>("steps");         // step events read
  QTest::addColumn<double>("lr");         // the first step's learning rate
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  QTest::newRow("trainer_log: loss NaN")
      << QByteArray(R"({"current_steps": 12, "total_steps": 100, "loss": NaN, "lr": 4.5e-05, "elapsed_time": "0:00:10"})"
                    "\n" R"({"current_steps": 13, "total_steps": 100, "loss": 2.0, "lr": 4e-05})")
      << false << "loss" << nan << 2 << 4.5e-05;
  QTest::newRow("trainer_log: loss Infinity")
      << QByteArray(R"({"current_steps": 12, "loss": Infinity, "lr": 1e-05})") << false << "loss"
      << inf << 1 << 1e-05;
  QTest::newRow("trainer_log: reward -Infinity")
      << QByteArray(R"({"current_steps": 12, "loss": 0.7, "reward": -Infinity, "lr": 1e-06})")
      << false << "reward" << -inf << 1 << 1e-06;
  QTest::newRow("trainer_state: grad_norm NaN, the rest of the history kept")
      << QByteArray(R"({"global_step": 3, "max_steps": 3, "log_history": [)"
                    R"({"epoch": 0.3, "grad_norm": 1.5, "learning_rate": 1e-05, "loss": 2.5, "step": 1},)"
                    R"({"epoch": 0.6, "grad_norm": NaN, "learning_rate": 2e-05, "loss": 2.4, "step": 2, "note": "NaN and Infinity in a string stay text"},)"
                    R"({"epoch": 0.9, "grad_norm": Infinity, "learning_rate": 3e-05, "loss": 2.3, "step": 3}],)"
                    R"( "best_metric": null})")
      << true << "grad_norm" << nan << 3 << 2e-05;
}

void TestTrainerLog::pythonNonFinite() {
  QFETCH(QByteArray, text);
  QFETCH(bool, state);
  QFETCH(QString, key);
  QFETCH(double, value);
  QFETCH(int, steps);
  QFETCH(double, lr);
  std::vector<Event> events;
  if (state) {
    std::string why;
    ReadProblems problems;
    QVERIFY2(parse_trainer_state(view(text), events, why, problems), why.c_str());
    QCOMPARE(problems.bad_lines, std::uint64_t{0});
    QCOMPARE(qs(events[1].raw.value("note", std::string())),
             QString("NaN and Infinity in a string stay text"));
  } else {
    EventStreamParser parser(EventStreamParser::kDefaultMaxLineBytes, LineFormat::TrainerLog);
    events = parser.feed(view(text + "\n"));
    QCOMPARE(parser.bad_lines(), std::uint64_t{0});
    QCOMPARE(parser.problems().lines_with_issues, std::uint64_t{0});
  }
  QCOMPARE(int(events.size()), steps);
  // The diverged step: the first one in a log, the second in the state's history.
  const auto* step = events[state ? 1 : 0].get<StepEvent>();
  QVERIFY(step != nullptr);
  QCOMPARE(step->lr, lr);
  const StepValue bit = key == "loss"        ? StepValue::Loss
                        : key == "grad_norm" ? StepValue::GradNorm
                                             : StepValue::RewardsChosen;
  const double read = key == "loss"        ? step->loss
                      : key == "grad_norm" ? step->grad_norm
                                           : step->dpo.value_or(DpoMetrics{}).rewards_chosen;
  QVERIFY(step->written_not_finite(bit));
  QCOMPARE(step->not_finite, std::uint32_t(bit));
  if (std::isnan(value))
    QVERIFY(std::isnan(read));
  else
    QCOMPARE(read, value);
  // The steps around it are not marked.
  for (const Event& e : events)
    if (&e != &events[state ? 1 : 0] && e.get<StepEvent>() && !(state && e.line == 3))
      QCOMPARE(e.get<StepEvent>()->not_finite, std::uint32_t{0});
}

#include "tst_trainer_log.moc"
