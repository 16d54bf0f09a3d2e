// node_launch_commands: one detached launcher per host with matching rendezvous flags.
#include <QtTest>

#include <stdexcept>
#include <string>
#include <vector>

#include "studio/remote/node_launch.h"

using studio::remote::detached_start_command;
using studio::remote::LauncherArgs;
using studio::remote::node_launch_commands;
using studio::remote::RemoteRunLayout;

class TestNodeLaunch : public QObject {
  Q_OBJECT

 private:
  static RemoteRunLayout layout() {
    RemoteRunLayout l;
    l.run_dir = "runs/sp 2";
    return l;
  }

 private slots:
  void onePerNode_data() {
    QTest::addColumn<QStringList>("hosts");
    QTest::newRow("one") << QStringList{"gpu1"};
    QTest::newRow("two") << QStringList{"gpu1", "gpu2"};
    QTest::newRow("four, aliases") << QStringList{"a", "user@b", "c:2222", "d"};
  }
  void onePerNode() {
    QFETCH(QStringList, hosts);
    std::vector<std::string> names;
    for (const QString& h : hosts) names.push_back(h.toStdString());
    auto launches = node_launch_commands(names, 4, "10.0.0.1", 29500, layout(), "studio-train");
    QCOMPARE(static_cast<int>(launches.size()), hosts.size());
    for (int i = 0; i < hosts.size(); ++i) {
      const auto& launch = launches[static_cast<size_t>(i)];
      QCOMPARE(QString::fromStdString(launch.host), hosts[i]);
      QCOMPARE(launch.node_rank, i);
      LauncherArgs args{4, static_cast<int>(hosts.size()), i, "10.0.0.1", 29500};
      QCOMPARE(launch.command, detached_start_command(layout(), "studio-train", args));
      std::string flags = hosts.size() > 1 ? " --nnodes " + std::to_string(hosts.size()) +
                                                 " --node-rank " + std::to_string(i)
                                           : "";
      std::string expected = "--nproc 4" + flags + " --master-addr 10.0.0.1 --master-port 29500";
      QVERIFY2(launch.command.find(" train config.yaml " + expected) != std::string::npos,
               launch.command.c_str());
    }
  }

  void rejects_data() {
    QTest::addColumn<QStringList>("hosts");
    QTest::addColumn<QString>("addr");
    QTest::addColumn<int>("port");
    QTest::addColumn<QString>("message");
    QTest::newRow("no hosts") << QStringList{} << "h" << 29500 << "host list is empty";
    QTest::newRow("empty host") << QStringList{"a", ""} << "h" << 29500 << "is empty";
    QTest::newRow("twice") << QStringList{"a", "b", "a"} << "h" << 29500 << "listed twice";
    QTest::newRow("no addr") << QStringList{"a", "b"} << "" << 29500 << "--master-addr";
    QTest::newRow("no port") << QStringList{"a", "b"} << "h" << 0 << "--master-port";
  }
  void rejects() {
    QFETCH(QStringList, hosts);
    QFETCH(QString, addr);
    QFETCH(int, port);
    QFETCH(QString, message);
    std::vector<std::string> names;
    for (const QString& h : hosts) names.push_back(h.toStdString());
    try {
      node_launch_commands(names, 1, addr.toStdString(), port, layout(), "studio-train");
      QFAIL("accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
    }
  }
};

QTEST_MAIN(TestNodeLaunch)
#include "tst_node_launch.moc"
