// Tests of the metrics event schema: typed events through EventWriter and back through the
// readers, the incremental parser at every split, garbage and over-long lines, the resumable
// file cursor, and concurrent writers (status.json: tst_run_status).
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <cstdio>

#include "studio/runs/events.h"
#include "studio/base/json_file.h"
#include "runs_test_support.h"

using nlohmann::json;
using namespace studio;
using namespace runs_test;

namespace {

QByteArray line_of(const json& j) {
  return QByteArray::fromStdString(j.dump() + "\n");
}

QByteArray step_line(int step) {
  StepEvent s;
  s.step = step;
  s.loss = 2.0 - step / 64.0;
  s.time = 1700000000.0 + step;
  return line_of(json(s));
}

QList<qint64> steps_of(const std::vector<Event>& events) {
  QList<qint64> steps;
  for (const auto& e : events) steps.append(e.step().value_or(-1));
  return steps;
}

QList<qint64> range(int first, int last) {
  QList<qint64> out;
  for (int i = first; i <= last; ++i) out.append(i);
  return out;
}

// Everything a reader exposes about an event, to compare two parses of one stream.
QStringList signature(const std::vector<Event>& events) {
  QStringList out;
  for (const auto& e : events) {
    out << QString("%1@%2 %3 %4")
               .arg(e.line)
               .arg(e.offset)
               .arg(event_kind_name(e.kind))
               .arg(qs(e.raw.dump()));
  }
  return out;
}

// json's == compares numbers by value (40960 == 40960.0); print both when they differ.
bool same_json(const json& got, const json& want) {
  if (got == want) return true;
  qWarning("got:  %s\nwant: %s", got.dump().c_str(), want.dump().c_str());
  return false;
}

json payload_json(const EventPayload& payload) {
  return std::visit(
      [](const auto& p) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, std::monostate>) {
          return nullptr;
        } else {
          return json(p);
        }
      },
      payload);
}

json payload_json(const Event& e) {
  return payload_json(e.payload);
}

std::string write_payload(EventWriter& w, const EventPayload& payload) {
  return std::visit(
      [&w](const auto& p) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, std::monostate>) {
          return "no payload";
        } else {
          return w.write(p);
        }
      },
      payload);
}

StepEvent sample_step(bool with_gpus, bool dpo) {
  StepEvent s;
  s.step = 42;
  s.epoch = 0.5;
  s.loss = 1.25;
  s.lr = 2e-5;
  s.grad_norm = 0.75;
  s.tokens = 131072;
  s.tokens_per_sec = 5242.5;
  s.elapsed = 120.5;
  s.time = 1700000100.25;
  if (with_gpus) {
    s.gpus.push_back({0, 0, 30720.5, 40960, 45000.25, 81559});
    s.gpus.push_back({1, 1, 30721, 40962, 45001, 81559});
  }
  if (dpo) s.dpo = DpoMetrics{0.25, -0.5, 0.75, 0.5, -120.5, -140.25};
  return s;
}

EventPayload sample(const QString& name) {
  if (name == "start") {
    StartEvent s;
    s.time = 1700000000.5;
    s.config = json::parse(R"({"model":{"name":"llama"},"training":{"lr":0.0001}})");
    s.world_size = 8;
    s.sequence_parallel_size = 4;
    s.sequence_parallel_mode = "ulysses";
    s.stage = "sft";
    s.model = {"LlamaForCausalLM", 8030261248, 20971520, 32, 4096, 32, 8, 128256};
    s.total_steps = 1000;
    s.device_name = "NVIDIA H100 80GB HBM3";
    s.peak_tflops = 989.5;
    return s;
  }
  if (name == "step") return sample_step(true, false);
  if (name == "step-dpo") return sample_step(true, true);
  if (name == "step-no-gpus") return sample_step(false, false);
  if (name == "eval") return EvalEvent{100, 1.125};
  if (name == "eval-rm") {  // a reward model's: scores and accuracy, no log-probs
    DpoMetrics m;
    m.rewards_chosen = 1.5;
    m.rewards_rejected = -0.25;
    m.rewards_accuracies = 0.875;
    m.rewards_margins = 1.75;
    return EvalEvent{100, 0.375, m};
  }
  if (name == "step-orpo") {
    StepEvent s = std::get<StepEvent>(sample("step-dpo"));
    s.dpo->sft_loss = 1.5;
    s.dpo->odds_ratio_loss = 0.625;
    return s;
  }
  if (name == "checkpoint") return CheckpointEvent{200, "/runs/a/checkpoint-200"};
  if (name == "log") return LogEvent{"warning", 3, "say \"hi\"\nsecond line, \xc3\xbc"};
  if (name == "end") return EndEvent{"finished", "completed 1000 steps"};
  return std::monostate{};
}

// A stream with every kind, an unknown kind, and the kinds of dirt a live file can hold.
QByteArray mixed_stream() {
  QByteArray s;
  for (const char* name : {"start", "step", "step-dpo", "eval", "checkpoint", "log", "end"}) {
    s += line_of(payload_json(sample(name)));
  }
  // Blank (skipped), bad, an unknown kind (kept), bad, CRLF (kept), bad.
  s += "\n";
  s += "not json at all\n";
  s += "{\"event\":\"profile\",\"kernel\":\"attn\",\"ms\":1.5}\n";
  s += "{\"event\":\"step\",\"step\":\"seven\"}\n";
  s += "{\"event\":\"eval\",\"step\":7,\"loss\":0.5}\r\n";
  s += "[1,2,3]\n";
  return s;
}

}  // namespace

class TestEvents : public QObject {
  Q_OBJECT

 private slots:
  void helpers();
  void kindNames_data();
  void kindNames();
  void roundTrip_data();
  void roundTrip();
  void typedFieldsAfterReading();
  void missingAndNullValues();
  void splitAnywhere_data();
  void splitAnywhere();
  void truncatedLastLine();
  void pythonJson_data();
  void pythonJson();
  void garbageLines_data();
  void garbageLines();
  void fieldIssuesKeepTheLine_data();
  void fieldIssuesKeepTheLine();
  void problemSummary();
  void unknownKindsKept();
  void overLongLine_data();
  void overLongLine();
  void cursorResume_data();
  void cursorResume();
  void fileCreatedLater();
  void readErrorIsReported();
  void truncatedOrReplaced_data();
  void truncatedOrReplaced();
  void writerErrors();
  void concurrentWriters_data();
  void concurrentWriters();
};

