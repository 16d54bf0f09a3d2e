// HostProfile's validation, its conversion to what the remote layer needs, and HostStore's
// persistence in QSettings (under the build tree's XDG_CONFIG_HOME, see CMakeLists.txt).
#include <QSettings>
#include <QSignalSpy>
#include <QtTest>

#include "studio/ui/remote/host_profile.h"

using studio::ui::HostProfile;
using studio::ui::HostStore;

namespace {

HostProfile usable() {
  HostProfile p;
  p.name = QStringLiteral("gpu-box");
  p.target = QStringLiteral("ana@gpu-box.lab:2222");
  return p;
}

HostProfile everyField() {
  HostProfile p = usable();
  p.identityFile = QStringLiteral("/home/ana/.ssh/id ed25519");
  p.knownHostsFile = QStringLiteral("/home/ana/.ssh/known_hosts.lab");
  p.sshConfigFile = QStringLiteral("/home/ana/.ssh/config.lab");
  p.engine = QStringLiteral("/opt/seqstudio/bin/studio-train");
  p.remoteRoot = QStringLiteral("/scratch/ana/runs");
  p.useSlurm = true;
  p.partition = QStringLiteral("gpu");
  p.account = QStringLiteral("lab-ml");
  p.timeLimit = QStringLiteral("1-12:00:00");
  p.extraNodes = QStringList{QStringLiteral("node2"), QStringLiteral("ana@node3:22")};
  p.masterAddr = QStringLiteral("10.0.0.1");
  return p;
}

}  // namespace

