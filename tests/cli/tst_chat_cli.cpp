// studio-train chat, run as a process: greedy answers equal Hugging Face transformers' generate()
// token for token (tests/reference/hf_generate.py, every architecture the engine trains, single-
// and multi-turn, stopping at an eos id), the JSON-lines protocol (streaming, bad lines answered
// with an error and the session going on, cancel), the template's origin, and the errors.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

namespace {

const QString kDemoModel = QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model");
const QString kGenerate = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/hf_generate.py");

struct Run {
  int code = -1;
  QString out;
  QString err;
};

Run run(const QString& program, const QStringList& args, const QByteArray& input = {},
        int timeout_ms = 120000) {
  QProcess p;
  p.start(program, args);
  if (!input.isEmpty()) p.write(input);
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

Run chat(const QStringList& args, const QByteArray& input = {}) {
  return run(QStringLiteral(STUDIO_TRAIN_EXE), QStringList{"chat"} + args, input);
}

QList<QJsonObject> events(const QString& out) {
  QList<QJsonObject> list;
  for (const QString& line : out.split('\n', Qt::SkipEmptyParts))
    list << QJsonDocument::fromJson(line.toUtf8()).object();
  return list;
}

QJsonObject last_of(const QList<QJsonObject>& list, const QString& event) {
  for (auto it = list.rbegin(); it != list.rend(); ++it)
    if (it->value("event").toString() == event) return *it;
  return {};
}

QStringList numbers(const QJsonArray& a) {
  QStringList out;
  for (const auto& v : a) out << QString::number(v.toInteger());
  return out;
}

// A model folder with the demo tokenizer. initializer_range 0.5 spreads the logits so that
// greedy choices are not fp32 near-ties between the two implementations.
QString make_model(const QString& dir, const QString& arch, bool tied, bool bias,
                   const QString& extra = {}, int seed = 3) {
  const QString src = dir + "/src-" + arch;
  QDir().mkpath(src);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    QFile::copy(kDemoModel + "/" + f, src + "/" + f);
  const QString type = arch == "LlamaForCausalLM"     ? "llama"
                       : arch == "MistralForCausalLM" ? "mistral"
                       : arch == "Qwen3ForCausalLM"   ? "qwen3"
                                                      : "qwen2";
  QFile cfg(src + "/config.json");
  if (!cfg.open(QIODevice::WriteOnly)) return {};
  cfg.write(QStringLiteral(R"({"architectures": ["%1"], "model_type": "%2", "hidden_act": "silu",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4288,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "tie_word_embeddings": %3, "attention_bias": %4, "bos_token_id": 4256,
    "eos_token_id": 4258, "initializer_range": 0.5, "torch_dtype": "float32"%5})")
                .arg(arch, type, tied ? "true" : "false", bias ? "true" : "false", extra)
                .toUtf8());
  cfg.close();
  const QString out = dir + "/" + arch + (tied ? "-tied" : "") + QString::number(seed);
  if (QFileInfo::exists(out + "/config.json")) return out;
  const Run r = run(QStringLiteral(STUDIO_TRAIN_EXE),
                    {"init-model", "--config", src + "/config.json", "--out", out, "--seed",
                     QString::number(seed)});
  return r.code == 0 ? out : QString();
}

QJsonArray reference_ids(const QString& model, const QJsonArray& prompt, int max_new,
                         const QJsonArray& eos) {
  const Run r = run(QStringLiteral(STUDIO_PYTHON),
                    {kGenerate, model, numbers(prompt).join(','), "--max-new-tokens",
                     QString::number(max_new), "--eos", numbers(eos).join(',')},
                    {}, 300000);
  if (r.code != 0) qWarning("%s", qPrintable(r.err));
  return QJsonDocument::fromJson(r.out.toUtf8()).object().value("ids").toArray();
}

}  // namespace

class TestChatCli : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void greedyEqualsTransformers_data();
  void greedyEqualsTransformers();
  void jsonSessionStreamsAndGoesOnAfterBadLines();
  void cancelEndsTheAnswer();
  void cancelBeforeTheAnswerStarts();
  void templateComesFromTheRunConfig();
  void errors_data();
  void errors();

 private:
  QTemporaryDir tmp_;
};

