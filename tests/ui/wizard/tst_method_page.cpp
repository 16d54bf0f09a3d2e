// MethodPage: SFT or DPO, the DPO settings enabled only for DPO, and validate_config's rules for
// them shown live.
#include <QComboBox>
#include <QGroupBox>
#include <QtTest>

#include "studio/ui/wizard/method_page.h"
#include "wizard_test_support.h"

using studio::ui::MethodPage;
using studio::ui::RunDraft;

class TestMethodPage : public QObject {
  Q_OBJECT

 private slots:
  void validation_data();
  void validation();
  void dpoSettingsFollowTheStage();
};

void TestMethodPage::validation_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("settings");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  const QStringList dpoData{"dataset=demo_dpo"};
  QTest::newRow("sft") << QStringList() << "" << true << "";
  QTest::newRow("dpo on instruction data") << QStringList() << "stage=dpo" << false
                                           << "dataset: 'demo_sft' is not a preference dataset";
  QTest::newRow("dpo") << dpoData << "stage=dpo" << true << "";
  QTest::newRow("dpo, every setting")
      << dpoData
      << "stage=dpo;pref_beta=0.2;pref_loss=hinge;pref_ftx=0.5;precompute_ref_logps=true" << true
      << "";
  QTest::newRow("pref_beta 0") << dpoData << "stage=dpo;pref_beta=0" << false
                               << "pref_beta: must be positive, got 0";
  QTest::newRow("label smoothing too large") << dpoData << "stage=dpo;dpo_label_smoothing=0.7"
                                             << false << "dpo_label_smoothing: must be in [0, 0.5]";
  QTest::newRow("label smoothing with ipo")
      << dpoData << "stage=dpo;pref_loss=ipo;dpo_label_smoothing=0.1" << true
      << "dpo_label_smoothing: only applies to pref_loss: sigmoid; ignored";
  QTest::newRow("missing reference model")
      << dpoData << "stage=dpo;ref_model=/nonexistent/ref" << true
      << "ref_model: no such folder: /nonexistent/ref";
  QTest::newRow("pt on plain texts") << QStringList{"dataset=demo_pt"} << "stage=pt" << true << "";
  QTest::newRow("pt on preference pairs") << dpoData << "stage=pt" << false
                                          << "dataset: 'demo_dpo' is a preference dataset";
  QTest::newRow("orpo") << dpoData << "stage=dpo;pref_loss=orpo;pref_beta=0.2" << true << "";
  QTest::newRow("simpo with gamma") << dpoData << "stage=dpo;pref_loss=simpo;simpo_gamma=1.2" << true
                                    << "";
  QTest::newRow("kto_pair") << dpoData << "stage=dpo;pref_loss=kto_pair" << true << "";
  QTest::newRow("rm on preference pairs") << dpoData << "stage=rm" << true << "";
  QTest::newRow("rm on instruction data") << QStringList() << "stage=rm" << false
                                          << "dataset: 'demo_sft' is not a preference dataset (\"ranking\": true), which stage: rm needs";
  QTest::newRow("rm with neat_packing")
      << QStringList{"dataset=demo_dpo", "neat_packing=true"} << "stage=rm" << false
      << "neat_packing: stage rm scores each chosen and rejected sequence";
  QTest::newRow("kto on feedback data") << QStringList{"dataset=demo_kto"}
                                        << "stage=kto;kto_chosen_weight=1.5;pref_ftx=0.1" << true
                                        << "";
  QTest::newRow("kto on preference pairs") << dpoData << "stage=kto" << false
                                           << "dataset: 'demo_dpo' is a preference dataset";
  // (A negative weight cannot be typed: the spin boxes stop at 0; validate refuses it in files.)
  QTest::newRow("kto on instruction data") << QStringList() << "stage=kto" << false
                                           << "dataset: 'demo_sft' has no kto_tag column";
  QTest::newRow("kto pref_beta 0") << QStringList{"dataset=demo_kto"} << "stage=kto;pref_beta=0"
                                   << false << "pref_beta: must be positive, got 0";
  QTest::newRow("dpo keys in an sft run") << QStringList{"pref_beta=0.3"} << "" << true
                                          << "pref_beta: only used with stage: dpo; ignored";
}

void TestMethodPage::validation() {
  QFETCH(QStringList, overrides);
  QFETCH(QString, settings);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(overrides), QDir::tempPath());
  QVERIFY(wizard_test::setFields(&page, settings));
  wizard_test::verifyPage(page, complete, message);
}

void TestMethodPage::dpoSettingsFollowTheStage() {
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QVERIFY(!page.dpoGroup()->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("dpo")));
  QCOMPARE(draft.config().stage, studio::Stage::Dpo);
  QVERIFY(page.dpoGroup()->isEnabled());
  QWidget* smoothing = page.findChild<QWidget*>(QStringLiteral("dpo_label_smoothing"));
  QVERIFY(smoothing->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("ipo")));
  QVERIFY(!smoothing->isEnabled());  // sigmoid only
  // simpo_gamma only for simpo; orpo and simpo build no reference, so its settings are off.
  QWidget* gamma = page.findChild<QWidget*>(QStringLiteral("simpo_gamma"));
  QWidget* reference = page.findChild<QWidget*>(QStringLiteral("ref_model"));
  QWidget* precompute = page.findChild<QWidget*>(QStringLiteral("precompute_ref_logps"));
  QVERIFY(gamma && reference && precompute);
  QVERIFY(!gamma->isEnabled());
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("simpo")));
  QVERIFY(gamma->isEnabled());
  QVERIFY(!reference->isEnabled() && !precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("orpo")));
  QVERIFY(!gamma->isEnabled() && !reference->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("kto_pair")));
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("ipo")));
  // A reward model has no DPO settings; KTO has beta, ftx, its weights and the reference, not
  // the DPO losses.
  QWidget* chosenWeight = page.findChild<QWidget*>(QStringLiteral("kto_chosen_weight"));
  QWidget* loss = page.findChild<QWidget*>(QStringLiteral("pref_loss"));
  QVERIFY(chosenWeight && loss);
  QVERIFY(!chosenWeight->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("rm")));
  QCOMPARE(draft.config().stage, studio::Stage::Rm);
  QVERIFY(!page.dpoGroup()->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("kto")));
  QVERIFY(page.dpoGroup()->isEnabled());
  QVERIFY(chosenWeight->isEnabled() && !loss->isEnabled() && !smoothing->isEnabled() &&
          !gamma->isEnabled());
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("dpo")));
  // The default pref_beta shown is RunConfig{}'s.
  auto* beta = page.findChild<QDoubleSpinBox*>(QStringLiteral("pref_beta"));
  QCOMPARE(beta->value(), studio::RunConfig{}.pref_beta);
  // Clearing the reference folder unsets the key.
  QVERIFY(wizard_test::setField(&page, QStringLiteral("ref_model"), QStringLiteral("/m")));
  QCOMPARE(draft.config().ref_model.value_or(""), std::string("/m"));
  QVERIFY(wizard_test::setField(&page, QStringLiteral("ref_model"), QString()));
  QVERIFY(!draft.config().ref_model);
}

QTEST_MAIN(TestMethodPage)
#include "tst_method_page.moc"
