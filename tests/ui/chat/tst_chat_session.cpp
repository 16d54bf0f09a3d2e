// ChatSession against the real engine (`studio-train chat --json`) on demo-shaped models with
// random weights: ready, streamed tokens that add up to the answer, multi-turn requests, a refused
// request the session survives, cancel (also before generation starts), the engine's own message
// when a model folder cannot be loaded, and stop() ending the process without further signals.
#include <QPointer>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "chat_test_support.h"
#include "studio/ui/chat/chat_session.h"

using studio::ui::ChatAnswer;
using studio::ui::ChatMessage;
using studio::ui::ChatModelInfo;
using studio::ui::ChatOptions;
using studio::ui::ChatSampling;
using studio::ui::ChatSession;

namespace {

constexpr int kTimeoutMs = 60000;

QList<ChatMessage> ask(const QString& text) {
  return {{QStringLiteral("user"), text}};
}

ChatSampling maxTokens(int n) {
  ChatSampling s;
  s.maxNewTokens = n;
  return s;
}

}  // namespace

class TestChatSession : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void tokensAddUpToTheAnswer();
  void multiTurnAndRefusedRequests();
  void templateOption_data();
  void templateOption();
  void cancel_data();
  void cancel();
  void unreadableModelFails();
  void missingEngineFails();
  void stopEndsTheProcessQuietly();

 private:
  // Starts `session` on `model` and waits for ready().
  bool startReady(ChatSession& session, const QString& model, const ChatOptions& options = {});

  QTemporaryDir dir_;
  QString model_;
};

void TestChatSession::initTestCase() {
  if (chat_test::engine().isEmpty()) QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
  QVERIFY(dir_.isValid());
  model_ = dir_.filePath(QStringLiteral("model"));
  const QString error = chat_test::makeModel(model_, 1);
  QVERIFY2(error.isEmpty(), qPrintable(error));
}

bool TestChatSession::startReady(ChatSession& session, const QString& model,
                                 const ChatOptions& options) {
  session.setEngineProgram(chat_test::engine());
  QSignalSpy ready(&session, &ChatSession::ready);
  session.start(model, options);
  return ready.wait(kTimeoutMs) || ready.size() == 1;
}

void TestChatSession::tokensAddUpToTheAnswer() {
  ChatSession session;
  QSignalSpy ready(&session, &ChatSession::ready);
  QSignalSpy tokens(&session, &ChatSession::token);
  QSignalSpy done(&session, &ChatSession::done);
  QSignalSpy failed(&session, &ChatSession::failed);
  QSignalSpy warnings(&session, &ChatSession::warning);
  session.setEngineProgram(chat_test::engine());
  session.start(model_);
  QVERIFY(session.isRunning());
  // Sent while the model loads: the engine reads it once ready.
  QVERIFY(session.send(ask(QStringLiteral("Reverse the word.\nflag")), {}, maxTokens(24)));
  QCOMPARE(session.pendingRequests(), 1);
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 1, kTimeoutMs);
  QCOMPARE(ready.size(), 1);
  const auto info = ready.front().front().value<ChatModelInfo>();
  QCOMPARE(info.model, QDir(model_).absolutePath());
  QCOMPARE(info.architecture, QStringLiteral("Qwen2ForCausalLM"));
  QCOMPARE(info.templateName, QStringLiteral("qwen"));  // from the tokenizer's <|im_start|>
  QCOMPARE(info.templateSource, QStringLiteral("guessed"));
  QVERIFY(info.parameters > 1000000);
  QVERIFY(!info.device.isEmpty() && !info.dtype.isEmpty());
  QCOMPARE(session.info().model, info.model);

  const auto answer = done.front().front().value<ChatAnswer>();
  QString streamed;
  for (const auto& args : tokens) streamed += args.front().toString();
  QVERIFY(tokens.size() >= 1);
  QCOMPARE(streamed, answer.text);
  QCOMPARE(answer.newTokens, answer.ids.size());
  QVERIFY(answer.newTokens >= 1 && answer.newTokens <= 24);
  QVERIFY2(answer.stop == QLatin1String("length") || answer.stop == QLatin1String("eos"),
           qPrintable(answer.stop));
  QVERIFY(answer.promptTokens > 5);
  QVERIFY(answer.seconds > 0);
  QCOMPARE(session.pendingRequests(), 0);
  QVERIFY(failed.isEmpty());
  QVERIFY(warnings.isEmpty());

  // Greedy (the default) is deterministic: the same request, the same answer.
  QVERIFY(session.send(ask(QStringLiteral("Reverse the word.\nflag")), {}, maxTokens(24)));
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 2, kTimeoutMs);
  QCOMPARE(done.back().front().value<ChatAnswer>().ids, answer.ids);
}