void TestChatCli::initTestCase() {
  QVERIFY(tmp_.isValid());
  const Run r = run(QStringLiteral(STUDIO_PYTHON), {"-c", "import torch, transformers"});
  QVERIFY2(r.code == 0, qPrintable("the Python environment lacks torch/transformers (run "
                                   "scripts/setup.sh): " + r.err));
}

void TestChatCli::greedyEqualsTransformers_data() {
  QTest::addColumn<QString>("arch");
  QTest::addColumn<bool>("tied");
  QTest::addColumn<bool>("bias");
  QTest::addColumn<QString>("extra");
  QTest::addColumn<bool>("multiTurn");
  QTest::addColumn<bool>("eosRow");  // also stop at an extra eos id (each Python run takes ~4 s)
  QTest::newRow("llama") << "LlamaForCausalLM" << false << false << QString() << false << true;
  QTest::newRow("llama + llama3 rope, multi-turn")
      << "LlamaForCausalLM" << false << true
      << R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64})"
      << true << false;
  QTest::newRow("mistral") << "MistralForCausalLM" << false << false << QString() << false
                           << false;
  QTest::newRow("qwen2, tied") << "Qwen2ForCausalLM" << true << true << QString() << true << true;
  QTest::newRow("qwen3, head_dim 32")
      << "Qwen3ForCausalLM" << false << false << R"(, "head_dim": 32)" << false << false;
}

// The prompt ids come from the engine's template (tested against LLaMA-Factory in
// tst_chat_template); given those, transformers must generate the same answer. Then (eosRow) again
// with the 6th answer token made an end-of-sequence id (config.json's eos list): both stop before
// it.
void TestChatCli::greedyEqualsTransformers() {
  QFETCH(QString, arch);
  QFETCH(bool, tied);
  QFETCH(bool, bias);
  QFETCH(QString, extra);
  QFETCH(bool, multiTurn);
  QFETCH(bool, eosRow);
  const QString model = make_model(tmp_.path(), arch, tied, bias, extra);
  QVERIFY(!model.isEmpty());
  const int max_new = 24;
  QByteArray request;
  QJsonObject req;
  QJsonArray messages{QJsonObject{{"role", "user"}, {"content", "What is a ring attention?"}}};
  if (multiTurn)
    messages = QJsonArray{QJsonObject{{"role", "user"}, {"content", "Hi!"}},
                          QJsonObject{{"role", "assistant"}, {"content", "Hello. How can I help?"}},
                          QJsonObject{{"role", "user"}, {"content", "Explain zigzag order."}}};
  req["messages"] = messages;
  req["max_new_tokens"] = max_new;
  request = QJsonDocument(req).toJson(QJsonDocument::Compact) + "\n";
  Run r = chat({"--model", model, "--json"}, request);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  auto ev = events(r.out);
  const QJsonObject ready = ev.value(0), done = last_of(ev, "done");
  QCOMPARE(ready.value("event").toString(), QString("ready"));
  QCOMPARE(ready.value("template").toString(), QString("qwen"));
  QCOMPARE(done.value("new_tokens").toInt(), max_new);
  const QJsonArray ours = done.value("ids").toArray();
  const QJsonArray theirs =
      reference_ids(model, done.value("prompt_ids").toArray(), max_new, ready.value("stop_ids").toArray());
  QCOMPARE(numbers(ours), numbers(theirs));
  if (multiTurn)  // the history is in the prompt: the assistant's earlier answer is there
    QVERIFY(done.value("prompt_tokens").toInt() > 30);

  if (!eosRow) return;
  // An eos id in config.json: the answer ends before its first occurrence, as in transformers.
  const qint64 stop_id = ours.at(5).toInteger();
  QFile cfg(model + "/config.json");
  QVERIFY(cfg.open(QIODevice::ReadOnly));
  QJsonObject c = QJsonDocument::fromJson(cfg.readAll()).object();
  cfg.close();
  c["eos_token_id"] = QJsonArray{4258, stop_id};
  QVERIFY(cfg.open(QIODevice::WriteOnly | QIODevice::Truncate));
  cfg.write(QJsonDocument(c).toJson());
  cfg.close();
  r = chat({"--model", model, "--json"}, request);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  ev = events(r.out);
  const QJsonObject stopped = last_of(ev, "done");
  QCOMPARE(stopped.value("stop").toString(), QString("eos"));
  QVERIFY(numbers(ev.value(0).value("stop_ids").toArray()).contains(QString::number(stop_id)));
  const QJsonArray short_ref = reference_ids(model, stopped.value("prompt_ids").toArray(), max_new,
                                             ev.value(0).value("stop_ids").toArray());
  QCOMPARE(numbers(stopped.value("ids").toArray()), numbers(short_ref));
  QVERIFY(stopped.value("ids").toArray().size() <= 5);
}

