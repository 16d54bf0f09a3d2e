// LLaMA-Factory's trainer_log.jsonl read as events (config/trainer_log.cpp): LogCallback's lines,
// odd fields under the same tolerant rule as events.jsonl, and the file picked by its name.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "studio/config/events.h"

using namespace studio;

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

std::string_view view(const QByteArray& b) {
  return std::string_view(b.constData(), static_cast<std::size_t>(b.size()));
}

}  // namespace

class TestTrainerLog : public QObject {
  Q_OBJECT

 private slots:
  void trainerLogLines_data();
  void trainerLogLines();
  void trainerLogFile();
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

QTEST_MAIN(TestTrainerLog)
#include "tst_trainer_log.moc"
