// DataPage: live validation of the data keys, the dataset list read from dataset_info.json off
// the GUI thread (an item model, checked against QAbstractItemModelTester), the registration a
// single data file needs, and the preview: rendered samples with masked spans in grey, the length
// histogram and the truncation count, recomputed when cutoff_len changes.
#include <QAbstractItemModelTester>
#include <QLineEdit>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTextBlock>
#include <QtTest>

#include "studio/config/config_io.h"
#include "studio/ui/wizard/data_page.h"
#include "studio/ui/wizard/length_histogram.h"
#include "studio/ui/wizard/sample_preview.h"
#include "wizard_test_support.h"

using studio::ui::DataPage;
using studio::ui::RunDraft;

namespace {

// Text of the fragments drawn in `color`, concatenated.
QString textInColor(const QTextDocument* doc, const QColor& color) {
  QString out;
  for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
    for (auto it = b.begin(); !it.atEnd(); ++it)
      if (it.fragment().charFormat().foreground().color() == color) out += it.fragment().text();
  return out;
}

QStringList checkedNames(const QStandardItemModel* model) {
  QStringList out;
  for (int row = 0; row < model->rowCount(); ++row)
    if (model->item(row)->checkState() == Qt::Checked)
      out << model->item(row)->data(Qt::UserRole).toString();
  return out;
}

}  // namespace

class TestDataPage : public QObject {
  Q_OBJECT

 private slots:
  void validation_data();
  void validation();
  void datasetList();
  void dataFileShowsItsRegistration();
  void previewShowsMaskedSpans();
  void cutoffChangesTheHistogram();
  void dpoPreviewShowsChosenAndRejected();
  void ktoPreviewShowsTargetAndKl();
  void llamaFactoryV1TrainDataset();
};

void TestDataPage::validation_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("settings");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  QTest::newRow("demo") << QStringList() << "" << true << "";
  QTest::newRow("mask_history and train_on_prompt")
      << QStringList() << "mask_history=true;train_on_prompt=true" << true << "";
  QTest::newRow("cutoff_len 0") << QStringList() << "cutoff_len=0" << false
                                << "cutoff_len: must be at least 1, got 0";
  QTest::newRow("max_samples 0") << QStringList() << "max_samples=0" << false
                                 << "max_samples: must be at least 1";
  QTest::newRow("max_samples all") << QStringList{"max_samples=100"} << "max_samples=-1" << true
                                   << "";
  QTest::newRow("val_size 1.5") << QStringList() << "val_size=1.5" << false
                                << "val_size: must be a fraction in [0, 1) or a whole number";
  QTest::newRow("val_size without evaluation")
      << QStringList{"eval_strategy=no", "eval_steps=null"} << "" << true
      << "val_size: evaluation data is given but eval_strategy is no";
  QTest::newRow("missing folder") << QStringList() << "dataset_dir=/nonexistent/data" << false
                                  << "dataset_dir: no such folder: /nonexistent/data";
  QTest::newRow("unknown dataset") << QStringList{"dataset=nope"} << "" << false
                                   << "dataset: 'nope' is not in";
  QTest::newRow("preference data for sft") << QStringList{"dataset=demo_dpo"} << "" << false
                                           << "is a preference dataset";
  QTest::newRow("template the engine lacks") << QStringList{"template=chatml9"} << "" << false
                                             << "template: 'chatml9' is not a chat template";
  QTest::newRow("template llama3 on the demo tokenizer")
      << QStringList() << "template=llama3" << false
      << "preview: template 'llama3' ends answers with <|eot_id|>, which";
}

void TestDataPage::validation() {
  QFETCH(QStringList, overrides);
  QFETCH(QString, settings);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  RunDraft draft;
  DataPage page(&draft);
  draft.load(wizard_test::demoRun(overrides), QDir::tempPath());
  QVERIFY(wizard_test::setFields(&page, settings));
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy(), 20000);
  wizard_test::verifyPage(page, complete, message);
}