// Token events concatenate to the answer; a line that is not JSON, a request without messages and
// one whose roles do not alternate each get an error event, and the next request is answered.
void TestChatCli::jsonSessionStreamsAndGoesOnAfterBadLines() {
  const QString model = make_model(tmp_.path(), "Qwen2ForCausalLM", true, true, {}, 4);
  const QByteArray input =
      "not json\n"
      "{\"max_new_tokens\": 5}\n"
      "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_new_tokens\": 12, "
      "\"temperature\": -3}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_new_tokens\": 12}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_new_tokens\": 12, "
      "\"temperature\": 0.9, \"top_p\": 0.8, \"top_k\": 40, \"seed\": 5}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_new_tokens\": 12, "
      "\"temperature\": 0.9, \"top_p\": 0.8, \"top_k\": 40, \"seed\": 5}\n";
  const Run r = chat({"--model", model, "--json"}, input);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  const auto ev = events(r.out);
  QStringList errors;
  QList<QJsonObject> dones;
  QStringList texts;
  QString streamed;
  for (const auto& e : ev) {
    const QString kind = e.value("event").toString();
    if (kind == "error") errors << e.value("message").toString();
    if (kind == "token") streamed += e.value("text").toString();
    if (kind == "done") dones << e, texts << streamed, streamed.clear();
  }
  QCOMPARE(errors.size(), 4);
  QVERIFY2(errors[0].contains("stdin line 1 is not JSON"), qPrintable(errors[0]));
  QVERIFY2(errors[1].contains("messages"), qPrintable(errors[1]));
  QVERIFY2(errors[2].contains("alternate") || errors[2].contains("user"), qPrintable(errors[2]));
  QVERIFY2(errors[3].contains("temperature"), qPrintable(errors[3]));
  QCOMPARE(dones.size(), 3);
  for (int i = 0; i < 3; ++i) QCOMPARE(texts[i], dones[i].value("text").toString());
  QCOMPARE(dones[0].value("new_tokens").toInt(), 12);
  // The same seed gives the same sample.
  QCOMPARE(numbers(dones[1].value("ids").toArray()), numbers(dones[2].value("ids").toArray()));
}

void TestChatCli::cancelEndsTheAnswer() {
  const QString model = make_model(tmp_.path(), "LlamaForCausalLM", false, false, {}, 5);
  QProcess p;
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), {"chat", "--model", model, "--json"});
  QVERIFY(p.waitForStarted());
  p.write("{\"messages\": [{\"role\": \"user\", \"content\": \"Go on forever\"}], "
          "\"max_new_tokens\": 1000000}\n");
  QByteArray out;
  QDeadlineTimer deadline(60000);
  while (!out.contains("\"event\":\"token\"") && !deadline.hasExpired()) {
    p.waitForReadyRead(200);
    out += p.readAllStandardOutput();
  }
  QVERIFY2(out.contains("\"event\":\"token\""), out.constData());
  p.write("{\"cancel\": true}\n");
  while (!out.contains("\"event\":\"done\"") && !deadline.hasExpired()) {
    p.waitForReadyRead(200);
    out += p.readAllStandardOutput();
  }
  p.closeWriteChannel();
  QVERIFY(p.waitForFinished(30000));
  out += p.readAllStandardOutput();
  QCOMPARE(p.exitCode(), 0);
  const QJsonObject done = last_of(events(QString::fromUtf8(out)), "done");
  QCOMPARE(done.value("stop").toString(), QString("cancelled"));
  QVERIFY(done.value("new_tokens").toInt() < 1000000);
}

