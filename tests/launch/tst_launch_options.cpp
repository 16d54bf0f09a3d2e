// The launcher flags: taken out of a command line (the rest is what every worker runs), then
// completed from the environment so one srun task per node can be the launcher.
#include <QtTest>

#include <stdexcept>

#include "launch_test_util.h"
#include "studio/launch/launch_options.h"

using launch_test::FakeEnv;
using studio::launch::LauncherFlags;
using studio::launch::LaunchOptions;

namespace {

QStringList to_qt(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

std::vector<std::string> to_std(const QStringList& l) {
  std::vector<std::string> out;
  for (const auto& s : l) out.push_back(s.toStdString());
  return out;
}

// nproc, nnodes, node_rank, master_port (-1: absent)
QList<int> numbers(const LauncherFlags& f) {
  return {f.nproc.value_or(-1), f.nnodes.value_or(-1), f.node_rank.value_or(-1),
          f.master_port.value_or(-1)};
}

}  // namespace

class TestLaunchOptions : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void takesFlags_data();
  void takesFlags();
  void refusesBadFlags_data();
  void refusesBadFlags();
  void resolves_data();
  void resolves();
  void refusesToResolve_data();
  void refusesToResolve();
  void restartsFromFlagOrEnvironment_data();
  void restartsFromFlagOrEnvironment();
  void rendezvousWhenElastic_data();
  void rendezvousWhenElastic();
};

void TestLaunchOptions::takesFlags_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QStringList>("rest");
  QTest::addColumn<QList<int>>("flags");
  QTest::addColumn<QString>("addr");  // "" when absent
  QTest::newRow("none") << QStringList{"run.yaml", "--set", "lr=1e-4"}
                        << QStringList{"run.yaml", "--set", "lr=1e-4"} << QList<int>{-1, -1, -1, -1}
                        << "";
  QTest::newRow("--nproc N") << QStringList{"run.yaml", "--nproc", "8"} << QStringList{"run.yaml"}
                             << QList<int>{8, -1, -1, -1} << "";
  QTest::newRow("all, both spellings, mixed with the command's own")
      << QStringList{"--nproc=4", "run.yaml",      "--nnodes",      "2",      "--set",
                     "epochs=1",  "--node-rank=1", "--master-addr", "node-a", "--master-port=29400"}
      << QStringList{"run.yaml", "--set", "epochs=1"} << QList<int>{4, 2, 1, 29400} << "node-a";
  QTest::newRow("port 0 asks for a free one") << QStringList{"--nproc", "2", "--master-port", "0"}
                                              << QStringList{} << QList<int>{2, -1, -1, 0} << "";
  QTest::newRow("a similar flag is the command's")
      << QStringList{"--nprocs", "2", "--nproc-x=1"} << QStringList{"--nprocs", "2", "--nproc-x=1"}
      << QList<int>{-1, -1, -1, -1} << "";
}

void TestLaunchOptions::takesFlags() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, rest);
  QFETCH(QList<int>, flags);
  QFETCH(QString, addr);
  std::vector<std::string> argv = to_std(args);
  const LauncherFlags got = studio::launch::take_launcher_flags(argv);
  QCOMPARE(to_qt(argv), rest);
  QCOMPARE(numbers(got), flags);
  QCOMPARE(QString::fromStdString(got.master_addr.value_or("")), addr);
  QCOMPARE(got.any(), (flags != QList<int>{-1, -1, -1, -1} || !addr.isEmpty()));
}

void TestLaunchOptions::refusesBadFlags_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QString>("mentions");
  QTest::newRow("no value") << QStringList{"run.yaml", "--nproc"} << "--nproc needs a value";
  QTest::newRow("not a number") << QStringList{"--nproc=eight"}
                                << "--nproc: expected an integer in 1..";
  QTest::newRow("zero workers") << QStringList{"--nproc", "0"} << "got '0'";
  QTest::newRow("negative node rank")
      << QStringList{"--node-rank", "-1"} << "--node-rank: expected an integer in 0..";
  QTest::newRow("port too large") << QStringList{"--master-port=65536"}
                                  << "--master-port: expected an integer in 0..65535";
  QTest::newRow("empty address") << QStringList{"--master-addr="} << "--master-addr";
  QTest::newRow("twice") << QStringList{"--nproc", "2", "--nproc=4"} << "--nproc is given twice";
}

