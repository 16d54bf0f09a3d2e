// The Review page's sweep dialog: the points of the keys and values typed, each checked as
// `studio-train sweep` checks it for the run's world, off the GUI thread; Start Sweep only when
// every point is valid. (tst_studio_local_run starts a sweep from it and sees the points train.)
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QtTest>

#include "studio/ui/wizard/review_page.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/ui/wizard/sweep_dialog.h"
#include "studio/ui/wizard/target_page.h"
#include "wizard_test_support.h"

using studio::ui::SweepDialog;

namespace {

bool checkedNow(SweepDialog& dialog) {
  return QTest::qWaitFor([&] { return !dialog.isChecking(); }, 20000);
}

}  // namespace

class TestSweepDialog : public QObject {
  Q_OBJECT

 private slots:
  void points_data() {
    QTest::addColumn<QStringList>("axes");
    QTest::addColumn<bool>("list");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<QStringList>("points");
    QTest::addColumn<QString>("said");  // in the summary
    QTest::addColumn<bool>("startable");
    QTest::newRow("grid 3 x 2")
        << QStringList{"learning_rate=1e-4,3e-4,1e-3", "per_device_train_batch_size=8,16"} << false
        << 1
        << QStringList{"00-learning_rate=1e-4,per_device_train_batch_size=8",
                       "01-learning_rate=1e-4,per_device_train_batch_size=16",
                       "02-learning_rate=3e-4,per_device_train_batch_size=8",
                       "03-learning_rate=3e-4,per_device_train_batch_size=16",
                       "04-learning_rate=1e-3,per_device_train_batch_size=8",
                       "05-learning_rate=1e-3,per_device_train_batch_size=16"}
        << "6 point(s), all valid." << true;
    QTest::newRow("list") << QStringList{"learning_rate=1e-4,3e-4", "seed=1,2"} << true << 1
                          << QStringList{"00-learning_rate=1e-4,seed=1", "01-learning_rate=3e-4,seed=2"}
                          << "2 point(s), all valid." << true;
    QTest::newRow("list of unequal keys")
        << QStringList{"learning_rate=1e-4,3e-4", "seed=1,2,3"} << true << 1 << QStringList{}
        << "a list sweep takes the i-th value of every key together" << false;
    QTest::newRow("SP size that does not divide the world")
        << QStringList{"sequence_parallel_size=1,2,3"} << false << 2
        << QStringList{"00-sequence_parallel_size=1", "01-sequence_parallel_size=2",
                       "02-sequence_parallel_size=3"}
        << "02-sequence_parallel_size=3: " << false;
    QTest::newRow("a value of the wrong type")
        << QStringList{"learning_rate=fast,1e-4"} << false << 1
        << QStringList{"00-learning_rate=fast", "01-learning_rate=1e-4"}
        << "1 point(s) cannot run" << false;
    QTest::newRow("unknown key") << QStringList{"no_such_key=1,2"} << false << 1
                                 << QStringList{"00-no_such_key=1", "01-no_such_key=2"}
                                 << "no_such_key" << false;
    QTest::newRow("a key without values") << QStringList{"learning_rate="} << false << 1
                                          << QStringList{} << "learning_rate" << false;
  }
  void points() {
    QFETCH(QStringList, axes);
    QFETCH(bool, list);
    QFETCH(int, nproc);
    QFETCH(QStringList, points);
    QFETCH(QString, said);
    QFETCH(bool, startable);
    SweepDialog dialog(wizard_test::demoRun({"max_steps=4"}), wizard_test::sourcePath("."), nproc);
    QVERIFY(checkedNow(dialog));
    QSignalSpy checked(&dialog, &SweepDialog::checked);
    dialog.modeBox()->setCurrentIndex(list ? 1 : 0);
    dialog.setAxes(axes);
    QVERIFY(!dialog.startButton()->isEnabled());  // until the check is back
    QVERIFY(checkedNow(dialog));
    QVERIFY(checked.count() >= 1);
    QStringList shown;
    for (int i = 0; i < dialog.pointsList()->count(); ++i) shown << dialog.pointsList()->item(i)->text();
    QCOMPARE(shown, points);
    QVERIFY2(dialog.summaryLabel()->text().contains(said), qPrintable(dialog.summaryLabel()->text()));
    QCOMPARE(dialog.startButton()->isEnabled(), startable);
    // An invalid point says why on its own row.
    for (int i = 0; i < dialog.pointsList()->count(); ++i) {
      const QString name = dialog.pointsList()->item(i)->text();
      const bool bad = dialog.lastCheck().problems.join('\n').contains(name + ": ");
      QCOMPARE(dialog.pointsList()->item(i)->toolTip().isEmpty(), !bad);
    }
    const auto choice = dialog.choice();
    QCOMPARE(choice.axes, axes);
    QCOMPARE(choice.list, list);
  }