// A cancel read before its request is picked up (while the model loads) cancels that request,
// not a later one; a cancel with nothing waiting or running does nothing.
void TestChatCli::cancelBeforeTheAnswerStarts() {
  const QString model = make_model(tmp_.path(), "LlamaForCausalLM", false, false, {}, 5);
  const QByteArray input =
      "{\"cancel\": true}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"one\"}], \"max_new_tokens\": 1000000}\n"
      "{\"cancel\": true}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"two\"}], \"max_new_tokens\": 7}\n";
  const Run r = chat({"--model", model, "--json"}, input);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QList<QJsonObject> dones;
  for (const auto& e : events(r.out))
    if (e.value("event").toString() == "done") dones << e;
  QCOMPARE(dones.size(), 2);
  QCOMPARE(dones[0].value("stop").toString(), QString("cancelled"));
  // Picked up before or after the cancel was read: cancelled at once either way.
  QVERIFY(dones[0].value("new_tokens").toInt() < 50);
  QCOMPARE(dones[1].value("stop").toString(), QString("length"));
  QCOMPARE(dones[1].value("new_tokens").toInt(), 7);
}

// A checkpoint-STEP folder of a run takes the run's template from config.yaml beside it; the
// plain --prompt mode prints the answer alone on stdout.
void TestChatCli::templateComesFromTheRunConfig() {
  const QString model = make_model(tmp_.path(), "Qwen2ForCausalLM", true, true, {}, 6);
  const QString run_dir = tmp_.filePath("run");
  QVERIFY(QDir().mkpath(run_dir));
  QVERIFY(QDir().rename(model, run_dir + "/checkpoint-4"));
  QFile yaml(run_dir + "/config.yaml");
  QVERIFY(yaml.open(QIODevice::WriteOnly));
  yaml.write("model_name_or_path: base\nstage: sft\ntemplate: default\n");
  yaml.close();
  Run r = chat({"--model", run_dir + "/checkpoint-4", "--json", "--prompt", "Hi",
                "--max-new-tokens", "4"});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  const QJsonObject ready = events(r.out).value(0);
  QCOMPARE(ready.value("template").toString(), QString("default"));
  QCOMPARE(ready.value("template_source").toString(), QString("config.yaml"));
  const QJsonObject done = last_of(events(r.out), "done");
  QCOMPARE(done.value("new_tokens").toInt(), 4);

  r = chat({"--model", run_dir + "/checkpoint-4", "--prompt", "Hi", "--max-new-tokens", "4",
            "--template", "qwen"});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QVERIFY2(r.err.contains("template qwen (given with --template)"), qPrintable(r.err));
  QVERIFY(r.out.endsWith('\n') && !r.out.contains("\"event\""));
}

void TestChatCli::errors_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("fragment");
  QTest::newRow("no model") << QStringList{"--prompt", "x"} << 2 << "needs --model DIR";
  QTest::newRow("missing folder") << QStringList{"--model", "/nonexistent/run/checkpoint-9"} << 1
                                  << "/nonexistent/run/checkpoint-9";
  QTest::newRow("bad temperature") << QStringList{"--model", "M", "--temperature", "-1"} << 2
                                   << "temperature must be 0 (greedy) or positive";
  QTest::newRow("not a number") << QStringList{"--model", "M", "--top-p", "lots"} << 2
                                << "--top-p: 'lots' is not a number";
  QTest::newRow("unknown template") << QStringList{"--model", "M", "--template", "nope"} << 1
                                    << "nope";
  QTest::newRow("no gpu") << QStringList{"--model", "M", "--device", "cuda:7"} << 2
                          << "--device cuda:7";
}

void TestChatCli::errors() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, fragment);
  const QString model = make_model(tmp_.path(), "Qwen2ForCausalLM", true, true, {}, 7);
  args.replaceInStrings(QRegularExpression("^M$"), model);
  const Run r = chat(args);
  QCOMPARE(r.code, code);
  QVERIFY2(r.err.contains(fragment), qPrintable(r.err));
}

QTEST_GUILESS_MAIN(TestChatCli)
#include "tst_chat_cli.moc"
