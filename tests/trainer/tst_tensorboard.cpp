// TensorBoard event files (trainer/metrics/tensorboard_writer.h): CRC-32C against its published check
// values, the TFRecord framing, Hugging Face's default logging_dir, and files read back by the
// real TensorBoard (its Python package, installed by scripts/setup.sh) with the values written.
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "studio/base/crc32c.h"
#include "studio/trainer/metrics/tensorboard_writer.h"
#include "tensorboard_reference.h"

using namespace studio;

class TestTensorBoard : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void crc32cCheckValues_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<uint>("crc");
    QTest::newRow("empty") << QByteArray() << 0u;
    QTest::newRow("123456789") << QByteArray("123456789") << 0xE3069283u;  // the CRC-32C check value
    QTest::newRow("32 zeros") << QByteArray(32, '\0') << 0x8A9136AAu;    // RFC 3720 B.4
    QTest::newRow("32 x 0xFF") << QByteArray(32, '\xFF') << 0x62A8AB43u;
    QByteArray up, down;
    for (int i = 0; i < 32; ++i) up.append(char(i)), down.append(char(31 - i));
    QTest::newRow("0..31") << up << 0x46DD794Eu;    // RFC 3720 B.4
    QTest::newRow("31..0") << down << 0x113FDB5Cu;
  }
  void crc32cCheckValues() {
    QFETCH(QByteArray, bytes);
    QFETCH(uint, crc);
    QCOMPARE(uint(crc32c(std::string_view(bytes.constData(), std::size_t(bytes.size())))), crc);
    // Continued in two pieces at every split (the 8-byte words and the bytes left over).
    for (qsizetype cut = 0; cut <= bytes.size(); ++cut) {
      const auto first = studio::crc32c_extend(0, bytes.constData(), std::size_t(cut));
      QCOMPARE(uint(studio::crc32c_extend(first, bytes.constData() + cut,
                                                   std::size_t(bytes.size() - cut))),
               crc);
    }
  }

  void recordFraming() {
    const std::string r = tfrecord("abc");
    QCOMPARE(int(r.size()), 8 + 4 + 3 + 4);
    QCOMPARE(int(static_cast<unsigned char>(r[0])), 3);  // length, little-endian
    for (int i = 1; i < 8; ++i) QCOMPARE(int(r[std::size_t(i)]), 0);
    QCOMPARE(r.substr(12, 3), std::string("abc"));
    auto u32 = [&](std::size_t at) {
      std::uint32_t v = 0;
      for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(r[at + std::size_t(i)]);
      return v;
    };
    QCOMPARE(u32(8), masked_crc32c(r.substr(0, 8)));
    QCOMPARE(u32(15), masked_crc32c("abc"));
  }

  void defaultLoggingDir() {
    const QString dir = QString::fromStdString(default_logging_dir("/out", 1.8e9, "node7"));
    QVERIFY2(QRegularExpression(QStringLiteral("^/out/runs/[A-Z][a-z]{2}\\d{2}_\\d{2}-\\d{2}-\\d{2}_node7$"))
                 .match(dir)
                 .hasMatch(),
             qPrintable(dir));
  }

  // Written here, read by TensorBoard: every finite scalar at its step with its value (as a
  // float32) and wall time; non-finite ones left out; two files in one folder both read.
  void readBackByTensorBoard() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const std::string dir = tmp.filePath(QStringLiteral("runs/x")).toStdString();
    for (int file = 0; file < 2; ++file) {  // a run and its resume
      TensorBoardWriter w;
      QCOMPARE(QString::fromStdString(w.open(dir, 1.8e9 + file)), QString());
      QVERIFY(QString::fromStdString(w.path()).contains(QStringLiteral("events.out.tfevents.")));
      for (int step = 1 + 10 * file; step <= 10 + 10 * file; ++step) {
        QCOMPARE(QString::fromStdString(
                     w.scalar("train/loss", step, 3.0 / step, 1.8e9 + step)), QString());
        w.scalar("train/learning_rate", step, 2e-5 * step, 1.8e9 + step);
        w.scalar("train/grad_norm", step, step == 4 ? std::nan("") : 0.5, 1.8e9 + step);
      }
      w.scalar("eval/loss", 10 + 10 * file, 1.25, 1.8e9 + 10);
      QCOMPARE(QString::fromStdString(w.close()), QString());
    }
    QCOMPARE(QDir(QString::fromStdString(dir)).entryList(QDir::Files).size(), 2);
    QString error;
    const QJsonObject tags = tensorboard_reference::scalars(QString::fromStdString(dir), error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(tags.keys(), (QStringList{"eval/loss", "train/grad_norm", "train/learning_rate",
                                       "train/loss"}));
    const QJsonArray loss = tags["train/loss"].toArray();
    QCOMPARE(loss.size(), 20);
    for (int i = 0; i < 20; ++i) {
      const QJsonArray p = loss[i].toArray();
      QCOMPARE(p[0].toInt(), i + 1);
      QCOMPARE(float(p[1].toDouble()), float(3.0 / (i + 1)));
      QCOMPARE(p[2].toDouble(), 1.8e9 + i + 1);
    }
    QCOMPARE(tags["train/grad_norm"].toArray().size(), 19);  // the NaN left out
    QCOMPARE(float(tags["train/learning_rate"].toArray()[19].toArray()[1].toDouble()),
             float(2e-5 * 20));
    QCOMPARE(tags["eval/loss"].toArray().size(), 2);
  }
};

QTEST_MAIN(TestTensorBoard)
#include "tst_tensorboard.moc"
