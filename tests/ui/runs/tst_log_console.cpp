// LogConsole: follows a run's train.log as it grows, restarts when it is truncated or replaced,
// keeps a bounded number of lines, follows the end unless the user scrolled up, and shows the
// studio's own messages apart.
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QtTest>

#include "runs_test_support.h"
#include "studio/ui/runs/log_console.h"
#include "studio/ui/runs/run_folder.h"

using studio::ui::LogConsole;
using namespace runs_test;

namespace {

constexpr const char* kLog = studio::kTrainLogFileName;

QString text(const LogConsole& console) {
  return console.view()->toPlainText();
}

QByteArray numberedLines(int from, int to) {
  QByteArray out;
  for (int i = from; i <= to; ++i) out += "line " + QByteArray::number(i) + '\n';
  return out;
}

}  // namespace

class TestLogConsole : public QObject {
  Q_OBJECT

 private slots:
  void appendedLinesShowUp();
  void restarts_data();
  void restarts();
  void blockLimit();
  void followsTheEndUnlessScrolledUp();
  void studioMessages();
  void switchingRuns();
  void largeLogStartsNearItsEnd();
};

void TestLogConsole::appendedLinesShowUp() {
  QTemporaryDir run;
  LogConsole console;
  console.setRun(run.path());  // no train.log yet: nothing, no error
  QCOMPARE(console.logFile(), QDir(run.path()).filePath(QStringLiteral("train.log")));
  QSignalSpy appended(&console, &LogConsole::linesAppended);
  appendRaw(run.path(), kLog, "studio-train: launching 2 workers\n[rank 1] ready\n");
  QTRY_COMPARE(text(console), QStringLiteral("studio-train: launching 2 workers\n[rank 1] ready"));

  // A line arrives in pieces: nothing shows until its newline.
  appendRaw(run.path(), kLog, "step 1 lo");
  QTest::qWait(3 * 300);
  QVERIFY(!text(console).contains(QStringLiteral("step 1")));
  appendRaw(run.path(), kLog, "ss 2.5\r\nprogress 10%\rprogress 50%\rprogress 100%\n");
  QTRY_VERIFY(
      text(console).endsWith(QStringLiteral("[rank 1] ready\nstep 1 loss 2.5\nprogress 100%")));
  QVERIFY(appended.size() >= 2);
  QCOMPARE(console.view()->blockCount(), 4);
  QVERIFY(console.view()->isReadOnly());
}

void TestLogConsole::restarts_data() {
  QTest::addColumn<bool>("replace");
  QTest::addColumn<QString>("reason");
  QTest::newRow("truncated") << false << "was truncated";
  QTest::newRow("replaced") << true << "was replaced";
}

void TestLogConsole::restarts() {
  QFETCH(bool, replace);
  QFETCH(QString, reason);
  QTemporaryDir run;
  appendRaw(run.path(), kLog, numberedLines(1, 50));
  LogConsole console;
  QSignalSpy restarted(&console, &LogConsole::logRestarted);
  console.setRun(run.path());
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 50")));

  const QString log = studio::ui::runFile(run.path(), kLog);
  if (replace) {
    // A file as long as the old one: only its identity (inode) tells it apart.
    appendRaw(run.path(), "new.log", "fresh run " + QByteArray(400, 'x') + '\n');
    QVERIFY(QFile::remove(log));
    QVERIFY(QFile::rename(studio::ui::runFile(run.path(), "new.log"), log));
  } else {
    QVERIFY(QFile::resize(log, 0));
    appendRaw(run.path(), kLog, "fresh run\n");
  }
  QTRY_COMPARE(restarted.size(), 1);
  QVERIFY2(restarted.front().front().toString().contains(reason),
           qPrintable(restarted.front().front().toString()));
  QTRY_VERIFY(text(console).contains(QStringLiteral("fresh run")));
  QVERIFY(!text(console).contains(QStringLiteral("line 1\n")));  // the old file's lines are gone
  QVERIFY(text(console).startsWith(QStringLiteral("[studio] ")));
}