void TestEvents::helpers() {
  QCOMPARE(bytes_to_mib(3u * 1048576u), 3.0);
  QCOMPARE(bytes_to_mib(512u * 1024u), 0.5);
  QCOMPARE(bytes_to_mib(0), 0.0);
  double now = QDateTime::currentMSecsSinceEpoch() / 1000.0;
  QVERIFY(std::fabs(unix_time_now() - now) < 5.0);
  QCOMPARE(qs(events_path("/out")), QString("/out/events.jsonl"));
  QCOMPARE(qs(events_path("/out/")), QString("/out/events.jsonl"));
  QCOMPARE(qs(status_path("/out")), QString("/out/status.json"));
}

void TestEvents::kindNames_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("kind");
  QTest::newRow("start") << "start" << int(EventKind::Start);
  QTest::newRow("step") << "step" << int(EventKind::Step);
  QTest::newRow("eval") << "eval" << int(EventKind::Eval);
  QTest::newRow("checkpoint") << "checkpoint" << int(EventKind::Checkpoint);
  QTest::newRow("log") << "log" << int(EventKind::Log);
  QTest::newRow("end") << "end" << int(EventKind::End);
  QTest::newRow("case matters") << "Step" << int(EventKind::Unknown);
  QTest::newRow("new kind") << "profile" << int(EventKind::Unknown);
}

void TestEvents::kindNames() {
  QFETCH(QString, name);
  QFETCH(int, kind);
  QCOMPARE(int(event_kind_from_name(name.toStdString())), kind);
  if (kind != int(EventKind::Unknown)) {
    QCOMPARE(QString(event_kind_name(EventKind(kind))), name);
  }
}

void TestEvents::roundTrip_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<int>("kind");
  QTest::addColumn<QByteArray>("expected");  // written by hand from the spec, names included
  QTest::newRow("start")
      << "start" << int(EventKind::Start)
      << QByteArray(
             R"({"event":"start","time":1700000000.5,)"
             R"("config":{"model":{"name":"llama"},"training":{"lr":0.0001}},)"
             R"("world_size":8,"sequence_parallel_size":4,"sequence_parallel_mode":"ulysses",)"
             R"("stage":"sft","model":{"architecture":"LlamaForCausalLM","parameters":8030261248,)"
             R"("trainable_parameters":20971520,)"
             R"("layers":32,"hidden_size":4096,"heads":32,"kv_heads":8,"vocab_size":128256},)"
             R"("total_steps":1000,"device_name":"NVIDIA H100 80GB HBM3","peak_tflops":989.5})");
  const QByteArray step =
      R"({"event":"step","step":42,"epoch":0.5,"loss":1.25,"lr":2e-05,"grad_norm":0.75,)"
      R"("tokens":131072,"tokens_per_sec":5242.5,"elapsed":120.5,"time":1700000100.25,)";
  const QByteArray gpus =
      R"("gpus":[{"rank":0,"device":0,"allocated_mib":30720.5,"reserved_mib":40960,)"
      R"("peak_mib":45000.25,"total_mib":81559},{"rank":1,"device":1,"allocated_mib":30721,)"
      R"("reserved_mib":40962,"peak_mib":45001,"total_mib":81559}])";
  QTest::newRow("step") << "step" << int(EventKind::Step) << step + gpus + "}";
  QTest::newRow("step-dpo") << "step-dpo" << int(EventKind::Step)
                            << step + gpus +
                                   R"(,"rewards/chosen":0.25,"rewards/rejected":-0.5,)"
                                   R"("rewards/accuracies":0.75,"rewards/margins":0.5,)"
                                   R"("logps/chosen":-120.5,"logps/rejected":-140.25})";
  QTest::newRow("step-no-gpus") << "step-no-gpus" << int(EventKind::Step) << step + R"("gpus":[]})";
  QTest::newRow("step-orpo") << "step-orpo" << int(EventKind::Step)
                             << step + gpus +
                                    R"(,"rewards/chosen":0.25,"rewards/rejected":-0.5,)"
                                    R"("rewards/accuracies":0.75,"rewards/margins":0.5,)"
                                    R"("logps/chosen":-120.5,"logps/rejected":-140.25,)"
                                    R"("sft_loss":1.5,"odds_ratio_loss":0.625})";
  QTest::newRow("eval") << "eval" << int(EventKind::Eval)
                        << QByteArray(R"({"event":"eval","step":100,"loss":1.125})");
  // Unknown preference fields of an eval are null (as a step's), kl and orpo's left out.
  QTest::newRow("eval-rm") << "eval-rm" << int(EventKind::Eval)
                           << QByteArray(R"({"event":"eval","step":100,"loss":0.375,)"
                                         R"("rewards/chosen":1.5,"rewards/rejected":-0.25,)"
                                         R"("rewards/accuracies":0.875,"rewards/margins":1.75,)"
                                         R"("logps/chosen":null,"logps/rejected":null})");
  QTest::newRow("checkpoint")
      << "checkpoint" << int(EventKind::Checkpoint)
      << QByteArray(R"({"event":"checkpoint","step":200,"path":"/runs/a/checkpoint-200"})");
  QTest::newRow("log") << "log" << int(EventKind::Log)
                       << QByteArray(R"({"event":"log","level":"warning","rank":3,)"
                                     R"("message":"say \"hi\"\nsecond line, \u00fc"})");
  QTest::newRow("end") << "end" << int(EventKind::End)
                       << QByteArray(R"({"event":"end","state":"finished",)"
                                     R"("reason":"completed 1000 steps"})");
}

void TestEvents::roundTrip() {
  QFETCH(QString, name);
  QFETCH(int, kind);
  QFETCH(QByteArray, expected);
  const json want = json::parse(view(expected));

  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = events_path(dir.path().toStdString());
  EventWriter writer;
  QCOMPARE(qs(writer.open(path)), QString());
  QCOMPARE(qs(write_payload(writer, sample(name))), QString());
  QCOMPARE(qs(writer.close()), QString());

  // The writer: one line, "event" first, the fields and values of the spec.
  const QByteArray bytes = read_all(qs(path));
  QCOMPARE(int(bytes.count('\n')), 1);
  QVERIFY(bytes.endsWith('\n'));
  QVERIFY2(bytes.startsWith("{\"event\":\"" + QByteArray(event_kind_name(EventKind(kind))) + "\","),
           bytes.constData());
  QVERIFY(same_json(json::parse(view(bytes.chopped(1))), want));

  // The reader: the same kind, and a payload that writes back to the same object.
  EventFileReader reader(path);
  EventPollResult result = reader.poll();
  QCOMPARE(qs(result.error), QString());
  QVERIFY(!result.restarted);
  QCOMPARE(int(result.events.size()), 1);
  const Event& e = result.events[0];
  QCOMPARE(int(e.kind), kind);
  QCOMPARE(qs(e.name()), QString(event_kind_name(EventKind(kind))));
  QCOMPARE(e.line, std::uint64_t{1});
  QCOMPARE(e.offset, std::uint64_t{0});
  QVERIFY(same_json(payload_json(e), want));
  QVERIFY(same_json(e.raw, want));
  QCOMPARE(reader.offset(), std::uint64_t(bytes.size()));
  QCOMPARE(reader.parser().bad_lines(), std::uint64_t{0});
}

