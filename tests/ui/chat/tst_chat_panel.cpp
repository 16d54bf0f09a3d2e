// ChatPanel, the Chat tab: the run's models in the pickers (final model, then checkpoints by step,
// listed off the GUI thread), and with the real engine two checkpoints side by side answering the
// same prompt, each pane its own conversation, Stop, and a model that cannot be loaded, while a
// probe checks that the GUI thread never stalls.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include "chat_test_support.h"
#include "stall_probe.h"
#include "studio/data/chat_template.h"
#include "studio/ui/chat/chat_pane.h"
#include "studio/ui/chat/chat_panel.h"
#include "studio/ui/chat/chat_session.h"
#include "studio/ui/chat/run_models.h"

using studio::ui::ChatAnswer;
using studio::ui::ChatPane;
using studio::ui::ChatPanel;
using studio::ui::ChatSession;

namespace {

constexpr int kTimeoutMs = 60000;

QStringList pickerLabels(const ChatPane* pane) {
  QStringList labels;
  for (int i = 0; i < pane->modelPicker()->count(); ++i) labels << pane->modelPicker()->itemText(i);
  return labels;
}

QPushButton* button(const ChatPanel& panel, const char* name) {
  return panel.findChild<QPushButton*>(QLatin1String(name));
}

// The last line of a pane's transcript: the numbers of its last answer.
QString statsLine(const ChatPane* pane) {
  return pane->transcript()->toPlainText().split(QLatin1Char('\n')).back();
}

// Points `panel` at `run` and waits until the pickers offer its models.
bool listRun(ChatPanel& panel, const QString& run) {
  QSignalSpy listed(&panel, &ChatPanel::modelsListed);
  panel.setRunFolder(run);
  return QTest::qWaitFor([&] { return !listed.isEmpty() && listed.back().at(0).toString() == run; },
                         kTimeoutMs);
}

// Sends a prompt whose answers would go on for long (100,000 new tokens) and waits for the first
// tokens of each pane asked.
bool startLongAnswers(ChatPanel& panel) {
  panel.findChild<QSpinBox*>(QStringLiteral("chatMaxNewTokens"))->setValue(100000);
  panel.promptBox()->setPlainText(QStringLiteral("Tell me everything."));
  QSignalSpy left(panel.pane(ChatPanel::Left)->session(), &ChatSession::token);
  QSignalSpy right(panel.pane(ChatPanel::Right)->session(), &ChatSession::token);
  if (!panel.send()) return false;
  return QTest::qWaitFor([&] { return !left.isEmpty() && (!panel.compare() || !right.isEmpty()); },
                         kTimeoutMs);
}

qint64 stallLimitMs() {
  const int limit = qEnvironmentVariableIntValue("STUDIO_STALL_LIMIT_MS");
  return limit > 0 ? limit : 100;
}

}  // namespace

class TestChatPanel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void listsTheRunsModels_data();
  void listsTheRunsModels();
  void keepsThePickOnRelisting();
  void sendNeedsAPromptAndModels();
  void sideBySide();
  void stopEndsTheAnswers();
  void anotherRunWhileAnswering();
  void unloadableModelSaysWhy();

 private:
  QTemporaryDir dir_;
  QString run_;  // final model (seed 1) and checkpoint-2 (seed 2), real weights
};

void TestChatPanel::initTestCase() {
  QVERIFY(dir_.isValid());
  if (chat_test::engine().isEmpty()) return;  // the engine tests skip themselves
  run_ = dir_.filePath(QStringLiteral("run"));
  QString error = chat_test::makeModel(run_, 1);
  QVERIFY2(error.isEmpty(), qPrintable(error));
  error = chat_test::makeModel(run_ + QStringLiteral("/checkpoint-2"), 2);
  QVERIFY2(error.isEmpty(), qPrintable(error));
}

