// trainCommandLine: the command Copy command line gives, for this machine and SSH hosts, one node
// and several, with paths that need quoting.
#include <QtTest>

#include "studio/ui/wizard/launch_command.h"

using studio::ui::LaunchTarget;
using studio::ui::trainCommandLine;

class TestLaunchCommand : public QObject {
  Q_OBJECT

 private slots:
  void commandLine_data();
  void commandLine();
};

void TestLaunchCommand::commandLine_data() {
  QTest::addColumn<int>("kind");
  QTest::addColumn<QString>("host");
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("nnodes");
  QTest::addColumn<QString>("dir");
  QTest::addColumn<QString>("expected");
  QTest::addColumn<QString>("llamafactory");  // "": studio-train trains

  QTest::newRow("one process") << int(LaunchTarget::Local) << "" << 1 << 1 << "/home/ann/runs"
                               << "cd /home/ann/runs && studio-train train /home/ann/runs/a.yaml" << QString();
  QTest::newRow("eight GPUs") << int(LaunchTarget::Local) << "" << 8 << 1 << "/home/ann/runs"
                              << "cd /home/ann/runs && studio-train train /home/ann/runs/a.yaml "
                                 "--nproc 8" << QString();
  QTest::newRow("quoted folder") << int(LaunchTarget::Local) << "" << 2 << 1 << "/tmp/my runs"
                                 << "cd '/tmp/my runs' && studio-train train /home/ann/runs/a.yaml "
                                    "--nproc 2" << QString();
  QTest::newRow("two nodes") << int(LaunchTarget::Local) << "" << 8 << 2 << "/w"
                             << "cd /w && studio-train train /home/ann/runs/a.yaml --nproc 8 "
                                "--nnodes 2 --node-rank \"$NODE_RANK\" --master-addr "
                                "\"$MASTER_ADDR\" --master-port \"$MASTER_PORT\"" << QString();
  QTest::newRow("ssh") << int(LaunchTarget::Ssh) << "ann@gpu1" << 4 << 1 << "/w"
                       << "ssh ann@gpu1 'cd /w && exec studio-train train /home/ann/runs/a.yaml "
                          "--nproc 4'" << QString();
  QTest::newRow("ssh with port") << int(LaunchTarget::Ssh) << "ann@gpu1:2222" << 1 << 1
                                 << "/w x"
                                 << "ssh -p 2222 ann@gpu1 'cd '\\''/w x'\\'' && exec studio-train "
                                    "train /home/ann/runs/a.yaml'" << QString();
  QTest::newRow("ssh host not parsed yet falls back to this machine")
      << int(LaunchTarget::Ssh) << "ann@" << 1 << 1 << "/w"
      << "cd /w && studio-train train /home/ann/runs/a.yaml" << QString();
  QTest::newRow("llama-factory, 2 processes")
      << int(LaunchTarget::Local) << "" << 2 << 1 << "/w"
      << "cd /w && env 'FORCE_TORCHRUN=1' 'NPROC_PER_NODE=2' /opt/lf/bin/llamafactory-cli train "
         "/home/ann/runs/a.yaml"
      << "/opt/lf/bin/llamafactory-cli";
  QTest::newRow("llama-factory, two nodes over ssh")
      << int(LaunchTarget::Ssh) << "ann@gpu1" << 8 << 2 << "/w"
      << "ssh ann@gpu1 'cd /w && exec env '\\''FORCE_TORCHRUN=1'\\'' '\\''NPROC_PER_NODE=8'\\'' "
         "'\\''NNODES=2'\\'' llamafactory-cli train /home/ann/runs/a.yaml'"
      << "llamafactory-cli";
}

void TestLaunchCommand::commandLine() {
  QFETCH(int, kind);
  QFETCH(QString, host);
  QFETCH(int, nproc);
  QFETCH(int, nnodes);
  QFETCH(QString, dir);
  QFETCH(QString, expected);
  QFETCH(QString, llamafactory);
  LaunchTarget target;
  if (!llamafactory.isEmpty()) {
    target.trainer = LaunchTarget::LlamaFactory;
    target.llamafactoryCli = llamafactory;
  }
  target.kind = static_cast<LaunchTarget::Kind>(kind);
  target.sshTarget = host;
  target.nproc = nproc;
  target.nnodes = nnodes;
  QCOMPARE(trainCommandLine(QStringLiteral("studio-train"),
                            QStringLiteral("/home/ann/runs/a.yaml"), dir, target),
           expected);
}

QTEST_MAIN(TestLaunchCommand)
#include "tst_launch_command.moc"