void TestEvents::typedFieldsAfterReading() {
  EventStreamParser parser;
  QByteArray stream;
  for (const char* name : {"start", "step-dpo", "checkpoint", "log"}) {
    stream += line_of(payload_json(sample(name)));
  }
  std::vector<Event> events = parser.feed(view(stream));
  QCOMPARE(int(events.size()), 4);

  const auto* start = events[0].get<StartEvent>();
  QVERIFY(start);
  QCOMPARE(start->model.parameters, std::int64_t{8030261248});
  QCOMPARE(start->model.kv_heads, 8);
  QCOMPARE(start->sequence_parallel_size, 4);
  QCOMPARE(start->config["training"]["lr"].get<double>(), 0.0001);
  QVERIFY(!events[0].step().has_value());

  const auto* step = events[1].get<StepEvent>();
  QVERIFY(step);
  QVERIFY(!events[1].get<EvalEvent>());
  QCOMPARE(events[1].step().value_or(-1), std::int64_t{42});
  QCOMPARE(step->tokens, std::int64_t{131072});
  QCOMPARE(int(step->gpus.size()), 2);
  QCOMPARE(step->gpus[1].rank, 1);
  QCOMPARE(step->gpus[1].peak_mib, 45001.0);
  QCOMPARE(step->gpus[0].allocated_mib, 30720.5);
  QVERIFY(step->dpo.has_value());
  QCOMPARE(step->dpo->rewards_chosen, 0.25);
  QCOMPARE(step->dpo->rewards_margins, 0.5);
  QCOMPARE(step->dpo->logps_rejected, -140.25);
  QCOMPARE(events[1].raw["rewards/accuracies"].get<double>(), 0.75);

  QCOMPARE(qs(events[2].get<CheckpointEvent>()->path), QString("/runs/a/checkpoint-200"));
  QCOMPARE(events[2].step().value_or(-1), std::int64_t{200});
  QCOMPARE(qs(events[3].get<LogEvent>()->message),
           QString::fromUtf8("say \"hi\"\nsecond line, \xc3\xbc"));
  QCOMPARE(events[3].line, std::uint64_t{4});
}

void TestEvents::missingAndNullValues() {
  StepEvent s;
  s.step = 9;
  s.loss = std::numeric_limits<double>::infinity();  // an overflowed step
  s.grad_norm = std::nan("");  // not known: null
  s.lr = std::nan("");         // a diverged step's: NaN, as Python writes it
  s.set_not_finite(StepValue::Lr);
  QTemporaryDir dir;
  const std::string path = events_path(dir.path().toStdString());
  EventWriter writer;
  QCOMPARE(qs(writer.open(path)), QString());
  QCOMPARE(qs(writer.write(s)), QString());
  QCOMPARE(qs(writer.write(json::parse(R"({"event":"step","step":10})"))), QString());
  writer.close();
  const QString text = read_all(qs(path));
  QVERIFY2(text.contains("\"grad_norm\":null"), qPrintable(text));
  QVERIFY2(text.contains("\"loss\":Infinity"), qPrintable(text));
  QVERIFY2(text.contains("\"lr\":NaN"), qPrintable(text));
  QVERIFY2(text.contains("\"epoch\":null"), qPrintable(text));

  EventFileReader reader(path);
  std::vector<Event> events = reader.poll().events;
  QCOMPARE(int(events.size()), 2);
  const auto* first = events[0].get<StepEvent>();
  QCOMPARE(first->loss, std::numeric_limits<double>::infinity());
  QVERIFY(first->written_not_finite(StepValue::Loss));
  QVERIFY(std::isnan(first->grad_norm));
  QVERIFY(!first->written_not_finite(StepValue::GradNorm));
  QVERIFY(std::isnan(first->lr));
  QVERIFY(first->written_not_finite(StepValue::Lr));
  QCOMPARE(first->not_finite, std::uint32_t(StepValue::Loss) | std::uint32_t(StepValue::Lr));
  const auto* bare = events[1].get<StepEvent>();
  QCOMPARE(bare->step, std::int64_t{10});
  QVERIFY(std::isnan(bare->loss));
  QVERIFY(std::isnan(bare->time));
  QCOMPARE(bare->tokens, std::int64_t{0});
  QVERIFY(bare->gpus.empty());
  QVERIFY(!bare->dpo.has_value());

  // One DPO field alone still gives DPO metrics; the rest are NaN.
  Event e;
  std::string error;
  QVERIFY(parse_event_line(R"({"event":"step","step":1,"logps/chosen":-3})", e, error));
  QVERIFY(e.get<StepEvent>()->dpo.has_value());
  QCOMPARE(e.get<StepEvent>()->dpo->logps_chosen, -3.0);
  QVERIFY(std::isnan(e.get<StepEvent>()->dpo->rewards_chosen));
  // Integral floats are accepted for integers.
  QVERIFY(parse_event_line(R"({"event":"eval","step":5.0,"loss":1})", e, error));
  QCOMPARE(e.step().value_or(-1), std::int64_t{5});
}

void TestEvents::splitAnywhere_data() {
  QTest::addColumn<QByteArray>("stream");
  QTest::addColumn<int>("cap");
  QTest::addColumn<QList<qint64>>("steps");  // step() of each event, -1 for none
  QTest::addColumn<int>("bad");
  QTest::addColumn<int>("pending");  // bytes of the unfinished last line

  QByteArray clean = step_line(1) + step_line(2) + step_line(3);
  QTest::newRow("clean") << clean << 0 << QList<qint64>{1, 2, 3} << 0 << 0;
  QTest::newRow("every kind, dirt, unknown, CRLF")
      << mixed_stream() << 0 << QList<qint64>{-1, 42, 42, 100, 200, -1, -1, -1, 7} << 3 << 0;
  QByteArray partial = step_line(4);
  partial.chop(9);
  QTest::newRow("unfinished last line")
      << clean + partial << 0 << QList<qint64>{1, 2, 3} << 0 << int(partial.size());
  QByteArray huge = R"({"event":"log","message":")" + QByteArray(300, 'x') + "\"}\n";
  QTest::newRow("over-long line") << step_line(1) + huge + step_line(2) << 200
                                  << QList<qint64>{1, 2} << 1 << 0;
}