void TestDataPage::datasetList() {
  RunDraft draft;
  DataPage page(&draft);
  QAbstractItemModelTester tester(page.datasetModel(),
                                  QAbstractItemModelTester::FailureReportingMode::QtTest);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QTRY_COMPARE(page.datasetModel()->rowCount(), 5);  // demo_sft, demo_sft_sharegpt, demo_dpo, demo_pt, demo_kto
  QCOMPARE(checkedNames(page.datasetModel()), QStringList{"demo_sft"});
  // Configured names first, then the file's others; preference data says so.
  QCOMPARE(page.datasetModel()->item(0)->text(), QStringLiteral("demo_sft  (demo_sft.json)"));
  QVERIFY(page.datasetModel()->item(1)->text().contains(QStringLiteral("preference pairs")) ||
          page.datasetModel()->item(2)->text().contains(QStringLiteral("preference pairs")));

  // Checking a dataset appends it in list order; unchecking removes it.
  for (int row = 0; row < page.datasetModel()->rowCount(); ++row)
    if (page.datasetModel()->item(row)->data(Qt::UserRole) == QStringLiteral("demo_sft_sharegpt"))
      page.datasetModel()->item(row)->setCheckState(Qt::Checked);
  QCOMPARE(draft.config().dataset, (std::vector<std::string>{"demo_sft", "demo_sft_sharegpt"}));
  page.datasetModel()->item(0)->setCheckState(Qt::Unchecked);
  QCOMPARE(draft.config().dataset, (std::vector<std::string>{"demo_sft_sharegpt"}));

  // A name the file lacks stays listed, checked, so the error has something to point at.
  draft.load(wizard_test::demoRun({"dataset=[gone, demo_sft]"}), QDir::tempPath());
  QCOMPARE(page.datasetModel()->item(0)->text(),
           QStringLiteral("gone  (not in dataset_info.json)"));
  QCOMPARE(checkedNames(page.datasetModel()), (QStringList{"gone", "demo_sft"}));
  QVERIFY(wizard_test::settled(draft));
  QVERIFY(page.messageText().contains(QStringLiteral("dataset: 'gone' is not in")));
}

void TestDataPage::dataFileShowsItsRegistration() {
  RunDraft draft;
  DataPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  const QString file = wizard_test::demoData() + QStringLiteral("/demo_sft_sharegpt.jsonl");
  page.datasetDirEdit()->setText(file);
  QTRY_VERIFY(page.registrationText().contains(QStringLiteral(
      R"("demo_sft_sharegpt": {"file_name":"demo_sft_sharegpt.jsonl","formatting":"sharegpt"})")));
  QVERIFY(wizard_test::settled(draft));
  QTRY_VERIFY(!page.isBusy());
  QVERIFY(!page.isComplete());
  QVERIFY2(page.messageText().contains(QStringLiteral("dataset_dir: a data file, not a folder")),
           qPrintable(page.messageText()));
  QCOMPARE(page.datasetModel()->rowCount(), 1);  // the configured name, not in any listing
  // Nothing was written next to the data file.
  QVERIFY(!QFile::exists(file + QStringLiteral("/dataset_info.json")));
}

