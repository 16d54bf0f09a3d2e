// TargetPage: this machine, or an SSH host parsed as it is typed (errors inline, Next disabled);
// target() carries the normalised host and the draft's world size. A saved host chosen by name
// brings its profile (key, known_hosts, engine, root, Slurm defaults, nodes); several nodes
// without Slurm need the other nodes named; "Manage hosts..." asks for the Hosts page.
#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
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
  void savedHosts();
  void severalNodesNeedTheirHosts_data();
  void severalNodesNeedTheirHosts();
};

namespace {

studio::ui::HostProfile gpuBox() {
  studio::ui::HostProfile h;
  h.name = QStringLiteral("gpu-box");
  h.target = QStringLiteral("ann@gpu1.example.org:2222");
  h.identityFile = QStringLiteral("/home/ann/.ssh/id_gpu");
  h.knownHostsFile = QStringLiteral("/home/ann/.ssh/known_hosts_lab");
  h.engine = QStringLiteral("/opt/seqstudio/bin/studio-train");
  h.remoteRoot = QStringLiteral("/scratch/ann/runs");
  h.useSlurm = true;
  h.partition = QStringLiteral("gpu");
  h.timeLimit = QStringLiteral("04:00:00");
  return h;
}

}  // namespace

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

void TestTargetPage::savedHosts() {
  RunDraft draft;
  TargetPage page(&draft);
  studio::ui::HostProfile plain;
  plain.name = QStringLiteral("laptop");
  plain.target = QStringLiteral("me@laptop");
  page.setHosts({gpuBox(), plain});
  QCOMPARE(page.hostBox()->count(), 2);
  QCOMPARE(page.hostBox()->itemText(0), QStringLiteral("gpu-box"));
  QVERIFY(page.hostEdit()->text().isEmpty());  // offering hosts chooses none

  page.setSshTarget(QStringLiteral("gpu-box"));
  wizard_test::verifyPage(page, true, QString());
  LaunchTarget t = page.target();
  QCOMPARE(t.kind, LaunchTarget::Ssh);
  QCOMPARE(t.hostName, QStringLiteral("gpu-box"));
  QCOMPARE(t.sshTarget, QStringLiteral("ann@gpu1.example.org:2222"));
  QCOMPARE(t.identityFile, QStringLiteral("/home/ann/.ssh/id_gpu"));
  QCOMPARE(t.knownHostsFile, QStringLiteral("/home/ann/.ssh/known_hosts_lab"));
  QCOMPARE(t.engine, QStringLiteral("/opt/seqstudio/bin/studio-train"));
  QCOMPARE(t.remoteRoot, QStringLiteral("/scratch/ann/runs"));
  QVERIFY(t.useSlurm);
  QVERIFY(page.slurmBox()->isChecked());
  QCOMPARE(t.partition, QStringLiteral("gpu"));
  QCOMPARE(t.timeLimit, QStringLiteral("04:00:00"));
  QVERIFY(!t.uploadModel);
  page.uploadModelBox()->setChecked(true);
  QVERIFY(page.target().uploadModel);

  // Refreshing the hosts keeps the choice; another saved host brings its own settings.
  page.setHosts({plain, gpuBox()});
  QCOMPARE(page.target().hostName, QStringLiteral("gpu-box"));
  page.hostBox()->setCurrentIndex(0);
  t = page.target();
  QCOMPARE(t.hostName, QStringLiteral("laptop"));
  QCOMPARE(t.sshTarget, QStringLiteral("me@laptop"));
  QVERIFY(!t.useSlurm);
  QVERIFY(t.identityFile.isEmpty());

  // A typed host is no saved host: defaults, normalised target.
  page.hostEdit()->setText(QStringLiteral("ssh://bob@other:22"));
  t = page.target();
  QVERIFY(t.hostName.isEmpty());
  QCOMPARE(t.sshTarget, QStringLiteral("bob@other:22"));
  QCOMPARE(t.engine, QStringLiteral("studio-train"));

  QSignalSpy manage(&page, &TargetPage::manageHostsRequested);
  page.manageHostsButton()->click();
  QCOMPARE(manage.count(), 1);
}

void TestTargetPage::severalNodesNeedTheirHosts_data() {
  QTest::addColumn<bool>("slurm");
  QTest::addColumn<QStringList>("extraNodes");
  QTest::addColumn<bool>("complete");
  QTest::newRow("no other node named") << false << QStringList() << false;
  QTest::newRow("the other node named") << false << QStringList{"ann@gpu2"} << true;
  QTest::newRow("too many named") << false << QStringList{"ann@gpu2", "ann@gpu3"} << false;
  QTest::newRow("slurm allocates them") << true << QStringList() << true;
}

void TestTargetPage::severalNodesNeedTheirHosts() {
  QFETCH(bool, slurm);
  QFETCH(QStringList, extraNodes);
  QFETCH(bool, complete);
  RunDraft draft;
  TargetPage page(&draft);
  draft.setWorld(1, 2);
  studio::ui::HostProfile h = gpuBox();
  h.useSlurm = slurm;
  h.extraNodes = extraNodes;
  h.masterAddr = QStringLiteral("10.0.0.1");
  page.setHosts({h});
  page.setSshTarget(QStringLiteral("gpu-box"));
  wizard_test::verifyPage(page, complete,
                          complete ? QString() : QStringLiteral("nodes: 2 nodes without Slurm"));
  QCOMPARE(page.target().extraNodes, extraNodes);
  QCOMPARE(page.target().masterAddr, QStringLiteral("10.0.0.1"));
}

QTEST_MAIN(TestTargetPage)
#include "tst_target_page.moc"