void TestEvents::splitAnywhere() {
  QFETCH(QByteArray, stream);
  QFETCH(int, cap);
  QFETCH(QList<qint64>, steps);
  QFETCH(int, bad);
  QFETCH(int, pending);
  const std::size_t max_line = cap > 0 ? std::size_t(cap) : EventStreamParser::kDefaultMaxLineBytes;

  EventStreamParser whole(max_line);
  const std::vector<Event> reference = whole.feed(view(stream));
  QCOMPARE(steps_of(reference), steps);
  QCOMPARE(int(whole.bad_lines()), bad);
  QCOMPARE(int(whole.pending_bytes()), pending);
  QCOMPARE(whole.consumed(), std::uint64_t(stream.size() - pending));
  QCOMPARE(whole.fed(), std::uint64_t(stream.size()));
  const QStringList want = signature(reference);

  for (int cut = 0; cut <= stream.size(); ++cut) {
    EventStreamParser p(max_line);
    std::vector<Event> got = p.feed(view(stream.left(cut)));
    p.feed(view(stream.mid(cut)), got);
    QVERIFY2(signature(got) == want, qPrintable(QString("split at byte %1").arg(cut)));
    QCOMPARE(int(p.bad_lines()), bad);
    QCOMPARE(p.last_bad_line(), whole.last_bad_line());
    QCOMPARE(p.consumed(), whole.consumed());
    QCOMPARE(p.lines(), whole.lines());
  }
  EventStreamParser bytewise(max_line);
  std::vector<Event> got;
  for (char c : stream) bytewise.feed(std::string_view(&c, 1), got);
  QCOMPARE(signature(got), want);
  QCOMPARE(int(bytewise.bad_lines()), bad);
  QCOMPARE(qs(bytewise.last_bad_reason()), qs(whole.last_bad_reason()));
}

void TestEvents::truncatedLastLine() {
  QTemporaryDir dir;
  const QString path = dir.filePath("events.jsonl");
  const QByteArray third = step_line(3);
  const int head = third.size() / 2;
  QVERIFY(append(path, step_line(1) + step_line(2) + third.left(head)));
  const auto complete = std::uint64_t(step_line(1).size() + step_line(2).size());

  EventFileReader reader(path.toStdString());
  EventPollResult r = reader.poll();
  QCOMPARE(steps_of(r.events), (QList<qint64>{1, 2}));
  QCOMPARE(reader.offset(), complete);  // before the partial line, never inside it
  QCOMPARE(int(reader.parser().pending_bytes()), head);
  QCOMPARE(reader.parser().bad_lines(), std::uint64_t{0});
  QVERIFY(reader.poll().events.empty());  // nothing new: still waiting for its newline

  QVERIFY(append(path, third.mid(head, third.size() - head - 1)));  // all but the newline
  QVERIFY(reader.poll().events.empty());
  QCOMPARE(reader.offset(), complete);

  QVERIFY(append(path, "\n"));
  r = reader.poll();
  QCOMPARE(steps_of(r.events), QList<qint64>{3});
  QCOMPARE(r.events[0].offset, complete);
  QCOMPARE(r.events[0].line, std::uint64_t{3});
  QCOMPARE(reader.offset(), std::uint64_t(read_all(path).size()));
  QCOMPARE(reader.parser().bad_lines(), std::uint64_t{0});
}

void TestEvents::garbageLines_data() {
  QTest::addColumn<QByteArray>("garbage");
  QTest::addColumn<QString>("reason");
  QTest::newRow("cut-off object") << QByteArray(R"({"event":"step","step":1,)") << "invalid JSON";
  QTest::newRow("plain text") << QByteArray("Traceback (most recent call last):") << "invalid JSON";
  QTest::newRow("invalid UTF-8") << QByteArray("{\"event\":\"log\",\"message\":\"\xff\"}")
                                 << "invalid JSON";
  QTest::newRow("two objects") << QByteArray(R"({"event":"eval","step":1}{"x":1})")
                               << "invalid JSON";
  // nlohmann throws out_of_range for this, not parse_error: it must not escape the reader.
  QTest::newRow("number too large for a double")
      << QByteArray(R"({"event":"step","step":1,"loss":1e999999})") << "invalid JSON at column 33: the number '1e999999' is too large for a double";
  QTest::newRow("array") << QByteArray("[1,2]") << "not a JSON object but array";
  QTest::newRow("string") << QByteArray(R"("step")") << "not a JSON object but string";
  QTest::newRow("no event") << QByteArray(R"({"step":1,"loss":2})") << "no \"event\" field";
  QTest::newRow("event not string") << QByteArray(R"({"event":3})") << "\"event\" is not a string";
  QTest::newRow("step without step")
      << QByteArray(R"({"event":"step","loss":1})") << "missing field 'step'";
  QTest::newRow("fractional step") << QByteArray(R"({"event":"eval","step":1.5,"loss":1})")
                                   << "field 'step': expected an integer, got number";
  QTest::newRow("step a word") << QByteArray(R"({"event":"checkpoint","step":"last"})")
                               << "field 'step': expected an integer, got string";
}

void TestEvents::garbageLines() {
  QFETCH(QByteArray, garbage);
  QFETCH(QString, reason);
  EventStreamParser parser;
  std::vector<Event> events = parser.feed(view(step_line(1) + garbage + "\n" + step_line(2)));
  QCOMPARE(steps_of(events), (QList<qint64>{1, 2}));
  QCOMPARE(events[1].line, std::uint64_t{3});
  QCOMPARE(parser.bad_lines(), std::uint64_t{1});
  QCOMPARE(parser.last_bad_line(), std::uint64_t{2});
  QVERIFY2(qs(parser.last_bad_reason()).contains(reason), parser.last_bad_reason().c_str());

  // The writer refuses to produce what the reader would call bad.
  json j = json::parse(view(garbage), nullptr, false);
  if (j.is_discarded()) return;
  QTemporaryDir dir;
  EventWriter writer;
  const std::string path = events_path(dir.path().toStdString());
  QCOMPARE(qs(writer.open(path)), QString());
  QVERIFY(!writer.write(j).empty());
  writer.close();
  QCOMPARE(int(read_all(qs(path)).size()), 0);
}

