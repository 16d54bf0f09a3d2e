// RunWizard: importing every example and demo YAML exports it back unchanged (unknown keys
// verbatim, listed on Review); choices made on the pages come out as the YAML keys users know
// and pass validate_config; the demo fills the pages and Launch emits launchRequested with that
// config; an SSH target launches there (Launch emits the target), several nodes on this machine
// disable Launch but not export; Review's buttons and
// diagnostics.
#include <QAbstractItemModelTester>
#include <QClipboard>
#include <QDirIterator>
#include <QGuiApplication>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QtTest>

#include "studio/config/llamafactory_target.h"

#include "studio/config/validate.h"
#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/diagnostics_model.h"
#include "studio/ui/wizard/data_page.h"
#include "studio/ui/wizard/hyperparameters_page.h"
#include "studio/ui/wizard/method_page.h"
#include "studio/ui/wizard/model_page.h"
#include "studio/ui/wizard/parallelism_page.h"
#include "studio/ui/wizard/review_page.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/ui/wizard/sample_preview.h"
#include "studio/ui/wizard/target_page.h"
#include "wizard_test_support.h"

using studio::ui::LaunchTarget;
using studio::ui::RunWizard;

namespace {

std::string readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
}

std::vector<std::pair<std::string, std::string>> extraKeys(const studio::RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& x : c.extra_keys) out.emplace_back(x.key, x.value.text);
  return out;
}

}  // namespace

class TestRunWizard : public QObject {
  Q_OBJECT

 private slots:
  void roundTrip_data();
  void roundTrip();
  void importRefusesBrokenYaml();
  void choicesBecomeYaml();
  void demoFillsThePagesAndLaunches();
  void launchTargets();
  void reviewShowsEveryProblem();
  void llamaFactoryAsTheTrainer();
};

void TestRunWizard::roundTrip_data() {
  QTest::addColumn<QString>("file");
  for (const QString& dir : {QStringLiteral("resources/examples"), QStringLiteral("resources/demo"),
                             QStringLiteral("tests/ui/wizard/data")}) {
    QDirIterator it(wizard_test::sourcePath(dir), {QStringLiteral("*.yaml")}, QDir::Files);
    while (it.hasNext()) {
      const QString path = it.next();
      QTest::newRow(qPrintable(dir + QLatin1Char('/') + QFileInfo(path).fileName())) << path;
    }
  }
}

void TestRunWizard::roundTrip() {
  QFETCH(QString, file);
  const studio::LoadResult original = studio::load_config_file(file.toStdString());
  QVERIFY(original.ok());
  RunWizard wizard;
  QString error;
  QVERIFY2(wizard.openConfig(file, &error), qPrintable(error));
  QCOMPARE(wizard.baseDir(), QFileInfo(file).absolutePath());
  // Let every page load, list and validate what it shows: none of that may change the config.
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QTRY_VERIFY_WITH_TIMEOUT(!wizard.dataPage()->isBusy(), 20000);
  const std::string expected = studio::to_yaml(original.config);
  QCOMPARE(wizard.yamlText().toStdString(), expected);

  QTemporaryDir dir;
  const QString out = dir.filePath(QStringLiteral("exported.yaml"));
  QVERIFY(wizard.reviewPage()->exportYaml(out, &error));
  QCOMPARE(readAll(out), expected);
  const studio::LoadResult again = studio::load_config_file(out.toStdString());
  QVERIFY(again.ok());
  QCOMPARE(studio::config_to_json(again.config).dump(),
           studio::config_to_json(original.config).dump());
  QCOMPARE(extraKeys(again.config), extraKeys(original.config));
  // The command line now names the exported file.
  QVERIFY(wizard.commandLine().contains(out));

  QStringList kept;
  for (const auto& [key, value] : extraKeys(original.config)) kept << QString::fromStdString(key);
  QCOMPARE(wizard.reviewPage()->keptKeysText(),
           kept.isEmpty() ? QString()
                          : QStringLiteral("Kept as written: ") + kept.join(QStringLiteral(", ")));
}

