// RemoteSubmitter without a reachable host: the submit runs on its worker thread, reports what
// it does, and fails with a message naming the host; one submit at a time; nothing is left in
// the runs root. (Successful submits run against a real sshd in tst_studio_remote_run.)
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include "studio/config/run_config.h"
#include "studio/ui/remote/remote_submitter.h"

using studio::ui::RemoteSubmitter;

class TestRemoteSubmitter : public QObject {
  Q_OBJECT

 private slots:
  void unreachableHostFails_data();
  void unreachableHostFails();
};

void TestRemoteSubmitter::unreachableHostFails_data() {
  QTest::addColumn<QString>("target");
  QTest::addColumn<QString>("message");
  // Port 1 on this machine refuses connections at once.
  QTest::newRow("connection refused") << "nobody@127.0.0.1:1" << "127.0.0.1";
  QTest::newRow("target that does not parse") << "-oProxyCommand=sh" << "-oProxyCommand=sh";
}

void TestRemoteSubmitter::unreachableHostFails() {
  QFETCH(QString, target);
  QFETCH(QString, message);
  QTemporaryDir root;
  RemoteSubmitter submitter;
  QSignalSpy progress(&submitter, &RemoteSubmitter::progress);
  QSignalSpy failed(&submitter, &RemoteSubmitter::failed);
  QSignalSpy submitted(&submitter, &RemoteSubmitter::submitted);
  studio::remote::SubmitRequest request;
  request.host.target = target.toStdString();
  studio::RunConfig config;
  config.output_dir = "runs/my-run";
  QVERIFY(submitter.submit(config, root.path(), request, root.path()));
  QVERIFY(submitter.isBusy());
  QVERIFY(!submitter.submit(config, root.path(), request, root.path()));  // one at a time
  QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 15000);
  QVERIFY2(failed.at(0).at(0).toString().contains(message),
           qPrintable(failed.at(0).at(0).toString()));
  QCOMPARE(submitted.count(), 0);
  QVERIFY(!submitter.isBusy());
  QVERIFY(progress.count() >= 1);
  QVERIFY2(progress.at(0).at(0).toString().startsWith(QStringLiteral("connecting to ")),
           qPrintable(progress.at(0).at(0).toString()));
  QVERIFY(QDir(root.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot).isEmpty());
}

QTEST_MAIN(TestRemoteSubmitter)
#include "tst_remote_submitter.moc"