// Folders (relative to the run) holding a model; `withoutWeights` hold config.json only.
void TestChatPanel::listsTheRunsModels_data() {
  QTest::addColumn<QStringList>("models");
  QTest::addColumn<QStringList>("withoutWeights");
  QTest::addColumn<QStringList>("labels");
  QTest::addColumn<QString>("left");
  QTest::addColumn<QString>("right");
  QTest::newRow("final and checkpoints, by step not by name")
      << QStringList{".", "checkpoint-10", "checkpoint-2", "checkpoint-300"} << QStringList{}
      << QStringList{"final model", "checkpoint-2", "checkpoint-10", "checkpoint-300", "Browse..."}
      << "."
      << "checkpoint-2";
  QTest::newRow("no final model yet: the last checkpoint")
      << QStringList{"checkpoint-20", "checkpoint-10"} << QStringList{}
      << QStringList{"checkpoint-10", "checkpoint-20", "Browse..."} << "checkpoint-20"
      << "checkpoint-10";
  QTest::newRow("what is not a model is left out")
      << QStringList{"checkpoint-5", ".checkpoint-6.saving", "checkpoint-x",
                     "checkpoint-",  "checkpoint-7.tmp",     "other"}
      << QStringList{".", "checkpoint-8"} << QStringList{"checkpoint-5", "Browse..."}
      << "checkpoint-5"
      << "checkpoint-5";
  QTest::newRow("final model only")
      << QStringList{"."} << QStringList{} << QStringList{"final model", "Browse..."} << "."
      << ".";
  QTest::newRow("nothing yet") << QStringList{} << QStringList{"."} << QStringList{"Browse..."}
                               << ""
                               << "";
}

void TestChatPanel::listsTheRunsModels() {
  QFETCH(QStringList, models);
  QFETCH(QStringList, withoutWeights);
  QFETCH(QStringList, labels);
  QFETCH(QString, left);
  QFETCH(QString, right);
  QTemporaryDir run;
  for (const QString& m : models) QVERIFY(chat_test::makeModelShape(run.filePath(m)));
  for (const QString& m : withoutWeights)
    QVERIFY(chat_test::makeModelShape(run.filePath(m), false));
  auto path = [&](const QString& m) {
    return m.isEmpty() ? QString() : QDir(run.filePath(m)).absolutePath();
  };

  ChatPanel panel;
  QSignalSpy listed(&panel, &ChatPanel::modelsListed);
  panel.setRunFolder(run.path());
  QVERIFY(listed.wait(kTimeoutMs));
  QCOMPARE(listed.front().at(0).toString(), run.path());
  QCOMPARE(listed.front().at(1).toInt(), labels.size() - 1);
  for (ChatPane* pane : {panel.pane(ChatPanel::Left), panel.pane(ChatPanel::Right)})
    QCOMPARE(pickerLabels(pane), labels);
  QCOMPARE(panel.pane(ChatPanel::Left)->model(), path(left));
  QCOMPARE(panel.pane(ChatPanel::Right)->model(), path(right));
  const QString leftLabel = left == QLatin1String(".") ? QStringLiteral("final model") : left;
  QCOMPARE(panel.pane(ChatPanel::Left)->modelPicker()->currentIndex(),
           left.isEmpty() ? -1 : labels.indexOf(leftLabel));

  QStringList dirs;
  for (const auto& m : studio::ui::listRunModels(run.path())) dirs << m.dir;
  QCOMPARE(panel.pane(ChatPanel::Left)->modelFolders(), dirs);
}

