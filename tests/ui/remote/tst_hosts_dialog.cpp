// HostsDialog and GuiPrompts against a real sshd on 127.0.0.1 (tests/remote/sshd_server.h),
// offscreen: editing and storing profiles, "Test connection" on a worker while the GUI keeps
// running, the host key question for an unknown key (answered by clicking the message box), the
// passphrase question for an encrypted key, a changed key refused without any question, and the
// main window's File > Hosts... action.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QGroupBox>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPointer>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <functional>

#include "../../remote/sshd_server.h"
#include "studio/ui/remote/gui_prompts.h"
#include "studio/ui/remote/host_profile.h"
#include "studio/ui/remote/hosts_dialog.h"
#include "studio/ui/main_window.h"

using studio::ui::GuiPrompts;
using studio::ui::HostProfile;
using studio::ui::HostsDialog;
using studio::ui::HostStore;
using studio::ui::MainWindow;

namespace {

constexpr int kProbeTimeoutMs = 20000;

QByteArray readFile(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

bool writeFile(const QString& path, const QByteArray& data) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(data) == data.size();
}

template <typename T>
T* child(QWidget* parent, const char* name) {
  T* widget = parent->findChild<T*>(QLatin1String(name));
  if (widget == nullptr) qFatal("no child %s", name);
  return widget;
}

QString text(QWidget* parent, const char* label) {
  return child<QLabel>(parent, label)->text();
}

// Answers each modal dialog named `name` with `answer` as it comes up; records the names of
// all modal dialogs seen.
class ModalWatcher {
 public:
  ModalWatcher(const QString& name, std::function<void(QWidget*)> answer)
      : name_(name), answer_(std::move(answer)) {
    timer_.setInterval(20);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      QWidget* modal = QApplication::activeModalWidget();
      // The one answered last may still be closing; a new dialog may reuse its address.
      if (modal == nullptr || (!answered_.isNull() && answered_.data() == modal)) return;
      answered_ = modal;
      seen_ << modal->objectName();
      if (modal->objectName() == name_) answer_(modal);
    });
    timer_.start();
  }
  bool seen() const { return !seen_.isEmpty(); }
  QStringList seenNames() const { return seen_; }

 private:
  QString name_;
  std::function<void(QWidget*)> answer_;
  QTimer timer_;
  QPointer<QWidget> answered_;
  QStringList seen_;
};

}  // namespace

class TestHostsDialog : public QObject {
  Q_OBJECT

 private:
  SshdFixture server_;
  QTemporaryDir local_;
  QString hostKey_;
  QString userKey_;
  QString engine_;

  // The server's public host key as a known_hosts line for this port.
  QByteArray knownHostsLine(const QString& keyPath) const {
    return QStringLiteral("[127.0.0.1]:%1 ").arg(server_.port()).toUtf8() +
           readFile(keyPath + QStringLiteral(".pub"));
  }

  HostProfile profile(const QString& knownHosts) const {
    HostProfile p;
    p.name = QStringLiteral("local sshd");
    p.target = QStringLiteral("%1@127.0.0.1:%2")
                   .arg(QString::fromStdString(SshdServer::user()))
                   .arg(server_.port());
    p.identityFile = userKey_;
    p.knownHostsFile = local_.filePath(knownHosts);
    p.sshConfigFile = local_.filePath(QStringLiteral("no_config"));
    p.engine = engine_;
    return p;
  }

  // Fills the editor the way a user types it.
  static void fill(HostsDialog& dialog, const HostProfile& p) {
    child<QLineEdit>(&dialog, "nameEdit")->setText(p.name);
    child<QLineEdit>(&dialog, "targetEdit")->setText(p.target);
    child<QLineEdit>(&dialog, "identityEdit")->setText(p.identityFile);
    child<QLineEdit>(&dialog, "engineEdit")->setText(p.engine);
    child<QLineEdit>(&dialog, "remoteRootEdit")->setText(p.remoteRoot);
    child<QLineEdit>(&dialog, "knownHostsEdit")->setText(p.knownHostsFile);
    child<QLineEdit>(&dialog, "sshConfigEdit")->setText(p.sshConfigFile);
  }

  static QString localNproc() {
    QProcess nproc;
    nproc.start(QStringLiteral("nproc"), {});
    nproc.waitForFinished(5000);
    return QString::fromUtf8(nproc.readAllStandardOutput().trimmed());
  }