// One field of an unexpected type costs that field, not the line: converted where the intent is
// unambiguous, dropped otherwise, and counted with the first case and its line number.
void TestEvents::fieldIssuesKeepTheLine_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<QString>("issue");   // FieldIssue::describe() of the only issue, a prefix
  QTest::addColumn<QString>("readAs");  // "" when dropped
  QTest::newRow("device cuda:0")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":[{"rank":0,"device":"cuda:3","allocated_mib":10}]})")
      << R"(field 'gpus[0].device': expected an integer device index, got string "cuda:3")" << "3";
  QTest::newRow("device cpu") << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":[{"rank":0,"device":"cpu"}]})")
                              << "field 'gpus[0].device'" << "-1";
  QTest::newRow("device a word")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":[{"rank":0,"device":"tpu0"}]})")
      << "field 'gpus[0].device'" << "";
  QTest::newRow("loss a word") << QByteArray(R"({"event":"step","step":5,"tokens":7,"loss":"high"})")
                               << R"(field 'loss': expected a number, got string "high")" << "";
  QTest::newRow("loss NaN as text") << QByteArray(R"({"event":"step","step":5,"tokens":7,"loss":"NaN"})")
                                    << "field 'loss'" << "NaN";
  QTest::newRow("lr as text") << QByteArray(R"({"event":"step","step":5,"tokens":7,"lr":"2e-05"})")
                              << "field 'lr'" << "2e-05";
  QTest::newRow("step as text") << QByteArray(R"({"event":"step","step":"5","tokens":7})")
                                << "field 'step'" << "5";
  QTest::newRow("gpus an object") << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":{}})")
                                  << "field 'gpus': expected an array, got object" << "";
  QTest::newRow("gpu rank as text")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":[{"rank":0},{"rank":"1"}]})")
      << "field 'gpus[1].rank'" << "1";
  QTest::newRow("gpu not an object")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"gpus":[7]})")
      << "field 'gpus[0]': expected an object, got number 7" << "";
  QTest::newRow("dpo value a word")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"rewards/chosen":"x"})")
      << "field 'rewards/chosen'" << "";
  QTest::newRow("epoch an array")
      << QByteArray(R"({"event":"step","step":5,"tokens":7,"epoch":[1]})")
      << "field 'epoch': expected a number, got array" << "";
  QTest::newRow("config an array") << QByteArray(R"({"event":"start","config":[],"world_size":7})")
                                   << "field 'config': expected an object" << "";
  QTest::newRow("model layers as text")
      << QByteArray(R"({"event":"start","model":{"layers":"32"},"world_size":7})")
      << "field 'model.layers'" << "32";
  QTest::newRow("rank beyond 32 bits")
      << QByteArray(R"({"event":"log","rank":4294967296,"message":"m"})")
      << "field 'rank': expected a 32-bit integer, got number 4294967296" << "";
  QTest::newRow("path a number") << QByteArray(R"({"event":"checkpoint","step":5,"path":5})")
                                 << "field 'path': expected a string, got number 5" << "\"5\"";
  QTest::newRow("end state null") << QByteArray(R"({"event":"end","state":null,"reason":"r"})")
                                  << "field 'state': expected a string, got null" << "";
}

void TestEvents::fieldIssuesKeepTheLine() {
  QFETCH(QByteArray, line);
  QFETCH(QString, issue);
  QFETCH(QString, readAs);
  EventStreamParser parser;
  const std::vector<Event> events =
      parser.feed(view(step_line(1) + line + "\n" + line + "\n" + step_line(2)));
  QCOMPARE(int(events.size()), 4);
  QCOMPARE(parser.bad_lines(), std::uint64_t{0});
  const Event& e = events[1];
  QCOMPARE(int(e.issues.size()), 1);
  QVERIFY2(qs(e.issues[0].describe()).startsWith(issue), e.issues[0].describe().c_str());
  QCOMPARE(qs(e.issues[0].read_as), readAs);
  QVERIFY(qs(e.issues[0].describe()).endsWith(readAs.isEmpty() ? ": dropped" : ": read as " + readAs));
  // The rest of the line is kept.
  if (const auto* step = e.get<StepEvent>()) {
    QCOMPARE(step->step, std::int64_t{5});
    QCOMPARE(step->tokens, std::int64_t{7});
    if (readAs == "3") QCOMPARE(step->gpus.at(0).device, 3);
    if (readAs == "-1") QCOMPARE(step->gpus.at(0).device, -1);
    if (qs(e.issues[0].field) == "gpus[0].device") QCOMPARE(step->gpus.at(0).rank, 0);
    if (issue.contains("'loss'") && readAs.isEmpty()) QVERIFY(std::isnan(step->loss));
    if (readAs == "2e-05") QCOMPARE(step->lr, 2e-05);
    if (issue.contains("gpus[1]")) QCOMPARE(step->gpus.at(1).rank, 1);
  } else if (const auto* start = e.get<StartEvent>()) {
    QCOMPARE(start->world_size, 7);
    if (readAs == "32") QCOMPARE(start->model.layers, 32);
  } else if (const auto* log = e.get<LogEvent>()) {
    QCOMPARE(qs(log->message), QString("m"));
    QCOMPARE(log->rank, 0);
  } else if (const auto* cp = e.get<CheckpointEvent>()) {
    QCOMPARE(qs(cp->path), QString("5"));
  } else if (const auto* end = e.get<EndEvent>()) {
    QCOMPARE(qs(end->reason), QString("r"));
  } else {
    QFAIL("the event's kind was lost");
  }

  // Counted: two lines, the first named.
  const ReadProblems& p = parser.problems();
  QCOMPARE(p.lines_with_issues, std::uint64_t{2});
  QCOMPARE(p.converted_fields + p.dropped_fields, std::uint64_t{2});
  QCOMPARE(readAs.isEmpty() ? p.dropped_fields : p.converted_fields, std::uint64_t{2});
  QCOMPARE(p.first_issue_line, std::uint64_t{2});
  const QString summary = qs(p.summary("events.jsonl"));
  QVERIFY2(summary.startsWith("events.jsonl: 2 lines had fields not as the format says"),
           qPrintable(summary));
  QVERIFY2(summary.contains("first: line 2: " + issue), qPrintable(summary));

  // The writer refuses to write what a reader would have to repair.
  QTemporaryDir dir;
  EventWriter writer;
  const std::string path = events_path(dir.path().toStdString());
  QCOMPARE(qs(writer.open(path)), QString());
  const std::string refused = writer.write(json::parse(view(line)));
  QVERIFY2(qs(refused).contains(issue), refused.c_str());
  writer.close();
  QCOMPARE(int(read_all(qs(path)).size()), 0);
}