// A relisting (the tab shown again, another checkpoint written) keeps what was picked; a
// folder chosen outside the run stays offered when the run changes.
void TestChatPanel::keepsThePickOnRelisting() {
  QTemporaryDir run, elsewhere;
  for (const char* m : {".", "checkpoint-1", "checkpoint-2"})
    QVERIFY(chat_test::makeModelShape(run.filePath(QLatin1String(m))));
  ChatPanel panel;
  QVERIFY(listRun(panel, run.path()));
  ChatPane* left = panel.pane(ChatPanel::Left);
  left->modelPicker()->setCurrentIndex(2);  // as a user picks it
  const QString picked = QDir(run.filePath(QStringLiteral("checkpoint-2"))).absolutePath();
  QCOMPARE(left->model(), picked);
  QVERIFY(chat_test::makeModelShape(run.filePath(QStringLiteral("checkpoint-3"))));
  QVERIFY(listRun(panel, run.path()));
  QCOMPARE(pickerLabels(left).size(), 5);
  QCOMPARE(left->model(), picked);
  QCOMPARE(left->modelPicker()->currentText(), QStringLiteral("checkpoint-2"));

  left->selectModel(elsewhere.path());
  QCOMPARE(left->model(), elsewhere.path());
  QCOMPARE(left->modelPicker()->currentText(), QDir::toNativeSeparators(elsewhere.path()));
  QVERIFY(listRun(panel, QString()));
  QCOMPARE(pickerLabels(left),
           (QStringList{QDir::toNativeSeparators(elsewhere.path()), "Browse..."}));
  QCOMPARE(left->model(), elsewhere.path());
  QCOMPARE(panel.pane(ChatPanel::Right)->model(), QString());
}

void TestChatPanel::sendNeedsAPromptAndModels() {
  QTemporaryDir run;
  QVERIFY(chat_test::makeModelShape(run.path()));
  ChatPanel panel;
  QPushButton* send = button(panel, "chatSend");
  QVERIFY(send && !send->isEnabled());
  QVERIFY(!button(panel, "chatStop")->isEnabled());
  QTest::keyClicks(panel.promptBox(), "Hi");
  QVERIFY(!send->isEnabled());  // no model yet
  QVERIFY(!panel.send());
  QVERIFY(listRun(panel, run.path()));
  QVERIFY(send->isEnabled());
  panel.promptBox()->setPlainText(QStringLiteral("  \n "));
  QVERIFY(!send->isEnabled());
  QVERIFY(!panel.send());
  // The defaults the brief of the tab names: greedy, no top-p or top-k cut, 256 new tokens.
  const studio::ui::ChatSampling s = panel.sampling();
  QCOMPARE(*s.temperature, 0.0);
  QCOMPARE(*s.topP, 1.0);
  QCOMPARE(*s.topK, 0);
  QCOMPARE(*s.maxNewTokens, 256);
  QCOMPARE(*s.seed, 0);
  QCOMPARE(panel.options().templateName, QString());
  auto* templates = panel.findChild<QComboBox*>(QStringLiteral("chatTemplate"));
  QVERIFY(templates);
  QStringList names;
  for (int i = 1; i < templates->count(); ++i) names << templates->itemText(i);
  QStringList expected;
  for (const std::string& n : studio::data::template_names()) expected << QString::fromStdString(n);
  QCOMPARE(names, expected);
  QVERIFY(names.contains("gemma3") && names.contains("glm4") && names.size() == 25);
  for (QWidget* w : panel.findChildren<QWidget*>())
    if (!w->objectName().isEmpty() && w->objectName().startsWith(QLatin1String("chat")) &&
        w->objectName() != QLatin1String("chatPanes"))
      QVERIFY2(!w->accessibleName().isEmpty(), qPrintable(w->objectName()));
}