void TestDataPage::previewShowsMaskedSpans() {
  RunDraft draft;
  DataPage page(&draft);
  QSignalSpy shown(&page, &DataPage::previewShown);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report().has_value(), 20000);
  QCOMPARE(shown.count(), 1);
  const auto& report = *page.preview()->report();
  QCOMPARE(static_cast<int>(report.samples.size()), DataPage::kPreviewSamples);
  QCOMPARE(report.samples[0].dataset, std::string("demo_sft"));

  // The prompt (with the template's markers) is grey, the answer is in the text colour.
  const QTextDocument* doc = page.preview()->document();
  const QString masked = textInColor(doc, page.preview()->maskedColor());
  QVERIFY2(masked.contains(QStringLiteral("<|im_start|>user")), qPrintable(masked));
  QVERIFY(masked.contains(QStringLiteral("grey text is masked (not learned)")));
  const QString learned = textInColor(doc, page.preview()->palette().color(QPalette::Text));
  QVERIFY2(learned.contains(QStringLiteral("<|im_end|>")), qPrintable(learned));
  QVERIFY(!learned.contains(QStringLiteral("<|im_start|>user")));
  QVERIFY(page.preview()->maskedColor() != page.preview()->palette().color(QPalette::Text));

  // Every sample is in the histogram; demo samples are far below cutoff_len 96.
  double total = 0;
  for (double n : page.histogram()->counts()) total += n;
  QCOMPARE(static_cast<int64_t>(total), report.stats.samples);
  QCOMPARE(page.histogram()->counts().size(), 11);  // 8 eighths + 3 bins above cutoff_len
  QCOMPARE(page.histogram()->cutoffX(), 7.5);
  QCOMPARE(page.histogram()->binLabels().at(7), QStringLiteral("≤96"));
  QCOMPARE(page.truncationText(),
           QStringLiteral("0 of %1 samples will be truncated to cutoff_len 96.")
               .arg(report.stats.samples));
  QVERIFY(page.isComplete());
}

void TestDataPage::cutoffChangesTheHistogram() {
  RunDraft draft;
  DataPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report().has_value(), 20000);
  const int64_t samples = page.preview()->report()->stats.samples;
  QVERIFY(wizard_test::setField(&page, QStringLiteral("cutoff_len"), QStringLiteral("16")));
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report()->cutoff_len == 16, 20000);
  const auto& stats = page.preview()->report()->stats;
  QVERIFY(stats.truncated > 0);
  QCOMPARE(page.truncationText(),
           QStringLiteral("%1 of %2 samples will be truncated to cutoff_len 16.")
               .arg(stats.truncated)
               .arg(samples));
  double above = 0;
  const QVector<double> counts = page.histogram()->counts();
  for (int i = 8; i < counts.size(); ++i) above += counts[i];
  QCOMPARE(static_cast<int64_t>(above), stats.truncated);
  QVERIFY(page.preview()->report()->samples[0].truncated ||
          page.preview()->report()->samples[0].sequence.tokens <= 16);
}

void TestDataPage::dpoPreviewShowsChosenAndRejected() {
  RunDraft draft;
  DataPage page(&draft);
  draft.load(wizard_test::demoRun({"stage=dpo", "dataset=demo_dpo"}), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report().has_value(), 20000);
  const auto& s = page.preview()->report()->samples.at(0);
  QVERIFY(s.chosen.tokens > 0 && s.rejected.tokens > 0);
  const QString text = page.preview()->toPlainText();
  QVERIFY(text.contains(QStringLiteral("chosen:")) && text.contains(QStringLiteral("rejected:")));
  QVERIFY(wizard_test::settled(draft));
  QVERIFY2(page.isComplete(), qPrintable(page.messageText()));
}