// The summary a user reads: both kinds of problem, counted, first (and last) named.
void TestEvents::problemSummary() {
  EventStreamParser parser;
  QByteArray text = step_line(1);
  text += R"({"event":"step","step":2,"gpus":[{"device":"cuda:0"},{"device":"cuda:1"}]})" "\n";
  text += "garbage\n";
  text += R"({"event":"step","step":3,"loss":"high"})" "\n";
  text += R"({"event":"eval"})" "\n";
  parser.feed(view(text));
  const ReadProblems& p = parser.problems();
  QCOMPARE(p.bad_lines, std::uint64_t{2});
  QCOMPARE(p.lines_with_issues, std::uint64_t{2});
  QCOMPARE(p.converted_fields, std::uint64_t{2});
  QCOMPARE(p.dropped_fields, std::uint64_t{1});
  const QString summary = qs(p.summary("events.jsonl"));
  QVERIFY2(summary.startsWith(
               "events.jsonl: 2 lines had fields not as the format says, kept without them or "
               "converted (2 fields converted, 1 dropped; first: line 2: field "
               "'gpus[0].device': expected an integer device index, got string \"cuda:0\": "
               "read as 0); 2 lines skipped whole (first: line 3: invalid JSON at column 1: found 'g', "
                             "which is not a JSON value"),
           qPrintable(summary));
  QVERIFY2(summary.contains("; last: line 5: \"eval\" event: missing field 'step')"),
           qPrintable(summary));
}

void TestEvents::unknownKindsKept() {
  QTemporaryDir dir;
  const std::string path = events_path(dir.path().toStdString());
  EventWriter writer;
  QCOMPARE(qs(writer.open(path)), QString());
  QCOMPARE(qs(writer.write(json::parse(R"({"event":"profile","kernel":"attn","ms":1.5})"))),
           QString());
  QCOMPARE(qs(writer.write(json::parse(R"({"event":"eval","step":3,"loss":2,"ppl":7.4})"))),
           QString());
  writer.close();

  EventFileReader reader(path);
  std::vector<Event> events = reader.poll().events;
  QCOMPARE(int(events.size()), 2);
  QCOMPARE(reader.parser().bad_lines(), std::uint64_t{0});
  QCOMPARE(int(events[0].kind), int(EventKind::Unknown));
  QVERIFY(std::holds_alternative<std::monostate>(events[0].payload));
  QCOMPARE(qs(events[0].name()), QString("profile"));
  QCOMPARE(events[0].raw["ms"].get<double>(), 1.5);
  QVERIFY(!events[0].step().has_value());
  // Unknown fields of a known kind are ignored by the payload and kept in raw.
  QCOMPARE(events[1].get<EvalEvent>()->loss, 2.0);
  QCOMPARE(events[1].raw["ppl"].get<double>(), 7.4);
}

void TestEvents::overLongLine_data() {
  QTest::addColumn<int>("cap");
  QTest::addColumn<int>("length");  // of the line without its newline
  QTest::addColumn<int>("chunk");   // bytes per feed
  QTest::addColumn<bool>("dropped");
  QTest::newRow("exactly the cap, kept") << 256 << 256 << 4096 << false;
  QTest::newRow("exactly the cap in small chunks") << 256 << 256 << 7 << false;
  QTest::newRow("one byte over, dropped") << 256 << 257 << 4096 << true;
  QTest::newRow("huge in small chunks") << 256 << 200000 << 100 << true;
  QTest::newRow("huge in one chunk") << 256 << 200000 << (1 << 20) << true;
}

void TestEvents::overLongLine() {
  QFETCH(int, cap);
  QFETCH(int, length);
  QFETCH(int, chunk);
  QFETCH(bool, dropped);
  const QByteArray prefix = R"({"event":"log","level":"info","rank":0,"message":")";
  QByteArray line = prefix + QByteArray(length - prefix.size() - 2, 'x') + "\"}";
  QCOMPARE(int(line.size()), length);
  const QByteArray stream = step_line(1) + line + "\n" + step_line(2);

  EventStreamParser parser{std::size_t(cap)};
  std::vector<Event> events;
  std::size_t most_pending = 0;
  for (int at = 0; at < stream.size(); at += chunk) {
    parser.feed(view(stream.mid(at, chunk)), events);
    most_pending = std::max(most_pending, parser.pending_bytes());
  }
  QVERIFY(most_pending <= std::size_t(cap));  // never buffered beyond the cap
  QCOMPARE(parser.consumed(), std::uint64_t(stream.size()));
  if (dropped) {
    QCOMPARE(steps_of(events), (QList<qint64>{1, 2}));
    QCOMPARE(parser.bad_lines(), std::uint64_t{1});
    QCOMPARE(parser.last_bad_line(), std::uint64_t{2});
    QVERIFY(qs(parser.last_bad_reason()).contains("longer than 256 bytes"));
  } else {
    QCOMPARE(steps_of(events), (QList<qint64>{1, -1, 2}));
    QCOMPARE(parser.bad_lines(), std::uint64_t{0});
    QCOMPARE(int(events[1].get<LogEvent>()->message.size()), int(length - prefix.size() - 2));
  }
}

void TestEvents::cursorResume_data() {
  QTest::addColumn<int>("before");        // complete lines the first reader sees
  QTest::addColumn<bool>("partial");      // and part of the next one
  QTest::addColumn<bool>("withBadLine");  // a garbage line among the first ones
  QTest::newRow("at a line boundary") << 4 << false << false;
  QTest::newRow("inside a line") << 4 << true << false;
  QTest::newRow("before anything") << 0 << true << false;
  QTest::newRow("after a bad line") << 5 << true << true;
}