 private slots:
  void initTestCase() {
    QCoreApplication::setOrganizationName(QStringLiteral("SeqStudioTest"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_hosts_dialog"));
    QVERIFY(local_.isValid());
    // sshd on 127.0.0.1 with our keys; local_/known_hosts trusts it.
    const QString error = server_.set_up(local_.path());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    hostKey_ = server_.host_key();
    userKey_ = server_.user_key();
    engine_ = local_.filePath(QStringLiteral("studio-train"));
    QVERIFY(
        writeFile(engine_, "#!/bin/sh\necho 'studio-train 0.1.0'\necho 'CUDA: not available'\n"));
    QVERIFY(QFile::setPermissions(engine_, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  }

  void init() { QSettings().clear(); }

  void editsTheStore() {
    HostStore store;
    GuiPrompts prompts;
    HostsDialog dialog(&store, &prompts);
    auto* list = child<QListWidget>(&dialog, "hostList");
    QAbstractItemModelTester tester(list->model());
    QCOMPARE(list->count(), 0);

    // An invalid profile is refused with the reason, and nothing is stored.
    HostProfile p = profile(QStringLiteral("known_hosts"));
    fill(dialog, p);
    child<QLineEdit>(&dialog, "targetEdit")->setText(QStringLiteral("-oProxyCommand=x"));
    child<QPushButton>(&dialog, "saveHost")->click();
    QVERIFY2(text(&dialog, "statusLabel").contains("target '-oProxyCommand=x'"),
             qPrintable(text(&dialog, "statusLabel")));
    QVERIFY(store.hosts().isEmpty());

    child<QLineEdit>(&dialog, "targetEdit")->setText(p.target);
    child<QPushButton>(&dialog, "saveHost")->click();
    QCOMPARE(store.hosts().size(), 1);
    QVERIFY(store.hosts()[0] == p);
    QCOMPARE(list->count(), 1);
    QCOMPARE(list->currentItem()->text(), p.name);

    // Slurm settings and a rename of the same host.
    child<QGroupBox>(&dialog, "slurmGroup")->setChecked(true);
    child<QLineEdit>(&dialog, "partitionEdit")->setText(QStringLiteral("gpu"));
    child<QLineEdit>(&dialog, "timeEdit")->setText(QStringLiteral("2:00:00"));
    child<QLineEdit>(&dialog, "nameEdit")->setText(QStringLiteral("renamed"));
    child<QPushButton>(&dialog, "saveHost")->click();
    QCOMPARE(store.hosts().size(), 1);
    QCOMPARE(store.hosts()[0].name, QStringLiteral("renamed"));
    QVERIFY(store.hosts()[0].useSlurm);
    QCOMPARE(store.hosts()[0].partition, QStringLiteral("gpu"));

    // A second host, then remove the first: the editor moves to the one left.
    child<QPushButton>(&dialog, "addHost")->click();
    QCOMPARE(child<QLineEdit>(&dialog, "nameEdit")->text(), QString());
    QCOMPARE(child<QLineEdit>(&dialog, "engineEdit")->text(), QStringLiteral("studio-train"));
    child<QLineEdit>(&dialog, "nameEdit")->setText(QStringLiteral("second"));
    child<QLineEdit>(&dialog, "targetEdit")->setText(QStringLiteral("ana@node2"));
    child<QLineEdit>(&dialog, "extraNodesEdit")->setText(QStringLiteral("node3, node4"));
    child<QLineEdit>(&dialog, "masterAddrEdit")->setText(QStringLiteral("10.0.0.2"));
    child<QPushButton>(&dialog, "saveHost")->click();
    QCOMPARE(list->count(), 2);
    QCOMPARE(store.host(QStringLiteral("second"))->extraNodes,
             QStringList({QStringLiteral("node3"), QStringLiteral("node4")}));
    QVERIFY(dialog.selectHost(QStringLiteral("renamed")));
    child<QPushButton>(&dialog, "removeHost")->click();
    QCOMPARE(list->count(), 1);
    QVERIFY(store.host(QStringLiteral("renamed")) == nullptr);
    QCOMPARE(child<QLineEdit>(&dialog, "nameEdit")->text(), QStringLiteral("second"));
    QCOMPARE(HostStore().hosts().size(), 1);  // persisted
  }

  void testConnectionShowsInventory() {
    HostStore store;
    GuiPrompts prompts;
    QCOMPARE(store.save(profile(QStringLiteral("known_hosts"))), QString());
    HostsDialog dialog(&store, &prompts);
    QVERIFY(dialog.editedProfile() == profile(QStringLiteral("known_hosts")));
    auto* table = child<QTableWidget>(&dialog, "gpuTable");
    QAbstractItemModelTester tester(table->model());
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    ModalWatcher noPrompt(QString(), [](QWidget*) {});

    child<QPushButton>(&dialog, "testConnection")->click();
    // The click returned before the connection was made: the work is on a worker thread.
    QCOMPARE(finished.count(), 0);
    QVERIFY(text(&dialog, "statusLabel").startsWith("Connecting to"));
    QVERIFY(!child<QPushButton>(&dialog, "testConnection")->isEnabled());

    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(text(&dialog, "statusLabel")));
    QVERIFY(!noPrompt.seen());  // a known key asks nothing
    QCOMPARE(text(&dialog, "cpuLabel"), localNproc());
    QCOMPARE(text(&dialog, "hostnameLabel"), QSysInfo::machineHostName());
    QVERIFY(text(&dialog, "memoryLabel").contains(" GiB total"));
    QVERIFY2(text(&dialog, "engineLabel").startsWith("studio-train 0.1.0 (" + engine_ + ")"),
             qPrintable(text(&dialog, "engineLabel")));
    QVERIFY(text(&dialog, "engineLabel").contains("CUDA: not available"));
    QVERIFY(!text(&dialog, "slurmLabel").isEmpty());  // partitions, or why there are none
    if (QStandardPaths::findExecutable(QStringLiteral("nvidia-smi")).isEmpty()) {
      QCOMPARE(text(&dialog, "gpuNoteLabel"),
               QStringLiteral("no GPUs: nvidia-smi not found in PATH"));
      QCOMPARE(table->rowCount(), 0);
    }
    QVERIFY(child<QPushButton>(&dialog, "testConnection")->isEnabled());
  }

  void unknownHostKeyIsAsked_data() {
    QTest::addColumn<QString>("button");
    QTest::addColumn<bool>("connects");
    QTest::addColumn<bool>("saved");
    QTest::newRow("accept once") << "acceptOnce" << true << false;
    QTest::newRow("accept and save") << "acceptAndSave" << true << true;
    QTest::newRow("reject") << "rejectKey" << false << false;
  }

  void unknownHostKeyIsAsked() {
    QFETCH(QString, button);
    QFETCH(bool, connects);
    QFETCH(bool, saved);
    const QString knownHosts = QStringLiteral("unknown-") + button;
    HostStore store;
    GuiPrompts prompts;
    HostsDialog dialog(&store, &prompts);
    prompts.setDialogParent(&dialog);
    fill(dialog, profile(knownHosts));
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    QString shown;
    ModalWatcher answer(QStringLiteral("hostKeyPrompt"), [&](QWidget* modal) {
      auto* box = qobject_cast<QMessageBox*>(modal);
      shown = box->text() + QLatin1Char('\n') + box->informativeText();
      box->findChild<QPushButton*>(button)->click();
    });

    child<QPushButton>(&dialog, "testConnection")->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QCOMPARE(answer.seenNames(), QStringList{QStringLiteral("hostKeyPrompt")});
    QVERIFY2(shown.contains(QStringLiteral("127.0.0.1:%1").arg(server_.port())), qPrintable(shown));
    QVERIFY2(shown.contains(SshdServer::fingerprint(hostKey_ + QStringLiteral(".pub"))),
             qPrintable(shown));
    QVERIFY(shown.contains(QStringLiteral("ssh-ed25519")));
    QCOMPARE(finished.at(0).at(0).toBool(), connects);
    if (connects) {
      QCOMPARE(text(&dialog, "cpuLabel"), localNproc());
    } else {
      QVERIFY2(text(&dialog, "statusLabel").contains(QStringLiteral("127.0.0.1")),
               qPrintable(text(&dialog, "statusLabel")));
      QCOMPARE(text(&dialog, "cpuLabel"), QString());
    }
    QCOMPARE(readFile(local_.filePath(knownHosts))
                 .contains(readFile(hostKey_ + QStringLiteral(".pub")).split(' ').at(1)),
             saved);
  }

  void changedHostKeyIsRefusedWithoutPrompt() {
    const QString other = server_.make_key(QStringLiteral("impostor"), QStringLiteral("ed25519"));
    QVERIFY(writeFile(local_.filePath(QStringLiteral("changed")), knownHostsLine(other)));
    HostStore store;
    GuiPrompts prompts;
    HostsDialog dialog(&store, &prompts);
    fill(dialog, profile(QStringLiteral("changed")));
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    ModalWatcher noPrompt(QString(), [](QWidget*) {});

    child<QPushButton>(&dialog, "testConnection")->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QCOMPARE(finished.at(0).at(0).toBool(), false);
    QVERIFY(!noPrompt.seen());
    const QString status = text(&dialog, "statusLabel");
    QVERIFY2(status.contains(QStringLiteral("HAS CHANGED")), qPrintable(status));
    QVERIFY2(status.contains(local_.filePath(QStringLiteral("changed"))), qPrintable(status));
    QVERIFY(!child<QGroupBox>(&dialog, "inventoryGroup")->isEnabled());
  }

  void passphraseIsAsked() {
    const QString locked = server_.make_key(QStringLiteral("locked"), QStringLiteral("ed25519"),
                                            QStringLiteral("correct horse"));
    QVERIFY(server_.authorize(locked));
    HostStore store;
    GuiPrompts prompts;
    HostsDialog dialog(&store, &prompts);
    HostProfile p = profile(QStringLiteral("known_hosts"));
    p.identityFile = locked;
    fill(dialog, p);
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    // A wrong passphrase first: the question comes again and says so.
    QStringList answers{QStringLiteral("battery staple"), QStringLiteral("correct horse")};
    QStringList labels;
    bool hidden = true;
    ModalWatcher answer(QStringLiteral("secretPrompt"), [&](QWidget* modal) {
      auto* input = qobject_cast<QInputDialog*>(modal);
      labels << input->labelText();
      hidden = hidden && input->textEchoMode() == QLineEdit::Password;
      input->setTextValue(answers.takeFirst());
      input->accept();
    });

    child<QPushButton>(&dialog, "testConnection")->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(text(&dialog, "statusLabel")));
    QCOMPARE(answer.seenNames(),
             QStringList({QStringLiteral("secretPrompt"), QStringLiteral("secretPrompt")}));
    QVERIFY2(labels[0].startsWith("Passphrase for the key " + locked), qPrintable(labels[0]));
    QVERIFY2(labels[1].startsWith("That was not accepted (attempt 2 of 3)."),
             qPrintable(labels[1]));
    QVERIFY(hidden);
    QCOMPARE(text(&dialog, "cpuLabel"), localNproc());
    // Neither answer is kept: not in the settings file, not in any process's argv or
    // environment.
    QSettings settings;
    settings.sync();
    QFile stored(settings.fileName());
    const QByteArray settingsText = stored.open(QIODevice::ReadOnly) ? stored.readAll() : QByteArray();
    for (const QByteArray& secret : {QByteArray("correct horse"), QByteArray("battery staple")}) {
      QVERIFY2(!settingsText.contains(secret), qPrintable(settings.fileName()));
      for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        if (pid.toInt() <= 0) continue;
        for (const char* what : {"cmdline", "environ"}) {
          QFile f(QStringLiteral("/proc/%1/%2").arg(pid, QLatin1String(what)));
          if (f.open(QIODevice::ReadOnly)) QVERIFY2(!f.readAll().contains(secret), qPrintable(f.fileName()));
        }
      }
    }
  }

  void invalidProfileIsNotTried() {
    HostStore store;
    HostsDialog dialog(&store, nullptr);
    fill(dialog, profile(QStringLiteral("known_hosts")));
    child<QLineEdit>(&dialog, "engineEdit")->clear();
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    child<QPushButton>(&dialog, "testConnection")->click();
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.at(0).at(0).toBool(), false);
    QVERIFY(text(&dialog, "statusLabel").startsWith("engine ''"));
  }