void TestLogConsole::blockLimit() {
  QTemporaryDir run;
  LogConsole console;
  QCOMPARE(console.maximumLines(), LogConsole::kDefaultMaxLines);
  console.setMaximumLines(100);
  console.setRun(run.path());
  appendRaw(run.path(), kLog, numberedLines(1, 1000));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 1000")));
  // The lines that would not fit were never inserted; a note says so.
  QCOMPARE(console.view()->blockCount(), 100);
  const QTextBlock first = console.view()->document()->firstBlock();
  QVERIFY2(first.text().startsWith(
               QStringLiteral("[studio] earlier output not shown (901 lines): open ")),
           qPrintable(first.text()));
  QCOMPARE(first.next().text(), QStringLiteral("line 902"));
  appendRaw(run.path(), kLog, numberedLines(1001, 1050));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 1050")));
  QCOMPARE(console.view()->blockCount(), 100);
  QCOMPARE(console.view()->document()->firstBlock().text(), QStringLiteral("line 951"));
}

void TestLogConsole::followsTheEndUnlessScrolledUp() {
  QTemporaryDir run;
  LogConsole console;
  console.resize(400, 200);
  console.show();
  QVERIFY(QTest::qWaitForWindowExposed(&console));
  console.setRun(run.path());
  appendRaw(run.path(), kLog, numberedLines(1, 300));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 300")));
  QScrollBar* bar = console.view()->verticalScrollBar();
  QVERIFY(bar->maximum() > 0);
  QVERIFY(console.isAtEnd());

  appendRaw(run.path(), kLog, numberedLines(301, 400));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 400")));
  QVERIFY(console.isAtEnd());  // followed

  bar->setValue(10);  // the user scrolls up to read
  appendRaw(run.path(), kLog, numberedLines(401, 500));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 500")));
  QCOMPARE(bar->value(), 10);
  QVERIFY(!console.isAtEnd());

  bar->setValue(bar->maximum());  // back at the end: following again
  appendRaw(run.path(), kLog, numberedLines(501, 600));
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 600")));
  QVERIFY(console.isAtEnd());
}

void TestLogConsole::studioMessages() {
  QTemporaryDir run;
  LogConsole console;
  console.setRun(run.path());
  appendRaw(run.path(), kLog, "step 1\n");
  QTRY_COMPARE(text(console), QStringLiteral("step 1"));
  console.appendStudioMessage(QStringLiteral("stop requested"));
  appendRaw(run.path(), kLog, "runs_test_engine: stopping at step 1\n");
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("stopping at step 1")));

  const QTextDocument* doc = console.view()->document();
  QCOMPARE(doc->blockCount(), 3);
  auto colorOf = [&](int block) {
    return doc->findBlockByNumber(block).begin().fragment().charFormat().foreground().color();
  };
  QCOMPARE(doc->findBlockByNumber(1).text(), QStringLiteral("[studio] stop requested"));
  const QColor link = console.view()->palette().color(QPalette::Link);
  QCOMPARE(colorOf(1), link);
  QVERIFY(colorOf(0) != link);
  QVERIFY(colorOf(2) != link);  // the log after it is back in the text colour

  console.clear();
  QCOMPARE(text(console), QString());
  appendRaw(run.path(), kLog, "after clear\n");
  QTRY_COMPARE(text(console), QStringLiteral("after clear"));  // still following, not re-read
}

// Results still on their way for the run shown before never reach the view.
void TestLogConsole::switchingRuns() {
  QTemporaryDir a, b;
  appendRaw(a.path(), kLog, numberedLines(1, 2000));
  appendRaw(b.path(), kLog, "run b only\n");
  LogConsole console;
  console.setRun(a.path());
  console.setRun(b.path());
  QCOMPARE(console.run(), b.path());
  QTRY_COMPARE(text(console), QStringLiteral("run b only"));
  QTest::qWait(2 * 300);
  QCOMPARE(text(console), QStringLiteral("run b only"));
  console.setRun(QString());
  QCOMPARE(text(console), QString());
}

void TestLogConsole::largeLogStartsNearItsEnd() {
  QTemporaryDir run;
  appendRaw(run.path(), kLog, numberedLines(1, 400000));  // ~5 MB
  LogConsole console;
  console.setRun(run.path());
  QTRY_VERIFY(text(console).endsWith(QStringLiteral("line 400000")));
  const QString first = console.view()->document()->firstBlock().text();
  QVERIFY2(
      first.startsWith(QStringLiteral("[studio] ")) && first.contains(QStringLiteral("not shown")),
      qPrintable(first));
  // The second block is a whole line: reading began at a line start.
  QVERIFY(QRegularExpression(QStringLiteral("^line \\d+$"))
              .match(console.view()->document()->firstBlock().next().text())
              .hasMatch());
  QVERIFY(console.view()->blockCount() <= LogConsole::kDefaultMaxLines);
}

QTEST_MAIN(TestLogConsole)
#include "tst_log_console.moc"