void TestEvents::cursorResume() {
  QFETCH(int, before);
  QFETCH(bool, partial);
  QFETCH(bool, withBadLine);
  const int total = 10;
  QTemporaryDir dir;
  const QString path = dir.filePath("events.jsonl");
  QByteArray lines;
  for (int s = 1; s <= total; ++s) {
    lines += step_line(s);
    if (withBadLine && s == 2) lines += "garbage\n";
  }
  // Bytes of the first `before` lines, plus half of the next.
  int cut = 0;
  for (int i = 0; i < before; ++i) cut = lines.indexOf('\n', cut) + 1;
  if (partial) cut += (lines.indexOf('\n', cut) - cut) / 2;
  QVERIFY(overwrite(path, lines.left(cut)));

  QList<qint64> seen;
  std::string saved;
  {
    EventFileReader first(path.toStdString());
    seen += steps_of(first.poll().events);
    saved = json(first.cursor()).dump();  // what a UI would store in its settings
  }
  QVERIFY(append(path, lines.mid(cut)));

  EventFileReader second(path.toStdString());
  second.set_cursor(json::parse(saved).get<EventCursor>());
  EventPollResult r = second.poll();
  QVERIFY(!r.restarted);
  QCOMPARE(qs(r.error), QString());
  if (!r.events.empty()) {
    // Line numbers carry on from the first reader's.
    QCOMPARE(r.events.front().line, std::uint64_t(before + 1));
  }
  seen += steps_of(r.events);
  QCOMPARE(seen, range(1, total));  // nothing lost, nothing twice
  QCOMPARE(second.offset(), std::uint64_t(lines.size()));
  QVERIFY(second.poll().events.empty());
}

void TestEvents::fileCreatedLater() {
  QTemporaryDir dir;
  const QString path = dir.filePath("later/events.jsonl");  // not even the directory yet
  EventFileReader reader(path.toStdString());
  EventPollResult r = reader.poll();
  QVERIFY(r.events.empty());
  QCOMPARE(qs(r.error), QString());
  QVERIFY(!r.restarted);
  QCOMPARE(reader.offset(), std::uint64_t{0});

  QVERIFY(QDir(dir.path()).mkdir("later"));
  QVERIFY(reader.poll().events.empty());
  EventWriter writer;
  QCOMPARE(qs(writer.open(path.toStdString())), QString());
  QCOMPARE(qs(writer.write(EvalEvent{1, 2.5})), QString());
  QCOMPARE(qs(writer.write(EvalEvent{2, 2.25})), QString());
  r = reader.poll();
  QCOMPARE(steps_of(r.events), (QList<qint64>{1, 2}));
  QVERIFY(!r.restarted);  // first sight of the file is not a replacement
}

void TestEvents::readErrorIsReported() {
  QTemporaryDir dir;
  EventFileReader reader(dir.path().toStdString());  // a directory: opens, cannot be read
  EventPollResult r = reader.poll();
  QVERIFY(r.events.empty());
  QVERIFY2(qs(r.error).contains(dir.path()), r.error.c_str());
}

void TestEvents::truncatedOrReplaced_data() {
  QTest::addColumn<QString>("how");
  QTest::addColumn<bool>("viaCursor");  // a new reader resumes from the old one's cursor
  QTest::addColumn<QString>("reason");
  for (bool via : {false, true}) {
    const char* tag = via ? " (resumed reader)" : "";
    QTest::newRow(qPrintable(QString("truncated in place") + tag))
        << "truncate" << via << "shrank from";
    QTest::newRow(qPrintable(QString("replaced by a larger file") + tag))
        << "replace-larger" << via << "replaced by a new file";
    QTest::newRow(qPrintable(QString("replaced by a smaller file") + tag))
        << "replace-smaller" << via << "replaced by a new file";
    QTest::newRow(qPrintable(QString("deleted and recreated") + tag))
        << "recreate" << via << "again from the start";  // the inode may be reused
  }
}

void TestEvents::truncatedOrReplaced() {
  QFETCH(QString, how);
  QFETCH(bool, viaCursor);
  QFETCH(QString, reason);
  QTemporaryDir dir;
  const QString path = dir.filePath("events.jsonl");
  QVERIFY(overwrite(path, step_line(1) + step_line(2) + step_line(3)));
  EventFileReader first(path.toStdString());
  QCOMPARE(steps_of(first.poll().events), (QList<qint64>{1, 2, 3}));

  const int fresh = how == "replace-larger" ? 6 : 1;
  QByteArray content;
  for (int s = 101; s < 101 + fresh; ++s) content += step_line(s);
  if (how == "truncate") {
    QVERIFY(overwrite(path, content));  // same inode, fewer bytes
  } else if (how == "recreate") {
    QVERIFY(QFile::remove(path));
    QVERIFY(overwrite(path, content));
  } else {
    const QString tmp = dir.filePath("events.jsonl.new");
    QVERIFY(overwrite(tmp, content));
    QVERIFY(std::rename(tmp.toLocal8Bit().constData(), path.toLocal8Bit().constData()) == 0);
  }

  EventFileReader second(path.toStdString());
  second.set_cursor(first.cursor());
  EventFileReader& reader = viaCursor ? second : first;
  EventPollResult r = reader.poll();
  QVERIFY(r.restarted);
  QVERIFY2(qs(r.restart_reason).contains(reason), r.restart_reason.c_str());
  QVERIFY(qs(r.restart_reason).contains(path));
  QCOMPARE(steps_of(r.events), range(101, 100 + fresh));
  QCOMPARE(r.events.front().offset, std::uint64_t{0});
  QCOMPARE(r.events.front().line, std::uint64_t{1});
  QCOMPARE(reader.offset(), std::uint64_t(content.size()));

  r = reader.poll();
  QVERIFY(!r.restarted);
  QVERIFY(r.events.empty());
}

void TestEvents::writerErrors() {
  EventWriter writer;
  QVERIFY(!writer.is_open());
  QVERIFY(qs(writer.write(EvalEvent{1, 1.0})).contains("not open"));

  QTemporaryDir dir;
  const std::string missing = dir.path().toStdString() + "/no/such/dir/events.jsonl";
  const std::string error = writer.open(missing);
  QVERIFY2(qs(error).contains(qs(missing)), error.c_str());
  QVERIFY(!writer.is_open());

  const std::string path = events_path(dir.path().toStdString());
  QCOMPARE(qs(writer.open(path)), QString());
  QVERIFY(writer.is_open());
  QVERIFY(qs(writer.write(json::parse("[1]"))).contains("not a JSON object"));
  QVERIFY(qs(writer.write(json::parse(R"({"kind":"step"})"))).contains("\"event\""));
  QCOMPARE(qs(writer.sync()), QString());
  QCOMPARE(qs(writer.close()), QString());
  QCOMPARE(qs(writer.close()), QString());  // closing twice is harmless
  QCOMPARE(int(read_all(qs(path)).size()), 0);

  if (QFile::exists("/dev/full")) {  // a full disk: the error names the file
    QCOMPARE(qs(writer.open("/dev/full")), QString());
    QVERIFY(qs(writer.write(EvalEvent{1, 1.0})).contains("/dev/full"));
  }
}

