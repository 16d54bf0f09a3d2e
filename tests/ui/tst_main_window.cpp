// MainWindow: opening (failures go to the status bar), the title's file name and modified
// marker, saving the editor text as it is, and the Chat tab following the current run.
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "studio/ui/chat/chat_pane.h"
#include "studio/ui/chat/chat_panel.h"
#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/config_inspector.h"
#include "studio/ui/main_window.h"
#include "ui_test_support.h"

using studio::ui::MainWindow;

class TestMainWindow : public QObject {
  Q_OBJECT

 private slots:
  void missingFileGoesToTheStatusBar();
  void openEditSave();
  void exportNormalized();
  void exportRefusesUnreadableYaml();
  void chatTabFollowsTheCurrentRun();
};

void TestMainWindow::missingFileGoesToTheStatusBar() {
  MainWindow w;
  const QString path = QStringLiteral("/nonexistent/run.yaml");
  QVERIFY(!w.openFile(path));
  QVERIFY2(w.statusBar()->currentMessage().contains(path),
           qPrintable(w.statusBar()->currentMessage()));
  QCOMPARE(w.inspector()->summary(), QStringLiteral("No config open"));
}

void TestMainWindow::openEditSave() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("run.yaml"));
  QVERIFY(QFile::copy(ui_test::fixturePath(), path));

  MainWindow w;
  QVERIFY(w.openFile(path));
  QVERIFY(w.windowTitle().contains(QStringLiteral("run.yaml")));
  QVERIFY(!w.isWindowModified());

  // An edit with odd spacing and a comment: the file must get the text exactly as typed.
  w.inspector()->editor()->moveCursor(QTextCursor::End);
  QTest::keyClicks(w.inspector()->editor(), "seed:   7   # mine");
  QVERIFY(w.isWindowModified());
  const QString saved = dir.filePath(QStringLiteral("saved.yaml"));
  QVERIFY(w.saveFile(saved));
  QVERIFY(!w.isWindowModified());
  QVERIFY(w.windowTitle().contains(QStringLiteral("saved.yaml")));
  QCOMPARE(ui_test::readText(saved), w.inspector()->text());
  QVERIFY(ui_test::readText(saved).endsWith(QStringLiteral("seed:   7   # mine")));
}

// The export is the config the engine runs: every key (defaults included) written under its
// section header; the cutoff stays as given, SP 3 or not.
void TestMainWindow::exportNormalized() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("sp3.yaml"));
  QFile out(path);
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write(ui_test::readText(ui_test::fixturePath())
                .replace("sequence_parallel_size: 8", "sequence_parallel_size: 3")
                .toUtf8());
  out.close();

  MainWindow w;
  QVERIFY(w.openFile(path));
  const QString exported = dir.filePath(QStringLiteral("sp3.normalized.yaml"));
  QCOMPARE(w.exportNormalizedFile(exported), QString());
  const QString yaml = ui_test::readText(exported);
  QVERIFY2(yaml.contains(QStringLiteral("\ncutoff_len: 131072\n")), qPrintable(yaml));
  QVERIFY(yaml.contains(QStringLiteral("\nsequence_parallel_size: 3\n")));
  QVERIFY(yaml.contains(QStringLiteral("\nseed: 42\n")));  // a default, written out
  QVERIFY(yaml.startsWith(QStringLiteral("### ")));
}

void TestMainWindow::exportRefusesUnreadableYaml() {
  QTemporaryDir dir;
  MainWindow w;
  w.inspector()->setDocument(QStringLiteral("stage: [sft\n"), QString());
  const QString exported = dir.filePath(QStringLiteral("out.yaml"));
  QVERIFY(w.exportNormalizedFile(exported).contains(QStringLiteral("cannot be read")));
  QVERIFY(!QFile::exists(exported));
}

// Opening a run offers its final model and checkpoints in the Chat tab.
void TestMainWindow::chatTabFollowsTheCurrentRun() {
  QTemporaryDir run;
  QFile events(run.filePath(QStringLiteral("events.jsonl")));
  QVERIFY(events.open(QIODevice::WriteOnly));
  events.close();
  const QString checkpoint = run.filePath(QStringLiteral("checkpoint-4"));
  QVERIFY(QDir().mkpath(checkpoint));
  for (const char* file : {"config.json", "model.safetensors"}) {
    QFile f(checkpoint + QLatin1Char('/') + QLatin1String(file));
    QVERIFY(f.open(QIODevice::WriteOnly));
  }

  MainWindow w;
  auto* tabs = w.findChild<QTabWidget*>(QStringLiteral("centralTabs"));
  QVERIFY(tabs);
  QCOMPARE(tabs->tabText(MainWindow::ChatTab), QStringLiteral("Chat"));
  QCOMPARE(tabs->widget(MainWindow::ChatTab), w.chat());
  QSignalSpy listed(w.chat(), &studio::ui::ChatPanel::modelsListed);
  QVERIFY(w.openRun(run.path()));
  QCOMPARE(w.chat()->runFolder(), run.path());
  QTRY_VERIFY(!listed.isEmpty() && listed.back().at(0).toString() == run.path());
  QCOMPARE(w.chat()->pane(studio::ui::ChatPanel::Left)->model(), checkpoint);
  w.showTab(MainWindow::ChatTab);
  QCOMPARE(tabs->currentWidget(), w.chat());
}

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