// Stage kto: each example's target, marked desirable or not, and its KL sequence (the same
// prompt with the previous row's answer), the KL one drawn as scored, with the counts of each kind.
void TestDataPage::ktoPreviewShowsTargetAndKl() {
  RunDraft draft;
  DataPage page(&draft);
  draft.load(wizard_test::demoRun({"stage=kto", "dataset=demo_kto"}), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report().has_value(), 20000);
  const auto& report = *page.preview()->report();
  QCOMPARE(report.stage, studio::Stage::Kto);
  const auto& samples = report.samples;
  QVERIFY(samples.size() >= 2);
  QVERIFY(report.stats.desirable > 0 && report.stats.desirable < report.stats.samples);
  const QString text = page.preview()->toPlainText();
  for (const auto& s : samples) {
    QVERIFY(s.sequence.tokens > 0 && s.kl.tokens > 0);
    QVERIFY(s.sequence.learned_tokens > 0);
    const QString head = QStringLiteral("%1, row %2: %3, %4 tokens")
                             .arg(QString::fromStdString(s.dataset))
                             .arg(s.row)
                             .arg(s.desirable ? "desirable" : "undesirable")
                             .arg(s.sequence.tokens);
    QVERIFY2(text.contains(head), qPrintable(head + "\n" + text.left(2000)));
  }
  // The second example's KL response is the first example's answer.
  QVERIFY(text.contains(QStringLiteral("KL sequence (scored, not learned):")));
  QString answer;
  for (const auto& span : samples[0].sequence.spans)
    if (span.learned) answer += QString::fromStdString(span.text);
  QString kl;
  for (const auto& span : samples[1].kl.spans)
    if (span.learned) kl += QString::fromStdString(span.text);
  QVERIFY(!answer.isEmpty());
  QCOMPARE(kl, answer);
  QVERIFY(wizard_test::settled(draft));
  QVERIFY2(page.isComplete(), qPrintable(page.messageText()));
}

// A LLaMA-Factory v1 file: train_dataset instead of dataset_dir, the dataset YAML's entries
// listed (off the GUI thread), and a preview read with the YAML's paths taken from the config's
// folder, not the studio's working directory. A dataset YAML naming hub data is an error.
void TestDataPage::llamaFactoryV1TrainDataset() {
  const QString dir = wizard_test::sourcePath(QStringLiteral("tests/fixtures/configs/v1"));
  studio::LoadResult loaded =
      studio::load_config_file((dir + QStringLiteral("/train_full_fsdp2.yaml")).toStdString());
  QVERIFY(loaded.config.is_v1());
  loaded.config.model_name_or_path = wizard_test::demoModel().toStdString();
  RunDraft draft;
  DataPage page(&draft);
  page.show();
  QAbstractItemModelTester tester(page.datasetModel(),
                                  QAbstractItemModelTester::FailureReportingMode::QtTest);
  draft.load(loaded.config, dir);
  QVERIFY(QDir::currentPath() != dir);
  QCOMPARE(page.trainDatasetEdit()->text(), QStringLiteral("data/sft.yaml"));
  QVERIFY(page.trainDatasetEdit()->isVisible());
  QVERIFY(!page.datasetDirEdit()->isVisible());
  QTRY_COMPARE(page.datasetModel()->rowCount(), 3);
  QCOMPARE(page.datasetModel()->item(0)->text(),
           QStringLiteral("identity  (data/identity.json, alpaca)"));
  QCOMPARE(page.datasetModel()->item(1)->text(),
           QStringLiteral("chat  (data/chat.jsonl, sharegpt, 1 rows)"));
  QVERIFY(!page.datasetModel()->item(0)->isCheckable());
  QTRY_VERIFY_WITH_TIMEOUT(page.preview()->report().has_value(), 20000);
  QVERIFY(!page.preview()->report()->samples.empty());
  QTRY_VERIFY(!page.isBusy());
  QVERIFY2(page.isComplete(), qPrintable(page.messageText()));

  // Typed: a dataset YAML of hub data is refused at its line.
  page.trainDatasetEdit()->setText(QStringLiteral("data/hub.yaml"));
  emit page.trainDatasetEdit()->textEdited(page.trainDatasetEdit()->text());
  QCOMPARE(QString::fromStdString(draft.config().v1.train_dataset), QStringLiteral("data/hub.yaml"));
  QVERIFY(wizard_test::settled(draft));
  QTRY_VERIFY(!page.isBusy());
  QTRY_VERIFY2(page.messageText().contains(QStringLiteral("train_dataset: ")) &&
                   page.messageText().contains(QStringLiteral("hub.yaml:")),
               qPrintable(page.messageText()));
  QVERIFY(!page.isComplete());
}

QTEST_MAIN(TestDataPage)
#include "tst_data_page.moc"