void TestEvents::concurrentWriters_data() {
  QTest::addColumn<bool>("shared");
  QTest::newRow("one writer, two threads") << true;
  QTest::newRow("two writers on one file") << false;  // like two processes appending
}

void TestEvents::concurrentWriters() {
  QFETCH(bool, shared);
  const int per_thread = 400;
  QTemporaryDir dir;
  const std::string path = events_path(dir.path().toStdString());
  EventWriter writers[2];
  QCOMPARE(qs(writers[0].open(path)), QString());
  if (!shared) QCOMPARE(qs(writers[1].open(path)), QString());

  std::vector<std::string> errors[2];
  auto run = [&](int t) {
    EventWriter& w = writers[shared ? 0 : t];
    for (int i = 0; i < per_thread; ++i) {
      // Lines up to ~9 KiB, well past PIPE_BUF, so torn writes would show.
      std::string msg = std::to_string(t) + ":" + std::to_string(i) + ":";
      msg += std::string(std::size_t(i * 37 % 9000), char('a' + t));
      std::string error = w.write(LogEvent{"info", t, msg});
      if (!error.empty()) errors[t].push_back(error);
    }
  };
  std::thread a(run, 0);
  std::thread b(run, 1);
  a.join();
  b.join();
  QVERIFY(errors[0].empty() && errors[1].empty());
  writers[0].close();
  writers[1].close();

  const QByteArray bytes = read_all(qs(path));
  QVERIFY(bytes.endsWith('\n'));
  EventStreamParser parser;
  std::vector<Event> events = parser.feed(view(bytes));
  QCOMPARE(parser.bad_lines(), std::uint64_t{0});
  QCOMPARE(parser.pending_bytes(), std::size_t{0});
  QCOMPARE(int(events.size()), 2 * per_thread);
  int next[2] = {0, 0};
  for (const auto& e : events) {
    const auto* log = e.get<LogEvent>();
    QVERIFY(log);
    const int t = log->rank;
    const std::string head = std::to_string(t) + ":" + std::to_string(next[t]) + ":";
    QCOMPARE(qs(log->message.substr(0, head.size())), qs(head));  // in order, none missing
    QCOMPARE(log->message.size(), head.size() + std::size_t(next[t] * 37 % 9000));
    QVERIFY(log->message.find_first_not_of(char('a' + t), head.size()) == std::string::npos);
    ++next[t];
  }
  QCOMPARE(next[0], per_thread);
  QCOMPARE(next[1], per_thread);
}

QTEST_MAIN(TestEvents)
// The JSON reader every file of Python's goes through (json_file.h): NaN, Infinity and
// -Infinity as Python's json writes them are numbers, anywhere a value may stand and nowhere
// else (not in a string, not as a key, not glued to other text); a text that is not JSON is
// told in our words with its line and column.
void TestEvents::pythonJson_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<QString>("dumped");  // parsed and written back as Python writes it; "" if bad
  QTest::addColumn<QString>("error");   // JsonSyntaxError::describe()
  QTest::newRow("words as values")
      << QByteArray(R"({"a": NaN, "b": [Infinity, -Infinity, 1.5], "c": "NaN"})")
      << R"({"a":NaN,"b":[Infinity,-Infinity,1.5],"c":"NaN"})" << "";
  QTest::newRow("strings with the words and escapes stay text")
      << QByteArray(R"({"m": "say \"NaN\" -Infinity", "Infinity": NaN})")
      << R"({"Infinity":NaN,"m":"say \"NaN\" -Infinity"})" << "";
  QTest::newRow("a bare word at the top") << QByteArray("-Infinity") << "-Infinity" << "";
  QTest::newRow("no words: as before") << QByteArray(R"([1, 2.5, null, true])")
                                       << "[1,2.5,null,true]" << "";
  QTest::newRow("a word as a key")
      << QByteArray("{\n  NaN: 1}") << ""
      << "line 2, column 3: found the word for a non-finite number where a key in double quotes "
         "should be";
  QTest::newRow("glued to other text")
      << QByteArray(R"({"a": NaNa})") << ""
      << "line 1, column 7: found 'N', which is not a JSON value (text needs double quotes; true, "
         "false and null are lower case)";
  QTest::newRow("lower case nan is not Python's")
      << QByteArray(R"({"a": nan})") << ""
      << "line 1, column 7: found 'na', which is not a JSON value (text needs double quotes; true, "
         "false and null are lower case)";
  QTest::newRow("cut short")
      << QByteArray("{\"a\": [1,\n 2") << ""
      << "line 2, column 3: the text ends inside an array: it was cut short (a file still being "
         "written, or truncated)";
  QTest::newRow("a comma too many")
      << QByteArray("{\"a\": 1,\n}") << ""
      << "line 2, column 1: found '}' where a key in double quotes should be (a comma too many "
         "before it?)";
  QTest::newRow("a missing comma")
      << QByteArray(R"({"a": 1 "b": 2})") << ""
      << "line 1, column 9: found string literal where ',' or '}' should be";
  QTest::newRow("two values")
      << QByteArray("{}\n{}") << ""
      << "line 2, column 1: found '{' where the end of the text (one JSON value per text: a "
         "bracket or a value too many?) should be";
  QTest::newRow("too large") << QByteArray(R"({"a": 1e400})") << ""
                             << "line 1, column 7: the number '1e400' is too large for a double";
}

void TestEvents::pythonJson() {
  QFETCH(QByteArray, text);
  QFETCH(QString, dumped);
  QFETCH(QString, error);
  json j;
  JsonSyntaxError syntax;
  const bool ok = parse_json_text(view(text), j, syntax);
  QCOMPARE(ok, error.isEmpty());
  if (!ok) {
    QCOMPARE(qs(syntax.describe()), error);
    return;
  }
  QCOMPARE(qs(dump_json_python(j)), dumped);
  // Written back, read again: the same numbers (NaN compared as NaN).
  json again;
  QVERIFY(parse_json_text(dump_json_python(j), again, syntax));
  QCOMPARE(qs(dump_json_python(again)), dumped);
}

#include "tst_events.moc"
