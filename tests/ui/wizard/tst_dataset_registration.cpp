// datasetRegistration: the dataset_info.json entry a single data file needs, guessed from its
// first row (JSON lines or a JSON array), and a clear note when the row cannot be read.
#include <QtTest>

#include "studio/ui/wizard/dataset_registration.h"

using studio::ui::datasetRegistration;

class TestDatasetRegistration : public QObject {
  Q_OBJECT

 private slots:
  void entry_data();
  void entry();
};

void TestDatasetRegistration::entry_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QByteArray>("head");
  QTest::addColumn<QString>("entry");
  QTest::addColumn<QString>("guess");

  QTest::newRow("alpaca lines") << "/data/tasks.jsonl"
                                << QByteArray("{\"instruction\": \"Add\", \"input\": \"1 2\", "
                                              "\"output\": \"3\"}\n{\"instruction\": \"x\"}\n")
                                << R"("tasks": {"file_name":"tasks.jsonl"})"
                                << "Guessed from its first row (alpaca).";
  QTest::newRow("sharegpt array, braces in strings")
      << "/data/chat.json"
      << QByteArray("[\n  {\"conversations\": [{\"from\": \"human\", \"value\": \"a } b {\"}, "
                    "{\"from\": \"gpt\", \"value\": \"\\\"}\\\"\"}], \"system\": \"s\"},\n  {")
      << R"("chat": {"file_name":"chat.json","formatting":"sharegpt","columns":{"system":"system"}})"
      << "Guessed from its first row (conversations: sharegpt).";
  QTest::newRow("openai messages") << "/data/msgs.jsonl"
                                   << QByteArray("{\"messages\": [{\"role\": \"user\", "
                                                 "\"content\": \"hi\"}]}\n")
                                   << R"("msgs": {"file_name":"msgs.jsonl","formatting":"openai"})"
                                   << "Guessed from its first row (messages: openai).";
  QTest::newRow("alpaca pairs with history")
      << "/data/pairs.v2.json"
      << QByteArray("[{\"instruction\": \"q\", \"chosen\": \"a\", \"rejected\": \"b\", "
                    "\"history\": []}]")
      << R"("pairs.v2": {"file_name":"pairs.v2.json","ranking":true,"columns":{"history":"history"}})"
      << "Guessed from its first row (alpaca, chosen/rejected: preference pairs).";
  // A row of Python's json with a float column's NaN (the rest of the row is as good as ever).
  QTest::newRow("alpaca lines with NaN in a score")
      << "/data/scored.jsonl"
      << QByteArray("{\"instruction\": \"Add\", \"output\": \"3\", \"score\": NaN}\n")
      << R"("scored": {"file_name":"scored.jsonl"})" << "Guessed from its first row (alpaca).";
  QTest::newRow("not JSON") << "/data/table.csv" << QByteArray("a,b,c\n1,2,3\n")
                            << R"("table": {"file_name":"table.csv"})"
                            << "Its first row could not be read as a JSON object";
  QTest::newRow("first row cut off") << "/data/big.jsonl"
                                     << QByteArray("{\"instruction\": \"a very long")
                                     << R"("big": {"file_name":"big.jsonl"})"
                                     << "Its first row could not be read as a JSON object";
}

void TestDatasetRegistration::entry() {
  QFETCH(QString, file);
  QFETCH(QByteArray, head);
  QFETCH(QString, entry);
  QFETCH(QString, guess);
  const auto reg = datasetRegistration(file, head);
  QCOMPARE(reg.entry, entry);
  QVERIFY2(reg.guess.startsWith(guess), qPrintable(reg.guess));
}

QTEST_MAIN(TestDatasetRegistration)
#include "tst_dataset_registration.moc"