void TestChatSession::multiTurnAndRefusedRequests() {
  ChatSession session;
  QVERIFY(startReady(session, model_));
  QSignalSpy done(&session, &ChatSession::done);
  QSignalSpy refused(&session, &ChatSession::requestError);
  QSignalSpy failed(&session, &ChatSession::failed);
  QVERIFY(session.send(ask(QStringLiteral("Add the numbers.\n33 + 25")), {}, maxTokens(8)));
  // An assistant message first: refused; the session goes on with the next request.
  QVERIFY(session.send({{QStringLiteral("assistant"), QStringLiteral("hi")}}));
  const QList<ChatMessage> turns{
      {QStringLiteral("user"), QStringLiteral("Add the numbers.\n33 + 25")},
      {QStringLiteral("assistant"), QStringLiteral("58")},
      {QStringLiteral("user"), QStringLiteral("Sort the digits.\n3 1 2")}};
  QVERIFY(session.send(turns, {}, maxTokens(8)));
  // A system prompt replaces the template's default one (qwen's is long).
  QVERIFY(session.send(ask(QStringLiteral("Add the numbers.\n33 + 25")),
                       QStringLiteral("You are terse."), maxTokens(8)));
  QCOMPARE(session.pendingRequests(), 4);
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 3, kTimeoutMs);
  QCOMPARE(refused.size(), 1);
  QVERIFY2(refused.front().front().toString().contains(QStringLiteral("alternate")),
           qPrintable(refused.front().front().toString()));
  QCOMPARE(session.pendingRequests(), 0);
  QVERIFY(failed.isEmpty());
  auto promptTokens = [&](int i) { return done.at(i).front().value<ChatAnswer>().promptTokens; };
  // The second turn's prompt holds the first turn.
  QVERIFY2(promptTokens(1) > promptTokens(0) + 10,
           qPrintable(QStringLiteral("%1 vs %2").arg(promptTokens(1)).arg(promptTokens(0))));
  QVERIFY2(promptTokens(2) < promptTokens(0) - 10,
           qPrintable(QStringLiteral("%1 vs %2").arg(promptTokens(2)).arg(promptTokens(0))));
}

// --template: the session runs the one chosen; one whose end token the tokenizer lacks (llama3's
// <|eot_id|>: the demo tokenizer is Qwen-style) fails with the engine's reason.
void TestChatSession::templateOption_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("failure");
  for (const char* name : {"qwen", "mistral", "alpaca", "empty"})
    QTest::newRow(name) << QString::fromLatin1(name) << QString();
  QTest::newRow("llama3") << QStringLiteral("llama3") << QStringLiteral("<|eot_id|>");
}

void TestChatSession::templateOption() {
  QFETCH(QString, name);
  QFETCH(QString, failure);
  ChatSession session;
  if (!failure.isEmpty()) {
    session.setEngineProgram(chat_test::engine());
    QSignalSpy failed(&session, &ChatSession::failed);
    session.start(model_, ChatOptions{name, {}});
    QVERIFY(failed.wait(kTimeoutMs));
    QVERIFY2(failed.front().front().toString().contains(failure),
             qPrintable(failed.front().front().toString()));
    return;
  }
  QVERIFY(startReady(session, model_, ChatOptions{name, {}}));
  QCOMPARE(session.info().templateName, name);
  QCOMPARE(session.info().templateSource, QStringLiteral("--template"));
  QCOMPARE(session.options().templateName, name);
  QSignalSpy done(&session, &ChatSession::done);
  QVERIFY(session.send(ask(QStringLiteral("Uppercase the word.\nhair")), {}, maxTokens(4)));
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 1, kTimeoutMs);
}

// Cancel ends a long answer at its next token with stop "cancelled", also when it is asked
// before the engine started generating (while the model loads), which the engine alone would
// drop.
void TestChatSession::cancel_data() {
  QTest::addColumn<bool>("beforeReady");
  QTest::newRow("while generating") << false;
  QTest::newRow("while loading") << true;
}

