// TargetPage: this machine, or an SSH host parsed as it is typed (errors inline, Next disabled);
// target() carries the normalised host and the draft's world size.
#include <QLineEdit>
#include <QRadioButton>
#include <QSignalSpy>
#include <QtTest>

#include "studio/ui/wizard/target_page.h"
#include "wizard_test_support.h"

using studio::ui::LaunchTarget;
using studio::ui::RunDraft;
using studio::ui::TargetPage;

class TestTargetPage : public QObject {
  Q_OBJECT

 private slots:
  void validation_data();
  void validation();
  void worldSizeComesFromTheDraft();
};

void TestTargetPage::validation_data() {
  QTest::addColumn<bool>("ssh");
  QTest::addColumn<QString>("host");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");
  QTest::addColumn<QString>("target");

  QTest::newRow("this machine") << false << "ignored@host:0" << true << "" << "";
  QTest::newRow("user@host") << true << "ann@gpu1" << true << "" << "ann@gpu1";
  QTest::newRow("ssh:// and port") << true << " ssh://ann@gpu1.example.org:2222 " << true << ""
                                   << "ann@gpu1.example.org:2222";
  QTest::newRow("IPv6") << true << "ann@[fe80::1]:22" << true << "" << "ann@[fe80::1]:22";
  QTest::newRow("empty") << true << "" << false
                         << "host: type the SSH host as [ssh://]user@host[:port]" << "";
  QTest::newRow("port out of range") << true << "ann@gpu1:70000" << false
                                     << "host: port '70000' is out of range 1-65535"
                                     << "ann@gpu1:70000";
  QTest::newRow("option injection") << true << "-oProxyCommand=sh" << false
                                    << "must not start with '-'" << "-oProxyCommand=sh";
  QTest::newRow("a path") << true << "ann@gpu1/tmp" << false << "host: " << "ann@gpu1/tmp";
}

void TestTargetPage::validation() {
  QFETCH(bool, ssh);
  QFETCH(QString, host);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  QFETCH(QString, target);
  RunDraft draft;
  TargetPage page(&draft);
  QSignalSpy changed(&page, &TargetPage::targetChanged);
  page.hostEdit()->setText(host);
  if (ssh) page.sshButton()->setChecked(true);
  QVERIFY(changed.count() >= 1);
  QCOMPARE(page.hostEdit()->isEnabled(), ssh);
  wizard_test::verifyPage(page, complete, message);
  const LaunchTarget t = page.target();
  QCOMPARE(t.kind, ssh ? LaunchTarget::Ssh : LaunchTarget::Local);
  QCOMPARE(t.sshTarget, target);
}

void TestTargetPage::worldSizeComesFromTheDraft() {
  RunDraft draft;
  TargetPage page(&draft);
  draft.setWorld(8, 2);
  QCOMPARE(page.target().nproc, 8);
  QCOMPARE(page.target().nnodes, 2);
  page.setSshTarget(QStringLiteral("ann@gpu1"));
  QCOMPARE(page.target().kind, LaunchTarget::Ssh);
  page.setLocal();
  QCOMPARE(page.target().kind, LaunchTarget::Local);
  QCOMPARE(page.target().sshTarget, QString());
}

QTEST_MAIN(TestTargetPage)
#include "tst_target_page.moc"