void TestRunWizard::importRefusesBrokenYaml() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("broken.yaml"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: /m\nstage: [sft\n");
  f.close();
  RunWizard wizard;
  wizard.loadDemo(wizard_test::demoConfig());
  const std::string before = wizard.yamlText().toStdString();
  QString error;
  QVERIFY(!wizard.openConfig(path, &error));
  QVERIFY2(error.startsWith(path + QStringLiteral(":")), qPrintable(error));
  QVERIFY(!wizard.openConfig(dir.filePath(QStringLiteral("missing.yaml")), &error));
  QVERIFY2(error.contains(QStringLiteral("missing.yaml")), qPrintable(error));
  QCOMPARE(wizard.yamlText().toStdString(), before);
}

// Widgets set as a user would; the export holds the keys users know, and validate_config accepts
// it for the chosen world.
void TestRunWizard::choicesBecomeYaml() {
  QTemporaryDir dir;
  RunWizard wizard;
  wizard.setDemoModelDir(wizard_test::demoModel());
  wizard.modelPage()->demoButton()->click();
  wizard.dataPage()->datasetDirEdit()->setText(wizard_test::demoData());
  QTRY_COMPARE(wizard.dataPage()->datasetModel()->rowCount(), 5);
  for (int row = 0; row < 4; ++row) {
    QStandardItem* item = wizard.dataPage()->datasetModel()->item(row);
    if (item->data(Qt::UserRole) == QStringLiteral("demo_dpo")) item->setCheckState(Qt::Checked);
  }
  QVERIFY(wizard_test::setFields(wizard.dataPage(),
                                 QStringLiteral("template=qwen;cutoff_len=256;max_samples=200;"
                                                "val_size=0.1")));
  QVERIFY(wizard_test::setFields(wizard.methodPage(),
                                 QStringLiteral("stage=dpo;pref_beta=0.2;pref_loss=ipo")));
  wizard.parallelismPage()->gpusBox()->setValue(2);
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QVERIFY(wizard.parallelismPage()->selectSpSize(2));
  QVERIFY(wizard_test::setField(wizard.parallelismPage(),
                                QStringLiteral("sequence_parallel_mode"),
                                QStringLiteral("ulysses")));
  QVERIFY(wizard_test::setFields(
      wizard.hyperparametersPage(),
      QStringLiteral("learning_rate=1e-6;num_train_epochs=2;bf16=true;eval_strategy=steps;"
                     "eval_steps=20;output_dir=") +
          dir.filePath(QStringLiteral("run"))));

  const QString out = dir.filePath(QStringLiteral("run.yaml"));
  QString error;
  QVERIFY2(wizard.reviewPage()->exportYaml(out, &error), qPrintable(error));
  const studio::LoadResult loaded = studio::load_config_file(out.toStdString());
  QVERIFY(loaded.ok());
  const studio::RunConfig& c = loaded.config;
  QCOMPARE(c.model_name_or_path, wizard_test::demoModel().toStdString());
  QCOMPARE(c.dataset, std::vector<std::string>{"demo_dpo"});
  QCOMPARE(c.dataset_dir, wizard_test::demoData().toStdString());
  QCOMPARE(c.template_name, std::string("qwen"));
  QCOMPARE(c.cutoff_len, int64_t{256});
  QCOMPARE(c.max_samples.value_or(0), int64_t{200});
  QCOMPARE(c.val_size, 0.1);
  QCOMPARE(c.stage, studio::Stage::Dpo);
  QCOMPARE(c.pref_beta, 0.2);
  QCOMPARE(c.pref_loss, studio::PrefLoss::Ipo);
  QCOMPARE(c.sequence_parallel_size, int64_t{2});
  QCOMPARE(c.sequence_parallel_mode, studio::SpMode::Ulysses);
  QCOMPARE(c.learning_rate, 1e-6);
  QCOMPARE(c.num_train_epochs, 2.0);
  QVERIFY(c.bf16);
  QCOMPARE(c.eval_strategy, studio::EvalStrategy::Steps);
  QCOMPARE(c.eval_steps.value_or(0), int64_t{20});
  // Only the keys set are written (and the required ones): it reads like a hand-written file.
  QStringList keys;
  for (const auto& [key, pos] : c.source.key_pos) keys << QString::fromStdString(key);
  keys.sort();
  QCOMPARE(keys, (QStringList{"bf16", "cutoff_len", "dataset", "dataset_dir", "eval_steps",
                              "eval_strategy", "learning_rate", "max_samples",
                              "model_name_or_path", "num_train_epochs", "output_dir", "pref_beta",
                              "pref_loss", "sequence_parallel_mode", "sequence_parallel_size",
                              "stage", "template", "val_size"}));

  studio::ValidateOptions opt;
  opt.nproc_per_node = 2;
  opt.for_training = true;
  const auto diags = studio::validate_config(c, opt);
  QVERIFY2(!studio::has_errors(diags), studio::format_all(diags).c_str());
  QCOMPARE(wizard.commandLine(),
           QStringLiteral("cd %1 && studio-train train %2 --nproc 2").arg(wizard.baseDir(), out));
}

void TestRunWizard::demoFillsThePagesAndLaunches() {
  RunWizard wizard;
  wizard.setDemoModelDir(wizard_test::demoModel());
  QString error;
  QVERIFY2(wizard.loadDemo(wizard_test::demoConfig(), &error), qPrintable(error));
  wizard.show();
  QCOMPARE(wizard.currentId(), int(RunWizard::ModelPageId));
  QCOMPARE(wizard.modelPage()->pathEdit()->text(), wizard_test::demoModel());
  QTRY_COMPARE(wizard.modelPage()->fact("architecture"), QStringLiteral("Qwen2ForCausalLM"));
  QTRY_COMPARE(wizard.dataPage()->datasetModel()->rowCount(), 5);
  QCOMPARE(wizard.dataPage()->datasetModel()->item(0)->checkState(), Qt::Checked);
  QCOMPARE(wizard.dataPage()->findChild<QSpinBox*>("cutoff_len")->value(), 96);
  QCOMPARE(wizard.hyperparametersPage()->findChild<QLineEdit*>("learning_rate")->text(),
           QStringLiteral("0.003"));
  QCOMPARE(wizard.hyperparametersPage()->findChild<QSpinBox*>("max_steps")->value(), 60);
  const QString output = QString::fromStdString(wizard.config().output_dir);
  QVERIFY2(output.startsWith(QStringLiteral(STUDIO_BINARY_DIR)), qPrintable(output));
  QVERIFY(output.endsWith(QStringLiteral("/demo/run")));

  // Next through every page: each is complete for the demo.
  QTRY_VERIFY_WITH_TIMEOUT(wizard.dataPage()->preview()->report().has_value(), 20000);
  for (int id = RunWizard::ModelPageId; id < RunWizard::ReviewPageId; ++id) {
    QTRY_VERIFY2(wizard.currentPage()->isComplete(),
                 qPrintable(wizard.currentPage()->title()));
    wizard.next();
  }
  QCOMPARE(wizard.currentId(), int(RunWizard::ReviewPageId));

  QPushButton* launch = wizard.reviewPage()->launchButton();
  QTRY_VERIFY(launch->isEnabled());
  QSignalSpy spy(&wizard, &RunWizard::launchRequested);
  launch->click();
  QCOMPARE(spy.count(), 1);
  const auto config = spy.at(0).at(0).value<studio::RunConfig>();
  QCOMPARE(config.model_name_or_path, wizard_test::demoModel().toStdString());
  QCOMPARE(config.dataset, std::vector<std::string>{"demo_sft"});
  QCOMPARE(config.dataset_dir, wizard_test::demoData().toStdString());
  QCOMPARE(config.max_steps, int64_t{60});
  QCOMPARE(studio::to_yaml(config), wizard.yamlText().toStdString());
  QCOMPARE(spy.at(0).at(1).toString(), QFileInfo(wizard_test::demoConfig()).absolutePath());
  const auto target = spy.at(0).at(2).value<LaunchTarget>();
  QCOMPARE(target.kind, LaunchTarget::Local);
  QCOMPARE(target.nproc, 1);
  QCOMPARE(target.nnodes, 1);

  // Copy command line puts the command on the clipboard.
  wizard.reviewPage()->copyButton()->click();
  QCOMPARE(QGuiApplication::clipboard()->text(), wizard.commandLine());
  QVERIFY(wizard.commandLine().startsWith(QStringLiteral("cd ")));
}

void TestRunWizard::launchTargets() {
  RunWizard wizard;
  wizard.setDemoModelDir(wizard_test::demoModel());
  QVERIFY(wizard.loadDemo(wizard_test::demoConfig()));
  wizard.targetPage()->setSshTarget(QStringLiteral("ssh://ann@gpu1:2222"));
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QPushButton* launch = wizard.reviewPage()->launchButton();
  // An SSH host: Launch submits there; the request carries the host.
  QTRY_VERIFY(launch->isEnabled());
  QCOMPARE(launch->text(), QStringLiteral("&Launch on ann@gpu1:2222"));
  QVERIFY(wizard.reviewPage()->exportButton()->isEnabled());
  QCOMPARE(wizard.target().kind, LaunchTarget::Ssh);
  QCOMPARE(wizard.target().sshTarget, QStringLiteral("ann@gpu1:2222"));
  QVERIFY2(wizard.commandLine().startsWith(QStringLiteral("ssh -p 2222 ann@gpu1 'cd ")),
           qPrintable(wizard.commandLine()));
  QSignalSpy requested(&wizard, &RunWizard::launchRequested);
  launch->click();
  QCOMPARE(requested.count(), 1);
  const auto sent = requested.at(0).at(2).value<LaunchTarget>();
  QCOMPARE(sent.kind, LaunchTarget::Ssh);
  QCOMPARE(sent.sshTarget, QStringLiteral("ann@gpu1:2222"));
  QCOMPARE(sent.nproc, wizard.target().nproc);

  wizard.targetPage()->setLocal();
  QTRY_VERIFY(launch->isEnabled());
  QCOMPARE(launch->text(), QStringLiteral("&Launch"));

  // Several nodes are started by hand on each node: Launch says so.
  wizard.parallelismPage()->nodesBox()->setValue(2);
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QVERIFY(!launch->isEnabled());
  QCOMPARE(launch->text(), QStringLiteral("Several nodes: run the command line on each"));
  QVERIFY(wizard.commandLine().contains(QStringLiteral(" --nnodes 2 --node-rank \"$NODE_RANK\"")));
}

// "Train with: LLaMA-Factory": the YAML shown (and exported) has none of the studio's own keys, the
// command line is LLaMA-Factory's, the launch request carries the choice; a studio-only setting
// (sequence parallelism) blocks Launch with the reason.
void TestRunWizard::llamaFactoryAsTheTrainer() {
  RunWizard wizard;
  wizard.setDemoModelDir(wizard_test::demoModel());
  QVERIFY(wizard.loadDemo(wizard_test::demoConfig()));
  QVERIFY(wizard_test::settled(*wizard.draft()));
  studio::ui::ReviewPage* review = wizard.reviewPage();
  review->setTrainer(LaunchTarget::LlamaFactory, QStringLiteral("/opt/lf/bin/llamafactory-cli"));
  QTRY_VERIFY(review->launchButton()->isEnabled());
  const QString yaml = review->editor()->toPlainText();
  QVERIFY2(yaml.contains(QStringLiteral("model_name_or_path:")), qPrintable(yaml));
  for (auto key : studio::llamafactory_unknown_keys())
    QVERIFY2(!yaml.contains(QString::fromLatin1(key.data(), qsizetype(key.size())) + ":"),
             qPrintable(yaml));
  QVERIFY2(wizard.commandLine().contains(
               QStringLiteral("env 'FORCE_TORCHRUN=1' 'NPROC_PER_NODE=")) &&
               wizard.commandLine().contains(QStringLiteral("/opt/lf/bin/llamafactory-cli train ")),
           qPrintable(wizard.commandLine()));
  QSignalSpy requested(&wizard, &RunWizard::launchRequested);
  review->launchButton()->click();
  QCOMPARE(requested.count(), 1);
  const auto sent = requested.at(0).at(2).value<LaunchTarget>();
  QCOMPARE(sent.trainer, LaunchTarget::LlamaFactory);
  QCOMPARE(sent.llamafactoryCli, QStringLiteral("/opt/lf/bin/llamafactory-cli"));

  // Sequence parallelism is the studio's: LLaMA-Factory cannot run it.
  auto* problems = review->findChild<QLabel*>(QStringLiteral("llamafactoryProblems"));
  QVERIFY(problems != nullptr);
  wizard.draft()->edit([](studio::RunConfig& cfg) { cfg.sequence_parallel_size = 2; });
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QTRY_VERIFY(!review->launchButton()->isEnabled());
  QVERIFY2(problems->text().contains(QStringLiteral("sequence_parallel_size: 2 is not a "
                                                    "LLaMA-Factory 0.9.5 key")),
           qPrintable(problems->text()));
  review->setTrainer(LaunchTarget::StudioTrain);
  QVERIFY(!problems->isVisibleTo(review));
}

void TestRunWizard::reviewShowsEveryProblem() {
  RunWizard wizard;
  QAbstractItemModelTester tester(wizard.reviewPage()->diagnosticsModel(),
                                  QAbstractItemModelTester::FailureReportingMode::QtTest);
  QVERIFY(wizard.openConfig(wizard_test::testData("unknown_keys.yaml")));
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QTRY_VERIFY(wizard.reviewPage()->launchButton()->isEnabled());
  QCOMPARE(wizard.reviewPage()->diagnosticsModel()->errorCount(), 0);
  QVERIFY(wizard.reviewPage()->diagnosticsModel()->warningCount() >= 5);  // the unknown keys
  QVERIFY2(wizard.reviewPage()->summaryText().endsWith(QStringLiteral(" warnings; the run can start.")),
           qPrintable(wizard.reviewPage()->summaryText()));

  // An error blocks Launch; its line in the shown YAML is marked.
  QVERIFY(wizard_test::setField(wizard.hyperparametersPage(), QStringLiteral("learning_rate"),
                                QStringLiteral("-1")));
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QVERIFY(!wizard.reviewPage()->launchButton()->isEnabled());
  QVERIFY2(wizard.reviewPage()->summaryText().startsWith(QStringLiteral("1 error, ")),
           qPrintable(wizard.reviewPage()->summaryText()));
  const auto& diags = wizard.reviewPage()->diagnosticsModel()->diagnostics();
  const auto it = std::find_if(diags.begin(), diags.end(),
                               [](const auto& d) { return d.key == "learning_rate"; });
  QVERIFY(it != diags.end());
  const QStringList lines = wizard.reviewPage()->editor()->toPlainText().split('\n');
  QCOMPARE(lines.at(it->line - 1), QStringLiteral("learning_rate: -1.0"));
  QCOMPARE(wizard.reviewPage()->editor()->lineMarks().count(it->line), size_t{1});
  QVERIFY(wizard.reviewPage()->editor()->isReadOnly());
}

QTEST_MAIN(TestRunWizard)
#include "tst_run_wizard.moc"
