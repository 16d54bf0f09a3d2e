// EventTailer: follows a real events.jsonl from its own thread, resumes from a saved cursor,
// notices a truncated file, reports read errors once, and delivers a large file in batches.
#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "dashboard_test_support.h"
#include "studio/ui/dashboard/event_tailer.h"

using studio::ui::EventTailer;
using EventBatch = std::shared_ptr<const std::vector<studio::Event>>;

namespace {

constexpr int kTimeoutMs = 15000;  // a loaded 2-core machine: ticks can be late
constexpr int kIntervalMs = 50;

void writeFile(const QString& path, const QByteArray& bytes, QIODevice::OpenMode mode) {
  QFile f(path);
  QVERIFY(f.open(mode));
  QCOMPARE(f.write(bytes), qint64(bytes.size()));
}

// Every event delivered so far, in order.
std::vector<studio::Event> delivered(const QSignalSpy& spy) {
  std::vector<studio::Event> all;
  for (const QList<QVariant>& args : spy) {
    const auto batch = args.at(1).value<EventBatch>();
    all.insert(all.end(), batch->begin(), batch->end());
  }
  return all;
}

std::size_t deliveredCount(const QSignalSpy& spy) { return delivered(spy).size(); }

}  // namespace

class TestEventTailer : public QObject {
  Q_OBJECT

 private slots:
  void waitsForTheFileThenFollowsIt();
  void resumesFromASavedCursor();
  void truncatedFileStartsOver();
  void readErrorIsSentOnce();
  void largeFileArrivesInBatches();
};

void TestEventTailer::waitsForTheFileThenFollowsIt() {
  QTemporaryDir dir;
  EventTailer tailer(dir.path(), {}, kIntervalMs);
  QSignalSpy events(&tailer, &EventTailer::eventsRead);
  QSignalSpy errors(&tailer, &EventTailer::readError);
  QVERIFY(!tailer.isRunning());
  tailer.start();
  QVERIFY(tailer.isRunning());
  QTest::qWait(4 * kIntervalMs);
  QCOMPARE(events.count(), 0);  // no file yet: nothing, and no error
  QCOMPARE(errors.count(), 0);

  const QByteArray bytes = dash_test::readBytes(dash_test::dataPath("sft-cpu"));
  const QString path = QDir(dir.path()).filePath(QStringLiteral("events.jsonl"));
  QCOMPARE(tailer.eventsPath(), path);
  writeFile(path, bytes, QIODevice::WriteOnly);
  QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(18), kTimeoutMs);
  QCOMPARE(events.at(0).at(0).toString(), dir.path());
  const std::vector<studio::Event> all = delivered(events);
  QCOMPARE(all.front().kind, studio::EventKind::Start);
  QCOMPARE(all.back().kind, studio::EventKind::End);
  QCOMPARE(all.back().line, std::uint64_t(18));
  QCOMPARE(tailer.cursor().offset, std::uint64_t(bytes.size()));
  QCOMPARE(tailer.cursor().line, std::uint64_t(18));
  QCOMPARE(errors.count(), 0);
}

void TestEventTailer::resumesFromASavedCursor() {
  QTemporaryDir dir;
  const QString path = QDir(dir.path()).filePath(QStringLiteral("events.jsonl"));
  const QByteArray bytes = dash_test::readBytes(dash_test::dataPath("sft-cpu"));
  const int sevenLines = [&] {
    int at = -1;
    for (int i = 0; i < 7; ++i) at = bytes.indexOf('\n', at + 1);
    return at + 1;
  }();
  writeFile(path, bytes.left(sevenLines + 30), QIODevice::WriteOnly);  // and a partial line

  studio::EventCursor saved;
  {
    EventTailer first(dir.path(), {}, kIntervalMs);
    QSignalSpy events(&first, &EventTailer::eventsRead);
    first.start();
    QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(7), kTimeoutMs);
    saved = first.cursor();
  }  // the studio closes
  QCOMPARE(saved.offset, std::uint64_t(sevenLines));
  QCOMPARE(saved.line, std::uint64_t(7));

  // The run went on while the studio was closed; a new tailer starts where the old one stopped.
  writeFile(path, bytes.mid(sevenLines + 30), QIODevice::Append);
  EventTailer second(dir.path(), saved, kIntervalMs);
  QSignalSpy events(&second, &EventTailer::eventsRead);
  QSignalSpy restarts(&second, &EventTailer::restarted);
  second.start();
  QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(11), kTimeoutMs);
  const std::vector<studio::Event> rest = delivered(events);
  QCOMPARE(rest.front().line, std::uint64_t(8));  // neither lost nor repeated
  QCOMPARE(rest.back().kind, studio::EventKind::End);
  QCOMPARE(restarts.count(), 0);
}