void TestChatSession::cancel() {
  QFETCH(bool, beforeReady);
  constexpr int kMany = 100000;
  ChatSession session;
  session.setEngineProgram(chat_test::engine());
  QSignalSpy ready(&session, &ChatSession::ready);
  QSignalSpy tokens(&session, &ChatSession::token);
  QSignalSpy done(&session, &ChatSession::done);
  session.start(model_);
  QVERIFY(session.send(ask(QStringLiteral("Tell me everything.")), {}, maxTokens(kMany)));
  if (beforeReady) {
    QCOMPARE(ready.size(), 0);
  } else {
    QTRY_VERIFY_WITH_TIMEOUT(tokens.size() > 0, kTimeoutMs);
  }
  session.cancel();
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 1, kTimeoutMs);
  const auto answer = done.front().front().value<ChatAnswer>();
  QCOMPARE(answer.stop, QStringLiteral("cancelled"));
  QVERIFY2(answer.newTokens < kMany, qPrintable(QString::number(answer.newTokens)));
  // The session goes on: the next answer is whole.
  QVERIFY(session.send(ask(QStringLiteral("Hi")), {}, maxTokens(3)));
  QTRY_COMPARE_WITH_TIMEOUT(done.size(), 2, kTimeoutMs);
  QVERIFY(done.back().front().value<ChatAnswer>().stop != QLatin1String("cancelled"));
}

void TestChatSession::unreadableModelFails() {
  ChatSession session;
  session.setEngineProgram(chat_test::engine());
  QSignalSpy failed(&session, &ChatSession::failed);
  QSignalSpy ready(&session, &ChatSession::ready);
  const QString missing = dir_.filePath(QStringLiteral("no-such-model"));
  session.start(missing);
  session.send(ask(QStringLiteral("Hi")));
  QVERIFY(failed.wait(kTimeoutMs));
  const QString message = failed.front().front().toString();
  // The engine's own words: the file it could not open and what --model must be.
  QVERIFY2(message.contains(QStringLiteral("exit code 1")), qPrintable(message));
  QVERIFY2(message.contains(missing + QStringLiteral("/config.json")), qPrintable(message));
  QVERIFY2(message.contains(QStringLiteral("checkpoint-STEP")), qPrintable(message));
  QVERIFY(ready.isEmpty());
  QVERIFY(!session.isRunning());
  QCOMPARE(session.pendingRequests(), 0);
}

void TestChatSession::missingEngineFails() {
  ChatSession session;
  session.setEngineProgram(dir_.filePath(QStringLiteral("no-engine/studio-train")));
  QSignalSpy failed(&session, &ChatSession::failed);
  session.start(model_);
  QVERIFY(failed.wait(kTimeoutMs) || failed.size() == 1);
  QVERIFY2(failed.front().front().toString().contains(QStringLiteral("cannot start")),
           qPrintable(failed.front().front().toString()));
  QVERIFY(!session.isRunning());
  QVERIFY(!session.send(ask(QStringLiteral("Hi"))));
}

// stop() in the middle of an answer: no signal of that process follows, and the process is
// gone soon after (its QProcess deleted once it ended), also when the session is destroyed.
void TestChatSession::stopEndsTheProcessQuietly() {
  ChatSession session;
  QVERIFY(startReady(session, model_));
  QSignalSpy tokens(&session, &ChatSession::token);
  QSignalSpy done(&session, &ChatSession::done);
  QSignalSpy failed(&session, &ChatSession::failed);
  QVERIFY(session.send(ask(QStringLiteral("Tell me everything.")), {}, maxTokens(100000)));
  QTRY_VERIFY_WITH_TIMEOUT(tokens.size() > 0, kTimeoutMs);
  const QPointer<QProcess> process = session.findChild<QProcess*>();
  QVERIFY(process);
  QElapsedTimer clock;
  clock.start();
  session.stop();
  QVERIFY(clock.elapsed() < 100);  // returns at once
  QVERIFY(!session.isRunning());
  const qsizetype tokensAtStop = tokens.size();
  QTRY_VERIFY_WITH_TIMEOUT(process.isNull(), ChatSession::kStopGraceMs + 5000);
  QCOMPARE(tokens.size(), tokensAtStop);
  QVERIFY(done.isEmpty());
  QVERIFY(failed.isEmpty());

  QPointer<QProcess> orphan;
  {
    ChatSession gone;
    QVERIFY(startReady(gone, model_));
    orphan = gone.findChild<QProcess*>();
    QVERIFY(gone.send(ask(QStringLiteral("Tell me everything.")), {}, maxTokens(100000)));
    clock.restart();
  }
  QVERIFY(clock.elapsed() < 100);
  QVERIFY(orphan);
  QTRY_VERIFY_WITH_TIMEOUT(orphan.isNull(), ChatSession::kStopGraceMs + 5000);
}

QTEST_MAIN(TestChatSession)
#include "tst_chat_session.moc"