void TestLaunchOptions::refusesBadFlags() {
  QFETCH(QStringList, args);
  QFETCH(QString, mentions);
  std::vector<std::string> argv = to_std(args);
  QString message;
  try {
    studio::launch::take_launcher_flags(argv);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  QVERIFY2(message.contains(mentions), qPrintable("'" + mentions + "' not in: '" + message + "'"));
}

void TestLaunchOptions::resolves_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<QList<int>>("expected");  // nproc, nnodes, node_rank, master_port
  QTest::addColumn<QString>("addr");
  const QStringList srun2 = {"SLURM_STEP_ID=0",
                             "SLURM_PROCID=1",
                             "SLURM_NTASKS=2",
                             "SLURM_NNODES=2",
                             "SLURM_NODEID=1",
                             "SLURM_LOCALID=0",
                             "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1",
                             "SLURM_JOB_ID=12345"};
  QTest::newRow("one node: loopback and a free port")
      << QStringList{"--nproc", "4"} << QStringList{} << QList<int>{4, 1, 0, 0} << "127.0.0.1";
  QTest::newRow("one node, MASTER_* from the environment")
      << QStringList{"--nproc", "2"} << QStringList{"MASTER_ADDR=gpu-1", "MASTER_PORT=29555"}
      << QList<int>{2, 1, 0, 29555} << "gpu-1";
  QTest::newRow("flags win over the environment")
      << QStringList{"--nproc", "2", "--master-addr", "a", "--master-port", "1"}
      << QStringList{"MASTER_ADDR=b", "MASTER_PORT=2"} << QList<int>{2, 1, 0, 1} << "a";
  QTest::newRow("srun, one task per node: node from Slurm")
      << QStringList{"--nproc", "8"} << srun2 << QList<int>{8, 2, 1, 29500 + 2345} << "10.0.0.1";
  QTest::newRow("srun, MASTER_* exported")
      << QStringList{"--nproc", "8"} << (srun2 + QStringList{"MASTER_ADDR=n0", "MASTER_PORT=4000"})
      << QList<int>{8, 2, 1, 4000} << "n0";
  QTest::newRow("srun, node flags given: Slurm's layout not needed")
      << QStringList{"--nproc", "2", "--nnodes", "3", "--node-rank", "2", "--master-port", "7"}
      << (srun2 + QStringList{"SLURM_NTASKS=6"}) << QList<int>{2, 3, 2, 7} << "10.0.0.1";
  QTest::newRow("srun step of one task: one node")
      << QStringList{"--nproc", "2"}
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_NNODES=1",
                     "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1"}
      << QList<int>{2, 1, 0, 0} << "127.0.0.1";
  QTest::newRow("batch script of 2 nodes, no srun: one node")
      << QStringList{"--nproc", "2"}
      << QStringList{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NNODES=2", "SLURM_NODEID=0"}
      << QList<int>{2, 1, 0, 0} << "127.0.0.1";
}

void TestLaunchOptions::resolves() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, env);
  QFETCH(QList<int>, expected);
  QFETCH(QString, addr);
  std::vector<std::string> argv = to_std(args);
  const FakeEnv fake(env);
  LaunchOptions opt;
  try {
    opt = studio::launch::launch_options_from(studio::launch::take_launcher_flags(argv),
                                              fake.getenv());
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QCOMPARE((QList<int>{opt.nproc, opt.nnodes, opt.node_rank, opt.master_port}), expected);
  QCOMPARE(QString::fromStdString(opt.master_addr), addr);
}

void TestLaunchOptions::refusesToResolve_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<QStringList>("mentions");
  QTest::newRow("--nnodes without --nproc")
      << QStringList{"--nnodes", "2"} << QStringList{} << QStringList{"--nproc is missing"};
  QTest::newRow("already a torchrun worker")
      << QStringList{"--nproc", "2"} << QStringList{"RANK=1", "WORLD_SIZE=2"}
      << QStringList{"RANK=1", "WORLD_SIZE=2", "already is a worker", "drop --nproc"};
  QTest::newRow("srun started every rank")
      << QStringList{"--nproc", "4"}
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_NNODES=2"}
      << QStringList{"SLURM_NTASKS=8", "SLURM_NNODES=2", "--ntasks-per-node=1"};
  QTest::newRow("node rank past the nodes")
      << QStringList{"--nproc", "1", "--nnodes", "2", "--node-rank", "2"} << QStringList{}
      << QStringList{"--node-rank 2", "--nnodes 2"};
  QTest::newRow("several nodes, no address")
      << QStringList{"--nproc", "1", "--nnodes", "2", "--node-rank", "1", "--master-port", "5"}
      << QStringList{} << QStringList{"--master-addr", "MASTER_ADDR"};
  QTest::newRow("several nodes, no port")
      << QStringList{"--nproc", "1", "--nnodes", "2", "--master-addr", "h"} << QStringList{}
      << QStringList{"--master-port", "MASTER_PORT"};
  QTest::newRow("several nodes, port 0")
      << QStringList{"--nproc", "1", "--nnodes", "2", "--master-addr", "h", "--master-port", "0"}
      << QStringList{} << QStringList{"--master-port"};
  QTest::newRow("bad MASTER_PORT") << QStringList{"--nproc", "1"} << QStringList{"MASTER_PORT=http"}
                                   << QStringList{"MASTER_PORT=http"};
  QTest::newRow("bad MAX_RESTARTS") << QStringList{"--nproc", "1"} << QStringList{"MAX_RESTARTS=-1"}
                                    << QStringList{"MAX_RESTARTS=-1", "0..1000"};
  QTest::newRow("RDZV_ID with a space")
      << QStringList{"--nproc", "2"} << QStringList{"RDZV_ID=job 7"}
      << QStringList{"RDZV_ID=job 7", "letters, digits"};
  QTest::newRow("--rdzv-timeout 0")
      << QStringList{"--nproc", "1", "--rdzv-timeout", "0"} << QStringList{}
      << QStringList{"--rdzv-timeout"};
}