void TestEventTailer::truncatedFileStartsOver() {
  QTemporaryDir dir;
  const QString path = QDir(dir.path()).filePath(QStringLiteral("events.jsonl"));
  writeFile(path, dash_test::readBytes(dash_test::dataPath("sft-cpu")), QIODevice::WriteOnly);
  EventTailer tailer(dir.path(), {}, kIntervalMs);
  QSignalSpy events(&tailer, &EventTailer::eventsRead);
  QSignalSpy restarts(&tailer, &EventTailer::restarted);
  tailer.start();
  QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(18), kTimeoutMs);
  // Rewritten in place, shorter: a new run in the same folder.
  const QByteArray dpo = dash_test::readBytes(dash_test::dataPath("dpo-cpu"));
  writeFile(path, dpo, QIODevice::WriteOnly | QIODevice::Truncate);
  QTRY_COMPARE_WITH_TIMEOUT(restarts.count(), 1, kTimeoutMs);
  const QString reason = restarts.at(0).at(1).toString();
  QVERIFY2(reason.contains(QStringLiteral("shrank")) && reason.contains(path), qPrintable(reason));
  QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(18 + 11), kTimeoutMs);
  QCOMPARE(delivered(events)[18].line, std::uint64_t(1));  // read again from its first line
  QCOMPARE(tailer.cursor().offset, std::uint64_t(dpo.size()));
}

void TestEventTailer::readErrorIsSentOnce() {
  QTemporaryDir dir;
  // A directory where the events file should be: opening works, reading fails.
  QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("events.jsonl")));
  EventTailer tailer(dir.path(), {}, kIntervalMs);
  QSignalSpy errors(&tailer, &EventTailer::readError);
  tailer.start();
  QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, kTimeoutMs);
  QVERIFY(errors.at(0).at(1).toString().contains(tailer.eventsPath()));
  QTest::qWait(5 * kIntervalMs);
  QCOMPARE(errors.count(), 1);
}

void TestEventTailer::largeFileArrivesInBatches() {
  QTemporaryDir dir;
  const QString path = QDir(dir.path()).filePath(QStringLiteral("events.jsonl"));
  // About 10 MiB of steps: more than two polls' worth.
  QByteArray bytes;
  const QByteArray padding(200, 'x');
  int steps = 0;
  while (bytes.size() < (10 << 20)) {
    ++steps;
    bytes += "{\"event\":\"step\",\"loss\":1.5,\"step\":" + QByteArray::number(steps) +
             ",\"note\":\"" + padding + "\"}\n";
  }
  writeFile(path, bytes, QIODevice::WriteOnly);
  EventTailer tailer(dir.path(), {}, kIntervalMs);
  QSignalSpy events(&tailer, &EventTailer::eventsRead);
  tailer.start();
  QTRY_COMPARE_WITH_TIMEOUT(deliveredCount(events), std::size_t(steps), kTimeoutMs);
  QVERIFY2(events.count() >= 3, qPrintable(QString::number(events.count())));
  const std::vector<studio::Event> all = delivered(events);
  for (std::size_t i = 0; i < all.size(); ++i)
    QCOMPARE(all[i].step().value_or(-1), std::int64_t(i + 1));
  QCOMPARE(tailer.cursor().offset, std::uint64_t(bytes.size()));
}

QTEST_MAIN(TestEventTailer)
#include "tst_event_tailer.moc"
