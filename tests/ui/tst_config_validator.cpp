// ConfigValidator: checks run on its own thread, results come back queued, and only the newest
// request's result is reported.
#include <QDir>
#include <QtTest>

#include "studio/ui/editor/config_validator.h"
#include "ui_test_support.h"

using studio::Severity;
using studio::ui::ConfigValidator;
using studio::ui::ValidationResult;

namespace {

ValidationResult only(const QSignalSpy& spy) {
  return spy.at(0).at(0).value<ValidationResult>();
}

}  // namespace

class TestConfigValidator : public QObject {
  Q_OBJECT

 private slots:
  void runsOffTheGuiThread();
  void checksAFile();
  void staleResultsAreDropped_data();
  void staleResultsAreDropped();
  void optionsTravelWithTheRequest();
};

void TestConfigValidator::runsOffTheGuiThread() {
  ConfigValidator validator;
  QSignalSpy spy(&validator, &ConfigValidator::finished);
  const quint64 id = validator.validateText(QStringLiteral("stage: sft\n"), "case.yaml");
  QVERIFY(validator.isBusy());
  QTRY_COMPARE(spy.count(), 1);
  const ValidationResult result = only(spy);
  QCOMPARE(result.id, id);
  QVERIFY(result.thread != nullptr);
  QVERIFY(result.thread != QThread::currentThread());
  QVERIFY(!validator.isBusy());
  // The text's missing required keys are reported under the name it was given.
  const int i = ui_test::find(result.check.diagnostics, Severity::Error, "model_name_or_path");
  QVERIFY(i >= 0);
  QCOMPARE(result.check.diagnostics[size_t(i)].file, std::string("case.yaml"));
}

void TestConfigValidator::checksAFile() {
  ConfigValidator validator;
  validator.setBaseDir(ui_test::configsDir());
  validator.setProcessesPerNode(8);
  QSignalSpy spy(&validator, &ConfigValidator::finished);
  validator.validateFile(ui_test::fixturePath());
  QTRY_COMPARE(spy.count(), 1);
  const ValidationResult result = only(spy);
  QVERIFY2(result.check.ok(), studio::format_all(result.check.diagnostics).c_str());
  QVERIFY(result.check.model.has_value());
  QCOMPARE(result.check.model->architecture, std::string("Qwen2ForCausalLM"));
  QCOMPARE(result.check.config.sequence_parallel_size, int64_t(8));
}

void TestConfigValidator::staleResultsAreDropped_data() {
  QTest::addColumn<int>("pauseMs");
  // Without a pause the worker skips the first request unrun; with one, the first check
  // finishes while the GUI thread is busy and its queued result must be dropped on arrival.
  QTest::newRow("superseded before it ran") << 0;
  QTest::newRow("finished but superseded") << 300;
}

void TestConfigValidator::staleResultsAreDropped() {
  QFETCH(int, pauseMs);
  ConfigValidator validator;
  QSignalSpy spy(&validator, &ConfigValidator::finished);
  const quint64 first = validator.validateText(QStringLiteral("stage: sft\n"), "old.yaml");
  QThread::msleep(static_cast<unsigned long>(pauseMs));  // blocks the GUI thread's event loop
  const quint64 second = validator.validateText(QStringLiteral("stage: dpo\n"), "new.yaml");
  QVERIFY(second > first);
  QTRY_COMPARE(spy.count(), 1);
  QTest::qWait(100);  // nothing else may arrive
  QCOMPARE(spy.count(), 1);
  const ValidationResult result = only(spy);
  QCOMPARE(result.id, second);
  QCOMPARE(result.check.config.source.file, std::string("new.yaml"));
}

void TestConfigValidator::optionsTravelWithTheRequest() {
  ConfigValidator validator;
  validator.setProcessesPerNode(4);
  validator.setNodes(2);
  QSignalSpy spy(&validator, &ConfigValidator::finished);
  validator.validateText(QStringLiteral("sequence_parallel_size: 3\n"), "case.yaml");
  QTRY_COMPARE(spy.count(), 1);
  const ValidationResult result = only(spy);
  QCOMPARE(result.options.world_size(), 8);
  // Relative paths resolve against the working directory unless a base dir is set.
  QCOMPARE(QString::fromStdString(result.options.base_dir), QDir::currentPath());
  const int i = ui_test::find(result.check.diagnostics, Severity::Error, "sequence_parallel_size");
  QVERIFY(i >= 0);
  QVERIFY(QString::fromStdString(result.check.diagnostics[size_t(i)].message)
              .contains("does not divide the world size 8"));
}

QTEST_MAIN(TestConfigValidator)
#include "tst_config_validator.moc"