void TestLaunchOptions::restartsFromFlagOrEnvironment_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<int>("restarts");
  QTest::newRow("none") << QStringList{"--nproc", "2"} << QStringList{} << 0;
  QTest::newRow("the flag") << QStringList{"--nproc", "2", "--max-restarts", "3"} << QStringList{} << 3;
  QTest::newRow("MAX_RESTARTS (LLaMA-Factory's)") << QStringList{"--nproc", "2"}
                                                  << QStringList{"MAX_RESTARTS=2"} << 2;
  QTest::newRow("the flag wins") << QStringList{"--nproc", "2", "--max-restarts=1"}
                                 << QStringList{"MAX_RESTARTS=5"} << 1;
}

// Several nodes with restarts (or an RDZV_ID) meet at a rendezvous; one node needs none.
void TestLaunchOptions::rendezvousWhenElastic_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<bool>("elastic");
  QTest::addColumn<QString>("id");
  QTest::addColumn<int>("timeout");
  const QStringList two{"--nproc", "1", "--nnodes", "2", "--master-addr", "h", "--master-port", "5"};
  QTest::newRow("two nodes, no restarts") << two << QStringList{} << false << "" << 600;
  QTest::newRow("two nodes, restarts")
      << two + QStringList{"--max-restarts", "1", "--rdzv-timeout", "30"} << QStringList{} << true
      << "" << 30;
  QTest::newRow("two nodes, RDZV_ID (LLaMA-Factory's)")
      << two << QStringList{"RDZV_ID=job-7.a", "MAX_RESTARTS=2"} << true << "job-7.a" << 600;
  QTest::newRow("one node, RDZV_ID: restarts without one")
      << QStringList{"--nproc", "2"} << QStringList{"RDZV_ID=job7", "MAX_RESTARTS=2"} << false
      << "job7" << 600;
}

void TestLaunchOptions::rendezvousWhenElastic() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, env);
  QFETCH(bool, elastic);
  QFETCH(QString, id);
  QFETCH(int, timeout);
  std::vector<std::string> argv = to_std(args);
  const FakeEnv fake(env);
  const LaunchOptions opt =
      studio::launch::launch_options_from(studio::launch::take_launcher_flags(argv), fake.getenv());
  QCOMPARE(opt.elastic(), elastic);
  QCOMPARE(QString::fromStdString(opt.rdzv_id), id);
  QCOMPARE(opt.rdzv_timeout_s, timeout);
}

void TestLaunchOptions::restartsFromFlagOrEnvironment() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, env);
  QFETCH(int, restarts);
  std::vector<std::string> argv = to_std(args);
  const FakeEnv fake(env);
  const LauncherFlags flags = studio::launch::take_launcher_flags(argv);
  QVERIFY(flags.any());
  QCOMPARE(studio::launch::launch_options_from(flags, fake.getenv()).max_restarts, restarts);
}

void TestLaunchOptions::refusesToResolve() {
  QFETCH(QStringList, args);
  QFETCH(QStringList, env);
  QFETCH(QStringList, mentions);
  std::vector<std::string> argv = to_std(args);
  const FakeEnv fake(env);
  QString message;
  try {
    studio::launch::launch_options_from(studio::launch::take_launcher_flags(argv), fake.getenv());
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  QVERIFY2(!message.isEmpty(), "no std::invalid_argument thrown");
  for (const QString& m : mentions)
    QVERIFY2(message.contains(m), qPrintable("'" + m + "' not in: " + message));
}

QTEST_MAIN(TestLaunchOptions)
#include "tst_launch_options.moc"