  void withoutPromptsUnknownKeysAreRejected() {
    HostStore store;
    HostsDialog dialog(&store, nullptr);
    fill(dialog, profile(QStringLiteral("never-trusted")));
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    child<QPushButton>(&dialog, "testConnection")->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QCOMPARE(finished.at(0).at(0).toBool(), false);
    QVERIFY2(text(&dialog, "statusLabel").contains(QStringLiteral("127.0.0.1")),
             qPrintable(text(&dialog, "statusLabel")));
  }

  void mainWindowOpensHosts() {
    const HostProfile p = profile(QStringLiteral("known_hosts"));
    QCOMPARE(HostStore().save(p), QString());  // stored by an earlier session
    MainWindow window;
    QVERIFY(window.hosts()->host(p.name) != nullptr);
    QVERIFY(window.prompts() != nullptr);
    QAction* hosts = nullptr;
    for (QAction* action : window.findChildren<QAction*>()) {
      if (action->shortcut() == QKeySequence(QStringLiteral("Ctrl+Shift+H"))) hosts = action;
    }
    QVERIFY(hosts != nullptr);
    QCOMPARE(hosts->text(), QStringLiteral("&Hosts..."));
    hosts->trigger();
    auto* dialog = window.findChild<HostsDialog*>();
    QVERIFY(dialog != nullptr);
    QVERIFY(dialog->isVisible());
    QVERIFY(dialog->editedProfile() == p);
    dialog->close();  // deletes itself
    QTRY_VERIFY(window.findChild<HostsDialog*>() == nullptr);
  }

