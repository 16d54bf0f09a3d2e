// HyperparametersPage: the widgets start at RunConfig{}'s values (LLaMA-Factory's defaults), write
// what is typed into the draft, and show validate_config's messages live; text that is not a
// number is the page's own error.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QtTest>

#include "studio/config/config_schema.h"
#include "studio/ui/wizard/hyperparameters_page.h"
#include "wizard_test_support.h"

using studio::ui::HyperparametersPage;
using studio::ui::RunDraft;

class TestHyperparametersPage : public QObject {
  Q_OBJECT

 private slots:
  void defaultsComeFromRunConfig();
  void validation_data();
  void validation();
  void typedValuesReachTheConfig();
};

void TestHyperparametersPage::defaultsComeFromRunConfig() {
  RunDraft draft;
  HyperparametersPage page(&draft);
  const studio::RunConfig d;
  auto spin = [&](const char* key) {
    return static_cast<int64_t>(page.findChild<QSpinBox*>(key)->value());
  };
  auto real = [&](const char* key) { return page.findChild<QDoubleSpinBox*>(key)->value(); };
  auto flag = [&](const char* key) { return page.findChild<QCheckBox*>(key)->isChecked(); };
  auto combo = [&](const char* key) { return page.findChild<QComboBox*>(key)->currentText(); };
  double lr = 0;
  QVERIFY(studio::parse_double(
      page.findChild<QLineEdit*>("learning_rate")->text().toStdString(), lr));
  QCOMPARE(lr, d.learning_rate);
  QCOMPARE(real("num_train_epochs"), d.num_train_epochs);
  QCOMPARE(spin("max_steps"), d.max_steps);
  QCOMPARE(spin("per_device_train_batch_size"), d.per_device_train_batch_size);
  QCOMPARE(spin("gradient_accumulation_steps"), d.gradient_accumulation_steps);
  QCOMPARE(combo("lr_scheduler_type").toStdString(), std::string(to_string(d.lr_scheduler_type)));
  QCOMPARE(real("warmup_ratio"), d.warmup_ratio);
  QCOMPARE(real("weight_decay"), d.weight_decay);
  QCOMPARE(real("max_grad_norm"), d.max_grad_norm);
  QCOMPARE(flag("bf16"), d.bf16);
  QCOMPARE(flag("gradient_checkpointing"), d.gradient_checkpointing);
  QCOMPARE(spin("logging_steps"), d.logging_steps);
  QCOMPARE(spin("save_steps"), d.save_steps);
  QCOMPARE(spin("save_total_limit"), int64_t{-1});  // unset: keep every checkpoint
  QCOMPARE(combo("eval_strategy").toStdString(), std::string(to_string(d.eval_strategy)));
  QCOMPARE(spin("per_device_eval_batch_size"), d.per_device_eval_batch_size);
  QCOMPARE(spin("seed"), d.seed);
  // Nothing was written: the YAML holds only the required keys, empty.
  QCOMPARE(draft.config().learning_rate, d.learning_rate);
}

void TestHyperparametersPage::validation_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("settings");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  QTest::newRow("demo") << QStringList() << "" << true << "";
  QTest::newRow("learning rate in e notation") << QStringList() << "learning_rate=1.0e-5" << true
                                               << "";
  QTest::newRow("negative learning rate") << QStringList() << "learning_rate=-1" << false
                                          << "learning_rate: must be positive, got -1";
  QTest::newRow("learning rate not a number") << QStringList() << "learning_rate=5e-" << false
                                              << "learning_rate: '5e-' is not a number";
  QTest::newRow("bf16 and fp16") << QStringList() << "bf16=true;fp16=true" << false
                                 << "fp16: cannot be combined with bf16";
  QTest::newRow("batch size 0") << QStringList() << "per_device_train_batch_size=0" << false
                                << "per_device_train_batch_size: must be at least 1, got 0";
  QTest::newRow("warmup_ratio 1") << QStringList() << "warmup_ratio=1" << false
                                  << "warmup_ratio: must be in [0, 1), got 1";
  QTest::newRow("no epochs and no steps") << QStringList() << "max_steps=-1;num_train_epochs=0"
                                          << false << "num_train_epochs: must be positive";
  QTest::newRow("cosine_with_min_lr needs its rate")
      << QStringList() << "lr_scheduler_type=cosine_with_min_lr" << false
      << "needs exactly one of min_lr_rate or min_lr";
  QTest::newRow("save_total_limit 0") << QStringList() << "save_total_limit=0" << false
                                      << "save_total_limit: must be at least 1";
  QTest::newRow("evaluation without data") << QStringList{"val_size=0"} << "" << false
                                           << "eval_strategy: needs evaluation data";
  QTest::newRow("no evaluation") << QStringList{"val_size=0"} << "eval_strategy=no;eval_steps=-1"
                                 << true << "";
  QTest::newRow("output_dir empty") << QStringList() << "output_dir=" << false
                                    << "output_dir: required";
}

void TestHyperparametersPage::validation() {
  QFETCH(QStringList, overrides);
  QFETCH(QString, settings);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  RunDraft draft;
  HyperparametersPage page(&draft);
  draft.load(wizard_test::demoRun(overrides), QDir::tempPath());
  QVERIFY(wizard_test::setFields(&page, settings));
  wizard_test::verifyPage(page, complete, message);
}

void TestHyperparametersPage::typedValuesReachTheConfig() {
  RunDraft draft;
  HyperparametersPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QVERIFY(wizard_test::setFields(
      &page, QStringLiteral("learning_rate=2e-5;num_train_epochs=2;max_steps=-1;"
                            "per_device_train_batch_size=4;gradient_accumulation_steps=8;"
                            "lr_scheduler_type=constant_with_warmup;warmup_ratio=0.1;"
                            "weight_decay=0.05;max_grad_norm=0.5;bf16=true;"
                            "gradient_checkpointing=true;logging_steps=2;save_steps=100;"
                            "save_total_limit=3;eval_strategy=epoch;eval_steps=-1;"
                            "per_device_eval_batch_size=2;seed=7;output_dir=/tmp/out")));
  const studio::RunConfig& c = draft.config();
  QCOMPARE(c.learning_rate, 2e-5);
  QCOMPARE(c.num_train_epochs, 2.0);
  QCOMPARE(c.max_steps, int64_t{-1});
  QCOMPARE(c.per_device_train_batch_size, int64_t{4});
  QCOMPARE(c.gradient_accumulation_steps, int64_t{8});
  QCOMPARE(c.lr_scheduler_type, studio::LrScheduler::ConstantWithWarmup);
  QCOMPARE(c.warmup_ratio, 0.1);
  QCOMPARE(c.weight_decay, 0.05);
  QCOMPARE(c.max_grad_norm, 0.5);
  QVERIFY(c.bf16 && c.gradient_checkpointing);
  QCOMPARE(c.logging_steps, int64_t{2});
  QCOMPARE(c.save_steps, int64_t{100});
  QCOMPARE(c.save_total_limit.value_or(0), int64_t{3});
  QCOMPARE(c.eval_strategy, studio::EvalStrategy::Epoch);
  QVERIFY(!c.eval_steps);
  QCOMPARE(c.per_device_eval_batch_size, int64_t{2});
  QCOMPARE(c.seed, int64_t{7});
  QCOMPARE(c.output_dir, std::string("/tmp/out"));
  QVERIFY(wizard_test::settled(draft));
  QVERIFY2(page.isComplete(), qPrintable(page.messageText()));
}

QTEST_MAIN(TestHyperparametersPage)
#include "tst_hyperparameters_page.moc"