// Two checkpoints of a run, side by side, greedy: the same prompt, two different answers, each
// pane with its own history; a second turn goes on both conversations. Ctrl+Return sends. The
// GUI thread never stalls while the engines load and stream.
void TestChatPanel::sideBySide() {
  if (run_.isEmpty()) QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
  StallProbe probe;
  probe.start();
  ChatPanel panel;
  panel.setEngineProgram(chat_test::engine());
  panel.resize(1200, 800);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  QSignalSpy finished(&panel, &ChatPanel::answersFinished);
  QVERIFY(listRun(panel, run_));
  panel.findChild<QCheckBox*>(QStringLiteral("chatCompare"))->click();
  QVERIFY(panel.compare());
  ChatPane* left = panel.pane(ChatPanel::Left);
  ChatPane* right = panel.pane(ChatPanel::Right);
  QVERIFY(right->isVisible());
  QCOMPARE(left->model(), QDir(run_).absolutePath());
  QCOMPARE(right->model(), QDir(run_ + QStringLiteral("/checkpoint-2")).absolutePath());
  panel.findChild<QSpinBox*>(QStringLiteral("chatMaxNewTokens"))->setValue(16);
  QSignalSpy leftAnswers(left, &ChatPane::answered);
  QSignalSpy rightAnswers(right, &ChatPane::answered);

  panel.activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(&panel));
  panel.promptBox()->setFocus();  // as a user typing in it
  QTest::keyClicks(panel.promptBox(), "Reverse the word.");
  QTest::keyClick(panel.promptBox(), Qt::Key_Return);  // a new line, not sent
  QTest::keyClicks(panel.promptBox(), "flag");
  QVERIFY(!panel.isBusy());
  QTest::keyClick(panel.promptBox(), Qt::Key_Return, Qt::ControlModifier);
  QVERIFY(panel.isBusy());
  QVERIFY(panel.promptBox()->toPlainText().isEmpty());
  QVERIFY(button(panel, "chatStop")->isEnabled());
  QVERIFY(!button(panel, "chatSend")->isEnabled());
  QVERIFY(!left->modelPicker()->isEnabled());
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(leftAnswers.size(), 1);
  QCOMPARE(rightAnswers.size(), 1);
  const auto a = leftAnswers.front().front().value<ChatAnswer>();
  const auto b = rightAnswers.front().front().value<ChatAnswer>();
  QVERIFY2(a.text != b.text, qPrintable(a.text));
  QVERIFY(a.ids != b.ids);
  QCOMPARE(a.promptTokens, b.promptTokens);  // the same prompt, the same tokenizer
  const QString prompt = QStringLiteral("Reverse the word.\nflag");
  for (auto [pane, answer] : {std::pair{left, a}, std::pair{right, b}}) {
    QCOMPARE(pane->history().size(), 2);
    QCOMPARE(pane->history().at(0).content, prompt);
    QCOMPARE(pane->history().at(1).content, answer.text);
    const QString shown = pane->transcript()->toPlainText();
    QVERIFY2(shown.contains(prompt), qPrintable(shown));
    QVERIFY2(shown.contains(answer.text.trimmed()), qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("%1 tokens in").arg(answer.newTokens)),
             qPrintable(shown));
    QVERIFY2(pane->statusLabel()->text().contains(QStringLiteral("Qwen2ForCausalLM")),
             qPrintable(pane->statusLabel()->text()));
  }
  QVERIFY(statsLine(left).contains(QStringLiteral("tokens/s")));
  QVERIFY(left->transcript()->toPlainText().contains(QStringLiteral("final model")));
  QVERIFY(right->transcript()->toPlainText().contains(QStringLiteral("checkpoint-2")));

  // A second turn: each pane sends its own history; the engines are the ones already loaded.
  const ChatSession* leftSession = left->session();
  panel.promptBox()->setPlainText(QStringLiteral("Now uppercase it."));
  button(panel, "chatSend")->click();
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(left->session(), leftSession);
  QCOMPARE(left->history().size(), 4);
  QCOMPARE(right->history().size(), 4);
  QCOMPARE(left->history().at(1).content, a.text);
  QCOMPARE(right->history().at(1).content, b.text);
  QVERIFY(leftAnswers.back().front().value<ChatAnswer>().promptTokens > a.promptTokens);

  button(panel, "chatClear")->click();
  QVERIFY(left->history().isEmpty() && right->history().isEmpty());
  QVERIFY(left->transcript()->toPlainText().isEmpty());
  panel.setCompare(false);
  QVERIFY(!right->isVisible());
  QVERIFY(!right->session()->isRunning());  // its engine ended with the pane
  const qint64 stall = probe.stop();
  qInfo("side by side: GUI thread %s", qPrintable(probe.describe()));
  QVERIFY2(stall < stallLimitMs(), qPrintable(probe.describe()));
}