  // A GPU node with Slurm, as far as the probe can tell: nvidia-smi, sinfo and studio-train are
  // small scripts first in the PATH sshd gives the session. Runs last: it restarts sshd.
  void showsGpusAndPartitions() {
    const QString bin = local_.filePath(QStringLiteral("gpu-node-bin"));
    QVERIFY(QDir().mkpath(bin));
    QByteArray gpuLines;
    for (int i = 0; i < 8; ++i)
      gpuLines += QByteArray::number(i) + ", NVIDIA H100 80GB HBM3, 81559, " +
                  QByteArray::number(i == 4 ? 71234 : 0) + "\n";
    const QList<QPair<QString, QByteArray>> tools{
        {QStringLiteral("nvidia-smi"), "#!/bin/sh\nprintf '" + gpuLines + "'\n"},
        {QStringLiteral("sinfo"),
         "#!/bin/sh\necho 'gpu*|up|16|gpu:h100:8|2-00:00:00'\necho 'debug|up|1|(null)|1:00:00'\n"},
        {QStringLiteral("studio-train"), "#!/bin/sh\necho 'studio-train 0.1.0'\n"}};
    for (const auto& [name, script] : tools) {
      const QString path = QDir(bin).filePath(name);
      QVERIFY(writeFile(path, script));
      QVERIFY(QFile::setPermissions(path, QFile::ReadOwner | QFile::ExeOwner));
    }
    const QString error = server_.restart(QStringLiteral("SetEnv PATH=%1:/usr/bin:/bin\n").arg(bin));
    QVERIFY2(error.isEmpty(), qPrintable(error));

    HostStore store;
    GuiPrompts prompts;
    HostsDialog dialog(&store, &prompts);
    HostProfile p = profile(QStringLiteral("known_hosts"));
    p.engine = QStringLiteral("studio-train");  // found in the PATH
    fill(dialog, p);
    auto* table = child<QTableWidget>(&dialog, "gpuTable");
    QAbstractItemModelTester tester(table->model());
    QSignalSpy finished(&dialog, &HostsDialog::testFinished);
    child<QPushButton>(&dialog, "testConnection")->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kProbeTimeoutMs);
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(text(&dialog, "statusLabel")));

    QCOMPARE(table->rowCount(), 8);
    QCOMPARE(table->item(4, 0)->text(), QStringLiteral("4"));
    QCOMPARE(table->item(4, 1)->text(), QStringLiteral("NVIDIA H100 80GB HBM3"));
    QCOMPARE(table->item(4, 2)->text(), QStringLiteral("81559"));
    QCOMPARE(table->item(4, 3)->text(), QStringLiteral("71234"));
    QCOMPARE(text(&dialog, "gpuNoteLabel"), QStringLiteral("8 GPU(s)"));
    QCOMPARE(text(&dialog, "slurmLabel"),
             QStringLiteral("gpu (default): up, 16 node(s), gpu:h100:8, time limit 2-00:00:00\n"
                            "debug: up, 1 node(s), time limit 1:00:00"));
    QCOMPARE(text(&dialog, "engineLabel"),
             QStringLiteral("studio-train 0.1.0 (%1/studio-train)").arg(bin));
  }
};

QTEST_MAIN(TestHostsDialog)
#include "tst_hosts_dialog.moc"