class TestHostStore : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QCoreApplication::setOrganizationName(QStringLiteral("SeqStudioTest"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_host_store"));
  }

  void init() { QSettings().clear(); }

  void validate_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("error");  // "" when usable
    QTest::newRow("usable") << ""
                            << ""
                            << "";
    QTest::newRow("every field") << "all"
                                 << ""
                                 << "";
    QTest::newRow("config alias") << "target"
                                  << "lab-gpu"
                                  << "";
    QTest::newRow("ipv6") << "target"
                          << "ana@[fe80::1]:22"
                          << "";
    QTest::newRow("ssh url") << "target"
                             << "ssh://ana@gpu-box"
                             << "";
    QTest::newRow("no name") << "name"
                             << ""
                             << "the host needs a name";
    QTest::newRow("blank name") << "name"
                                << "  "
                                << "the host needs a name";
    QTest::newRow("spaced name") << "name"
                                 << "gpu "
                                 << "name 'gpu ' starts or ends with spaces";
    QTest::newRow("no target") << "target"
                               << ""
                               << "host 'gpu-box' has no target";
    QTest::newRow("option target") << "target"
                                   << "-oProxyCommand=x"
                                   << "target '-oProxyCommand=x'";
    QTest::newRow("bad port") << "target"
                              << "gpu-box:99999"
                              << "target 'gpu-box:99999'";
    QTest::newRow("path target") << "target"
                                 << "ssh://gpu-box/home"
                                 << "target 'ssh://gpu-box/home'";
    QTest::newRow("no engine") << "engine"
                               << ""
                               << "engine '': give the studio-train path";
    QTest::newRow("option engine") << "engine"
                                   << "--help"
                                   << "engine '--help'";
    QTest::newRow("no root") << "remoteRoot"
                             << " "
                             << "remote root is empty";
    QTest::newRow("bad time") << "timeLimit"
                              << "2 days"
                              << "Slurm: ";
    QTest::newRow("bad partition") << "partition"
                                   << "gpu;rm"
                                   << "Slurm: ";
    QTest::newRow("bad node") << "extraNodes"
                              << "node2 node3"
                              << "extra node 'node2 node3'";
    QTest::newRow("no master") << "masterAddr"
                               << ""
                               << "give the master address";
    QTest::newRow("option master") << "masterAddr"
                                   << "-x"
                                   << "master address '-x'";
  }

  void validate() {
    QFETCH(QString, field);
    QFETCH(QString, value);
    QFETCH(QString, error);
    HostProfile p = field.isEmpty() ? usable() : everyField();
    if (field == QLatin1String("name")) p.name = value;
    if (field == QLatin1String("target")) p.target = value;
    if (field == QLatin1String("engine")) p.engine = value;
    if (field == QLatin1String("remoteRoot")) p.remoteRoot = value;
    if (field == QLatin1String("timeLimit")) p.timeLimit = value;
    if (field == QLatin1String("partition")) p.partition = value;
    if (field == QLatin1String("extraNodes")) p.extraNodes = QStringList{value};
    if (field == QLatin1String("masterAddr")) p.masterAddr = value;
    const QString got = p.validate();
    if (error.isEmpty()) {
      QVERIFY2(got.isEmpty(), qPrintable(got));
    } else {
      QVERIFY2(got.contains(error), qPrintable(got));
    }
  }

  void slurmFieldsOnlyCheckedWithSlurm() {
    HostProfile p = everyField();
    p.timeLimit = QStringLiteral("soon");
    QVERIFY(!p.validate().isEmpty());
    p.useSlurm = false;
    QVERIFY2(p.validate().isEmpty(), qPrintable(p.validate()));
  }

  void remoteSide() {
    const HostProfile p = everyField();
    const studio::remote::RemoteHostRef ref = p.hostRef();
    QCOMPARE(ref.target, std::string("ana@gpu-box.lab:2222"));
    QCOMPARE(ref.identity_file, std::string("/home/ana/.ssh/id ed25519"));
    QCOMPARE(ref.known_hosts_file, std::string("/home/ana/.ssh/known_hosts.lab"));
    QCOMPARE(ref.ssh_config_file, std::string("/home/ana/.ssh/config.lab"));

    const studio::remote::SshOptions o = p.sshOptions();
    QCOMPARE(o.target.user, std::string("ana"));
    QCOMPARE(o.target.host, std::string("gpu-box.lab"));
    QCOMPARE(o.target.port.value_or(0), 2222);
    QCOMPARE(o.identity_file, ref.identity_file);
    QCOMPARE(o.known_hosts_file, ref.known_hosts_file);
    QCOMPARE(o.ssh_config_file, ref.ssh_config_file);

    HostProfile alias = usable();
    alias.target = QStringLiteral("lab-gpu");
    QCOMPARE(alias.sshOptions().target.host, std::string("lab-gpu"));
    QVERIFY(!alias.sshOptions().target.port);

    HostProfile bad = usable();
    bad.target = QStringLiteral("a b");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, bad.sshOptions());
  }

  void equality() {
    QVERIFY(everyField() == everyField());
    HostProfile other = everyField();
    other.extraNodes.removeLast();
    QVERIFY(other != everyField());
    other = everyField();
    other.useSlurm = false;
    QVERIFY(other != everyField());
  }

  void roundTrip() {
    HostProfile second = usable();
    second.name = QStringLiteral("laptop");
    second.target = QStringLiteral("localhost");
    {
      HostStore store;
      QVERIFY(store.hosts().isEmpty());
      QSignalSpy changed(&store, &HostStore::hostsChanged);
      QCOMPARE(store.save(everyField()), QString());
      QCOMPARE(store.save(second), QString());
      QCOMPARE(changed.count(), 2);
      QCOMPARE(store.save(second), QString());  // unchanged: no signal, no write
      QCOMPARE(changed.count(), 2);
    }
    HostStore reloaded;
    QCOMPARE(reloaded.hosts().size(), 2);
    QVERIFY(reloaded.hosts()[0] == everyField());
    QVERIFY(reloaded.hosts()[1] == second);
    QVERIFY(reloaded.host(QStringLiteral("laptop")) != nullptr);
    QVERIFY(reloaded.host(QStringLiteral("nope")) == nullptr);
    // Nothing secret can be in there, and the file says what it holds.
    QSettings settings;
    QCOMPARE(settings.value(QStringLiteral("hosts/size")).toInt(), 2);
    QCOMPARE(settings.value(QStringLiteral("hosts/1/target")).toString(),
             QStringLiteral("ana@gpu-box.lab:2222"));
  }

  void renameAndRemove() {
    HostStore store;
    QCOMPARE(store.save(everyField()), QString());
    HostProfile other = usable();
    other.name = QStringLiteral("other");
    QCOMPARE(store.save(other), QString());

    HostProfile renamed = everyField();
    renamed.name = QStringLiteral("gpu-box-2");
    QCOMPARE(store.save(renamed, QStringLiteral("gpu-box")), QString());
    QCOMPARE(store.hosts().size(), 2);
    QVERIFY(store.host(QStringLiteral("gpu-box")) == nullptr);
    QCOMPARE(store.hosts()[0].name, QStringLiteral("gpu-box-2"));  // keeps its place

    // Renaming onto another host's name would lose that host.
    renamed.name = QStringLiteral("other");
    QVERIFY(store.save(renamed, QStringLiteral("gpu-box-2")).contains("exists already"));
    // An invalid profile is not saved.
    HostProfile broken = other;
    broken.target.clear();
    QVERIFY(!store.save(broken).isEmpty());
    QCOMPARE(store.host(QStringLiteral("other"))->target, other.target);

    QSignalSpy changed(&store, &HostStore::hostsChanged);
    store.remove(QStringLiteral("gpu-box-2"));
    store.remove(QStringLiteral("never-there"));
    QCOMPARE(changed.count(), 1);
    HostStore reloaded;
    QCOMPARE(reloaded.hosts().size(), 1);
    QVERIFY(reloaded.hosts()[0] == other);
    QVERIFY(!QSettings().contains(QStringLiteral("hosts/2/name")));
  }

  void skipsUnusableEntries() {
    {
      QSettings settings;
      settings.beginWriteArray(QStringLiteral("hosts"), 3);
      settings.setArrayIndex(0);
      settings.setValue(QStringLiteral("name"), QStringLiteral("ok"));
      settings.setValue(QStringLiteral("target"), QStringLiteral("ok.lab"));
      settings.setArrayIndex(1);
      settings.setValue(QStringLiteral("name"), QStringLiteral("broken"));
      settings.setValue(QStringLiteral("target"), QStringLiteral("-oProxyCommand=evil"));
      settings.setArrayIndex(2);
      settings.setValue(QStringLiteral("name"), QStringLiteral("ok"));  // a duplicate name
      settings.setValue(QStringLiteral("target"), QStringLiteral("other.lab"));
      settings.endArray();
    }
    QTest::ignoreMessage(QtWarningMsg, QRegularExpression("hosts/2 in .* skipped: target"));
    QTest::ignoreMessage(QtWarningMsg,
                         QRegularExpression("hosts/3 in .* skipped: an earlier entry has the "
                                            "name 'ok'"));
    HostStore store;
    QCOMPARE(store.hosts().size(), 1);
    QCOMPARE(store.hosts()[0].target, QStringLiteral("ok.lab"));
    QCOMPARE(store.hosts()[0].engine, QStringLiteral("studio-train"));  // defaults fill in
    QCOMPARE(store.hosts()[0].remoteRoot, QStringLiteral("seqstudio-runs"));
  }
};

QTEST_MAIN(TestHostStore)
#include "tst_host_store.moc"