  // The table as a user edits it: the default row (the learning rate at a third, once and three
  // times), a key added and typed in, one removed; each edit checked again.
  void editingTheTable() {
    SweepDialog dialog(wizard_test::demoRun({"learning_rate=3e-3"}), wizard_test::sourcePath("."), 1);
    QVERIFY(checkedNow(dialog));
    QCOMPARE(dialog.choice().axes, QStringList{"learning_rate=0.001,0.003,0.009"});
    QCOMPARE(dialog.pointsList()->count(), 3);
    QVERIFY(dialog.startButton()->isEnabled());
    QCOMPARE(dialog.nameEdit()->text(), QString("wizard-test-sweep"));

    QTest::mouseClick(dialog.addButton(), Qt::LeftButton);
    QCOMPARE(dialog.axesTable()->rowCount(), 2);
    dialog.axesTable()->item(1, 0)->setText("seed");
    dialog.axesTable()->item(1, 1)->setText("1, 2");
    QVERIFY(checkedNow(dialog));
    QCOMPARE(dialog.pointsList()->count(), 6);
    QCOMPARE(dialog.pointsList()->item(1)->text(), QString("01-learning_rate=0.001,seed=2"));

    dialog.axesTable()->setCurrentCell(0, 0);
    QTest::mouseClick(dialog.removeButton(), Qt::LeftButton);
    QVERIFY(checkedNow(dialog));
    QCOMPARE(dialog.choice().axes, QStringList{"seed=1, 2"});
    QCOMPARE(dialog.pointsList()->count(), 2);

    dialog.nameEdit()->clear();  // a sweep needs a name for its folder
    QVERIFY(checkedNow(dialog));
    QVERIFY(!dialog.startButton()->isEnabled());
  }

  // The Review page offers Sweep... where a local studio-train run could launch; the dialog it
  // opens checks the wizard's config for the Target page's processes.
  void reviewPageOpensIt() {
    studio::ui::RunWizard wizard;
    wizard.setDemoModelDir(wizard_test::demoModel());
    QString error;
    QVERIFY2(wizard.loadDemo(wizard_test::demoConfig(), &error), qPrintable(error));
    QVERIFY(wizard_test::settled(*wizard.draft()));
    auto* review = wizard.reviewPage();
    QTRY_VERIFY(review->launchButton()->isEnabled());
    QVERIFY(review->sweepButton()->isEnabled());
    QSignalSpy requested(&wizard, &studio::ui::RunWizard::sweepRequested);
    QTest::mouseClick(review->sweepButton(), Qt::LeftButton);
    QVERIFY(wizard.sweepDialog() != nullptr);
    QVERIFY(checkedNow(*wizard.sweepDialog()));
    QVERIFY2(wizard.sweepDialog()->startButton()->isEnabled(),
             qPrintable(wizard.sweepDialog()->summaryLabel()->text()));
    wizard.sweepDialog()->parallelBox()->setValue(2);
    QTest::mouseClick(wizard.sweepDialog()->startButton(), Qt::LeftButton);
    QCOMPARE(requested.count(), 1);
    const auto choice = requested.front().at(3).value<studio::ui::SweepChoice>();
    QCOMPARE(choice.parallel, 2);
    QCOMPARE(choice.axes.size(), 1);
    QVERIFY(choice.axes.front().startsWith("learning_rate="));
    QTRY_VERIFY(wizard.sweepDialog() == nullptr);  // closed (and deleted) on Start

    // LLaMA-Factory as the trainer: a sweep is studio-train's.
    review->setTrainer(studio::ui::LaunchTarget::LlamaFactory, "llamafactory-cli");
    QVERIFY(!review->sweepButton()->isEnabled());
    review->setTrainer(studio::ui::LaunchTarget::StudioTrain);
    QVERIFY(review->sweepButton()->isEnabled());
    // An SSH host without Slurm: no sweep there, the tooltip says why; with Slurm, one job
    // array, checked for the host (a model path may be the host's own).
    wizard.targetPage()->setSshTarget(QStringLiteral("ssh://ann@gpu1:2222"));
    QVERIFY(wizard_test::settled(*wizard.draft()));
    QTRY_VERIFY(!review->sweepButton()->isEnabled());
    QVERIFY2(review->sweepButton()->toolTip().contains("choose Slurm on the Target page"),
             qPrintable(review->sweepButton()->toolTip()));
    wizard.targetPage()->slurmBox()->setChecked(true);
    QVERIFY(wizard_test::settled(*wizard.draft()));
    QTRY_VERIFY(review->sweepButton()->isEnabled());
    QVERIFY(review->sweepButton()->toolTip().contains("Slurm job array"));
    QTest::mouseClick(review->sweepButton(), Qt::LeftButton);
    QVERIFY(wizard.sweepDialog() != nullptr);
    QVERIFY(checkedNow(*wizard.sweepDialog()));
    QVERIFY(wizard.sweepDialog()->findChild<QLabel*>() != nullptr);
    bool saysArray = false;
    for (const QLabel* label : wizard.sweepDialog()->findChildren<QLabel*>())
      saysArray = saysArray || label->text().contains("one task of a Slurm job array");
    QVERIFY(saysArray);
    QVERIFY(wizard.sweepDialog()->startButton()->isEnabled());
    QTest::mouseClick(wizard.sweepDialog()->startButton(), Qt::LeftButton);
    QCOMPARE(requested.count(), 2);
    const auto slurm = requested.back().at(2).value<studio::ui::LaunchTarget>();
    QCOMPARE(slurm.kind, studio::ui::LaunchTarget::Ssh);
    QVERIFY(slurm.useSlurm);
  }
};

QTEST_MAIN(TestSweepDialog)
#include "tst_sweep_dialog.moc"
