// LinePrefixer: lines tagged however the bytes arrive, partial lines held until their newline
// or the end, over-long lines cut into bounded pieces.
#include <QtTest>

#include "studio/launch/line_prefixer.h"

using studio::launch::LinePrefixer;

class TestLinePrefixer : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void prefixes_data();
  void prefixes();
  void holdsAPartialLineUntilItsNewline();
};

void TestLinePrefixer::prefixes_data() {
  QTest::addColumn<QStringList>("chunks");  // fed in this order
  QTest::addColumn<int>("maxLine");
  QTest::addColumn<QString>("expected");  // after finish()
  QTest::newRow("one line") << QStringList{"hello\n"} << 100 << "[r] hello\n";
  QTest::newRow("two lines in one chunk") << QStringList{"a\nb\n"} << 100 << "[r] a\n[r] b\n";
  QTest::newRow("line split over chunks")
      << QStringList{"hel", "lo", "\nwor", "ld\n"} << 100 << "[r] hello\n[r] world\n";
  QTest::newRow("partial last line is flushed with a newline")
      << QStringList{"a\n", "tail"} << 100 << "[r] a\n[r] tail\n";
  QTest::newRow("empty lines are kept") << QStringList{"\n\nx\n"} << 100 << "[r] \n[r] \n[r] x\n";
  QTest::newRow("carriage returns pass through")
      << QStringList{"50%\r60%\n"} << 100 << "[r] 50%\r60%\n";
  QTest::newRow("over-long line is cut")
      << QStringList{"abcdefgh\n"} << 3 << "[r] abc\n[r] def\n[r] gh\n";
  QTest::newRow("exactly max_line") << QStringList{"abc\n"} << 3 << "[r] abc\n";
  QTest::newRow("long line over chunks")
      << QStringList{"ab", "cd", "e"} << 2 << "[r] ab\n[r] cd\n[r] e\n";
  QTest::newRow("nothing") << QStringList{} << 100 << "";
}

void TestLinePrefixer::prefixes() {
  QFETCH(QStringList, chunks);
  QFETCH(int, maxLine);
  QFETCH(QString, expected);
  LinePrefixer p("[r] ", static_cast<std::size_t>(maxLine));
  std::string out;
  for (const QString& c : chunks) p.feed(c.toStdString(), out);
  p.finish(out);
  QCOMPARE(QString::fromStdString(out), expected);
  QCOMPARE(p.pending_bytes(), std::size_t{0});
}

void TestLinePrefixer::holdsAPartialLineUntilItsNewline() {
  LinePrefixer p("[rank 1] ");
  std::string out;
  p.feed("step 1", out);
  QCOMPARE(QString::fromStdString(out), QString());
  QCOMPARE(p.pending_bytes(), std::size_t{6});
  p.feed("0 done\nnext", out);
  QCOMPARE(QString::fromStdString(out), QString("[rank 1] step 10 done\n"));
  QCOMPARE(p.pending_bytes(), std::size_t{4});
}

QTEST_MAIN(TestLinePrefixer)
#include "tst_line_prefixer.moc"
