// The whole-file readers of config/atomic_file.cpp: read_small_file, for the metadata the program
// finds in folders (regular files only, capped), and the readers built on it (a model's
// config.json through read_json_file, a run's status.json through RunStatus::read), each given
// what a damaged or hostile folder may hold instead (a link to /dev/zero, a FIFO, a folder, a
// file past the cap) and answering in time with the file named; read_file, for files the user
// names, still reads a pipe to its end.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <string>
#include <thread>

#include "hostile_files.h"
#include "studio/base/atomic_file.h"
#include "studio/runs/events.h"
#include "studio/base/json_file.h"

using namespace studio;
using namespace std::chrono_literals;

class TestAtomicFile : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  int made_ = 0;

  // A fresh path in the temporary folder.
  QString path(const QString& name) { return tmp_.filePath(QString::number(++made_) + "-" + name); }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void smallFiles_data() {
    QTest::addColumn<QString>("kind");        // makeHostileFile's
    QTest::addColumn<QByteArray>("content");  // the link's target or the file's bytes
    QTest::addColumn<bool>("ok");
    QTest::addColumn<QString>("why");  // in the error, after "PATH: " ("" when ok)
    QTest::newRow("a small file") << "file" << QByteArray("abc\n") << true << "";
    QTest::newRow("empty") << "file" << QByteArray() << true << "";
    QTest::newRow("at the cap") << "file" << QByteArray(4096, 'x') << true << "";
    QTest::newRow("one byte past the cap")
        << "file" << QByteArray(4097, 'x') << false << "4097 bytes, more than the 4096";
    QTest::newRow("a sparse gigabyte (refused unread)")
        << "sparse" << QByteArray("1073741824") << false << "1073741824 bytes, more than the 4096";
    QTest::newRow("a link to a small file") << "link" << QByteArray("small") << true << "";
    QTest::newRow("a link to /dev/zero")
        << "link" << QByteArray("/dev/zero") << false
        << "a character device (a link to /dev/zero), not a regular file";
    QTest::newRow("a FIFO with no writer")
        << "fifo" << QByteArray() << false << "a FIFO (named pipe), not a regular file";
    QTest::newRow("a folder") << "folder" << QByteArray() << false
                              << "a folder, not a regular file";
  }
  void smallFiles() {
    QFETCH(QString, kind);
    QFETCH(QByteArray, content);
    QFETCH(bool, ok);
    QFETCH(QString, why);
    // The link of "a link to a small file" leads here.
    QFile small(tmp_.filePath("small"));
    QVERIFY(small.open(QIODevice::WriteOnly | QIODevice::Truncate) && small.write("abc\n") == 4);
    small.close();
    const QString file = path("meta");
    QVERIFY(makeHostileFile(
        file, kind,
        kind == "link" && content == "small" ? tmp_.filePath("small").toUtf8() : content));
    std::string text = "stale", error;
    const bool read = within(5s, "read_small_file", [&] {
      return read_small_file(file.toStdString(), 4096, text, error);
    });
    QVERIFY2(read == ok, error.c_str());
    if (ok) {
      QCOMPARE(QByteArray::fromStdString(text), kind == "link" ? QByteArray("abc\n") : content);
      return;
    }
    QCOMPARE(
        QString::fromStdString(error),
        file + ": " + why + (why.contains("bytes") ? " a file of its kind may hold" : QString()));
  }

  void missingFile() {
    std::string text, error;
    const std::string file = path("absent").toStdString();
    QVERIFY(!read_small_file(file, 4096, text, error));
    QCOMPARE(error, "cannot open " + file + ": No such file or directory");
  }

  // read_file reads what the user names, a pipe included (`studio-train validate <(...)`).
  void readFileReadsAPipe() {
    const QString fifo = path("pipe");
    QVERIFY(makeHostileFile(fifo, "fifo", {}));
    const std::string expected(200000, 'y');
    std::thread writer([&] {
      QFile w(fifo);
      if (w.open(QIODevice::WriteOnly)) w.write(expected.data(), qint64(expected.size()));
    });
    std::string text, error;
    const bool read = within(10s, "read_file on a pipe",
                             [&] { return read_file(fifo.toStdString(), text, error); });
    writer.join();
    QVERIFY2(read, error.c_str());
    QCOMPARE(text.size(), expected.size());
    QVERIFY(text == expected);
  }

  // The readers of metadata that sit on read_small_file: a model's config.json (read_json_file,
  // as validate and the wizard read it) and a run's status.json (RunStatus::read, as the runs
  // list reads every run folder's).
  void metadataReaders_data() {
    QTest::addColumn<QString>("reader");  // json, status
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("why");
    for (const char* reader : {"json", "status"}) {
      const QString r = QString::fromLatin1(reader);
      QTest::addRow("%s: a link to /dev/zero", reader)
          << r << "link" << QByteArray("/dev/zero")
          << "a character device (a link to /dev/zero), not a regular file";
      QTest::addRow("%s: a FIFO", reader)
          << r << "fifo" << QByteArray() << "a FIFO (named pipe), not a regular file";
      QTest::addRow("%s: a folder", reader)
          << r << "folder" << QByteArray() << "a folder, not a regular file";
    }
    QTest::newRow("json: past 64 MiB") << "json"
                                       << "sparse" << QByteArray::number(qint64(64) << 20 | 1)
                                       << "67108865 bytes, more than the 67108864";
    QTest::newRow("status: past 1 MiB") << "status"
                                        << "sparse" << QByteArray::number(qint64(1) << 20 | 1)
                                        << "1048577 bytes, more than the 1048576";
  }
  void metadataReaders() {
    QFETCH(QString, reader);
    QFETCH(QString, kind);
    QFETCH(QByteArray, content);
    QFETCH(QString, why);
    const QString file = path(reader == "json" ? "config.json" : "status.json");
    QVERIFY(makeHostileFile(file, kind, content));
    std::string error;
    const bool read = within(5s, "the metadata reader", [&] {
      if (reader == "json") {
        nlohmann::json j;
        return read_json_file(file.toStdString(), j, error);
      }
      RunStatus status;
      return RunStatus::read(file.toStdString(), status, error);
    });
    QVERIFY(!read);
    QVERIFY2(QString::fromStdString(error).startsWith(file + ": " + why), error.c_str());
  }
};

QTEST_MAIN(TestAtomicFile)
#include "tst_atomic_file.moc"