void TestChatPanel::stopEndsTheAnswers() {
  if (run_.isEmpty()) QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
  ChatPanel panel;
  panel.setEngineProgram(chat_test::engine());
  QSignalSpy finished(&panel, &ChatPanel::answersFinished);
  QVERIFY(listRun(panel, run_));
  panel.setCompare(true);
  QVERIFY(startLongAnswers(panel));
  button(panel, "chatStop")->click();
  QVERIFY(finished.wait(kTimeoutMs));
  for (ChatPane* pane : {panel.pane(ChatPanel::Left), panel.pane(ChatPanel::Right)}) {
    QVERIFY2(statsLine(pane).endsWith(QStringLiteral("stop: stopped")),
             qPrintable(statsLine(pane)));
    QCOMPARE(pane->history().size(), 2);  // the partial answer is part of the conversation
  }
  QVERIFY(!button(panel, "chatStop")->isEnabled());
}

// Another run picked while an answer streams (the studio's current run changed): the panes move to
// its models, the old answers are dropped, and the tab is ready for the next message.
void TestChatPanel::anotherRunWhileAnswering() {
  if (run_.isEmpty()) QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
  QTemporaryDir other;
  QVERIFY(chat_test::makeModelShape(other.path()));
  ChatPanel panel;
  panel.setEngineProgram(chat_test::engine());
  QSignalSpy finished(&panel, &ChatPanel::answersFinished);
  QVERIFY(listRun(panel, run_));
  QVERIFY(startLongAnswers(panel));
  QVERIFY(listRun(panel, other.path()));
  QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, kTimeoutMs);
  QVERIFY(!panel.isBusy());
  ChatPane* left = panel.pane(ChatPanel::Left);
  QCOMPARE(left->model(), other.path());
  QVERIFY(left->history().isEmpty());
  QVERIFY(left->modelPicker()->isEnabled());
  QVERIFY(!left->session()->isRunning());
  panel.promptBox()->setPlainText(QStringLiteral("Hi"));
  QVERIFY(button(panel, "chatSend")->isEnabled());
}

// A model folder that cannot be loaded: the engine's own message in the pane, the question
// out of the history, and the next message may go to another model.
void TestChatPanel::unloadableModelSaysWhy() {
  if (run_.isEmpty()) QSKIP("studio-train is not built (STUDIO_BUILD_ENGINE=OFF)");
  ChatPanel panel;
  panel.setEngineProgram(chat_test::engine());
  ChatPane* left = panel.pane(ChatPanel::Left);
  const QString broken = dir_.filePath(QStringLiteral("not-a-model"));
  QDir().mkpath(broken);
  left->selectModel(broken);
  QSignalSpy finished(&panel, &ChatPanel::answersFinished);
  panel.promptBox()->setPlainText(QStringLiteral("Hi"));
  QVERIFY(panel.send());
  QVERIFY(finished.wait(kTimeoutMs));
  const QString shown = left->transcript()->toPlainText();
  QVERIFY2(shown.contains(broken + QStringLiteral("/config.json")), qPrintable(shown));
  QVERIFY2(shown.contains(QStringLiteral("exit code 1")), qPrintable(shown));
  QVERIFY(left->history().isEmpty());
  QVERIFY(!left->session()->isRunning());

  QSignalSpy answered(left, &ChatPane::answered);
  left->selectModel(run_);
  panel.promptBox()->setPlainText(QStringLiteral("Hi"));
  QVERIFY(panel.send());
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(answered.size(), 1);
  QCOMPARE(left->history().size(), 2);
}

QTEST_MAIN(TestChatPanel)
#include "tst_chat_panel.moc"
