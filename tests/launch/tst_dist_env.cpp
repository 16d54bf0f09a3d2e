// dist_env_from over tables of environments as torchrun, studio-train --nproc and srun set them,
// and the errors for partial or inconsistent ones, which must name the variable and its value.
#include <QtTest>

#include <stdexcept>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch_test_util.h"
#include "studio/launch/dist_env.h"

using launch_test::FakeEnv;
using studio::launch::dist_env_from;
using studio::launch::DistEnv;

namespace {

// rank, local_rank, world_size, local_world_size, nnodes, node_rank, master_port
QList<int> fields(const DistEnv& e) {
  return {e.rank,   e.local_rank, e.world_size, e.local_world_size,
          e.nnodes, e.node_rank,  e.master_port};
}

const QStringList kSlurmStep8 = {"SLURM_STEP_ID=0",
                                 "SLURM_PROCID=5",
                                 "SLURM_NTASKS=8",
                                 "SLURM_LOCALID=1",
                                 "SLURM_NNODES=2",
                                 "SLURM_NODEID=1",
                                 "SLURM_TASKS_PER_NODE=4(x2)",
                                 "MASTER_ADDR=node-a",
                                 "MASTER_PORT=1234"};

}  // namespace

class TestDistEnv : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void reads_data();
  void reads();
  void errorsNameTheVariable_data();
  void errorsNameTheVariable();
  void workerProcess_data();
  void workerProcess();
  void slurmPortIsStablePerJob();
  void storeListenFd_data();
  void storeListenFd();
};

void TestDistEnv::reads_data() {
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<QString>("source");
  QTest::addColumn<QList<int>>("expected");
  QTest::addColumn<QString>("addr");
  QTest::newRow("nothing: single process")
      << QStringList{} << "single" << QList<int>{0, 0, 1, 1, 1, 0, 29500} << "127.0.0.1";
  QTest::newRow("torchrun, 2 nodes of 4, rank 5")
      << QStringList{"RANK=5",       "LOCAL_RANK=1",       "WORLD_SIZE=8",     "LOCAL_WORLD_SIZE=4",
                     "GROUP_RANK=1", "MASTER_ADDR=node-a", "MASTER_PORT=29400"}
      << "torchrun" << QList<int>{5, 1, 8, 4, 2, 1, 29400} << "node-a";
  QTest::newRow("torchrun without GROUP_RANK: node from rank")
      << QStringList{"RANK=6",        "LOCAL_RANK=2", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4",
                     "MASTER_ADDR=h", "MASTER_PORT=2"}
      << "torchrun" << QList<int>{6, 2, 8, 4, 2, 1, 2} << "h";
  QTest::newRow("studio-train --nproc: NNODES and NODE_RANK")
      << QStringList{"RANK=4",          "LOCAL_RANK=0", "WORLD_SIZE=6", "LOCAL_WORLD_SIZE=2",
                     "NNODES=3",        "NODE_RANK=2",  "GROUP_RANK=2", "MASTER_ADDR=10.0.0.1",
                     "MASTER_PORT=3000"}
      << "torchrun" << QList<int>{4, 0, 6, 2, 3, 2, 3000} << "10.0.0.1";
  QTest::newRow("NNODES gives LOCAL_WORLD_SIZE")
      << QStringList{"RANK=3",   "LOCAL_RANK=1",  "WORLD_SIZE=4",
                     "NNODES=2", "MASTER_ADDR=h", "MASTER_PORT=9"}
      << "torchrun" << QList<int>{3, 1, 4, 2, 2, 1, 9} << "h";
  QTest::newRow("one node without LOCAL_WORLD_SIZE")
      << QStringList{"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=9"}
      << "torchrun" << QList<int>{1, 1, 2, 2, 1, 0, 9} << "h";
  QTest::newRow("torchrun world of 1 needs nothing else")
      << QStringList{"RANK=0", "WORLD_SIZE=1"} << "torchrun" << QList<int>{0, 0, 1, 1, 1, 0, 29500}
      << "127.0.0.1";
  QTest::newRow("torchrun wins over slurm")
      << (kSlurmStep8 + QStringList{"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "MASTER_PORT=77"})
      << "torchrun" << QList<int>{1, 1, 2, 2, 1, 0, 77} << "node-a";
  QTest::newRow("srun step, 2 nodes of 4")
      << kSlurmStep8 << "slurm" << QList<int>{5, 1, 8, 4, 2, 1, 1234} << "node-a";
  QTest::newRow("srun: launch node address, port from the job id")
      << QStringList{"SLURM_STEPID=1",          "SLURM_PROCID=2",
                     "SLURM_NTASKS=4",          "SLURM_LOCALID=0",
                     "SLURM_NNODES=2",          "SLURM_NODEID=1",
                     "SLURM_NTASKS_PER_NODE=2", "SLURM_LAUNCH_NODE_IPADDR=10.9.8.7",
                     "SLURM_JOB_ID=4242"}
      << "slurm" << QList<int>{2, 0, 4, 2, 2, 1, 29500 + 4242} << "10.9.8.7";
  QTest::newRow("srun: uneven nodes 3,2, node 1")
      << QStringList{"SLURM_STEP_ID=0",          "SLURM_PROCID=4", "SLURM_NTASKS=5",
                     "SLURM_LOCALID=1",          "SLURM_NNODES=2", "SLURM_NODEID=1",
                     "SLURM_TASKS_PER_NODE=3,2", "MASTER_ADDR=h",  "MASTER_PORT=5"}
      << "slurm" << QList<int>{4, 1, 5, 2, 2, 1, 5} << "h";
  QTest::newRow("srun: the step's own tasks per node win")
      << QStringList{"SLURM_STEP_ID=0",        "SLURM_PROCID=1",
                     "SLURM_NTASKS=2",         "SLURM_LOCALID=1",
                     "SLURM_NNODES=1",         "SLURM_NODEID=0",
                     "SLURM_TASKS_PER_NODE=8", "SLURM_STEP_TASKS_PER_NODE=2",
                     "MASTER_ADDR=h",          "MASTER_PORT=5"}
      << "slurm" << QList<int>{1, 1, 2, 2, 1, 0, 5} << "h";
  QTest::newRow("srun: no tasks-per-node, even split")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1",
                     "SLURM_NNODES=2",  "SLURM_NODEID=1", "MASTER_ADDR=h",  "MASTER_PORT=5"}
      << "slurm" << QList<int>{3, 1, 4, 2, 2, 1, 5} << "h";
  QTest::newRow("srun: one task is one process")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0"}
      << "slurm" << QList<int>{0, 0, 1, 1, 1, 0, 29500} << "127.0.0.1";
  QTest::newRow("batch script (no step): single, not rank 0 of 8")
      << QStringList{"SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_NNODES=2", "SLURM_NODEID=0",
                     "SLURM_LOCALID=0"}
      << "single" << QList<int>{0, 0, 1, 1, 1, 0, 29500} << "127.0.0.1";
  QTest::newRow("empty RANK and WORLD_SIZE are unset")
      << QStringList{"RANK=", "WORLD_SIZE="} << "single" << QList<int>{0, 0, 1, 1, 1, 0, 29500}
      << "127.0.0.1";
}

void TestDistEnv::reads() {
  QFETCH(QStringList, env);
  QFETCH(QString, source);
  QFETCH(QList<int>, expected);
  QFETCH(QString, addr);
  const FakeEnv fake(env);
  DistEnv got;
  try {
    got = dist_env_from(fake.getenv());
  } catch (const std::exception& e) {
    QFAIL(e.what());
  }
  QCOMPARE(QString::fromStdString(got.source), source);
  QCOMPARE(fields(got), expected);
  QCOMPARE(QString::fromStdString(got.master_addr), addr);
  QCOMPARE(got.distributed(), expected[2] > 1);
}

void TestDistEnv::errorsNameTheVariable_data() {
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<QStringList>("mentions");
  const QStringList master = {"MASTER_ADDR=h", "MASTER_PORT=5"};
  QTest::newRow("RANK without WORLD_SIZE")
      << QStringList{"RANK=3"} << QStringList{"RANK=3", "WORLD_SIZE", "export"};
  QTest::newRow("WORLD_SIZE without RANK")
      << QStringList{"WORLD_SIZE=4"} << QStringList{"WORLD_SIZE=4", "RANK is not"};
  QTest::newRow("RANK not below WORLD_SIZE")
      << (master + QStringList{"RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=0"})
      << QStringList{"RANK=4", "WORLD_SIZE=4", "0..3"};
  QTest::newRow("RANK not a number")
      << QStringList{"RANK=two", "WORLD_SIZE=4"} << QStringList{"RANK=two", "not an integer"};
  QTest::newRow("WORLD_SIZE with junk")
      << QStringList{"RANK=0", "WORLD_SIZE=4x"} << QStringList{"WORLD_SIZE=4x", "not an integer"};
  QTest::newRow("WORLD_SIZE zero")
      << QStringList{"RANK=0", "WORLD_SIZE=0"} << QStringList{"WORLD_SIZE=0", "not in range"};
  QTest::newRow("port out of range")
      << QStringList{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=70000"}
      << QStringList{"MASTER_PORT=70000", "1..65535"};
  QTest::newRow("no MASTER_ADDR") << QStringList{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                                 "MASTER_PORT=5"}
                                  << QStringList{"MASTER_ADDR is not set", "export MASTER_ADDR"};
  QTest::newRow("no MASTER_PORT") << QStringList{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                                 "MASTER_ADDR=h"}
                                  << QStringList{"MASTER_PORT is not set", "export MASTER_PORT"};
  QTest::newRow("no LOCAL_RANK") << (master + QStringList{"RANK=1", "WORLD_SIZE=2"})
                                 << QStringList{"LOCAL_RANK is not set", "RANK=1", "WORLD_SIZE=2"};
  QTest::newRow("LOCAL_RANK past LOCAL_WORLD_SIZE")
      << (master + QStringList{"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"})
      << QStringList{"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"};
  QTest::newRow("several nodes without LOCAL_WORLD_SIZE")
      << (master + QStringList{"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1"})
      << QStringList{"LOCAL_WORLD_SIZE is not set", "LOCAL_RANK=1", "RANK=5"};
  QTest::newRow("NNODES disagrees")
      << (master +
          QStringList{"RANK=1", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "NNODES=3"})
      << QStringList{"NNODES=3", "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=8"};
  QTest::newRow("NODE_RANK past the nodes")
      << (master + QStringList{"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                               "NODE_RANK=2"})
      << QStringList{"NODE_RANK=2", "node count 2"};
  QTest::newRow("srun step without SLURM_NTASKS")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=1"}
      << QStringList{"SLURM_NTASKS is not set", "SLURM_PROCID=1"};
  QTest::newRow("srun: no address at all")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1"}
      << QStringList{"MASTER_ADDR is not set", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_PROCID=1"};
  QTest::newRow("srun: bad tasks per node")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=1",           "SLURM_NTASKS=2",
                     "SLURM_LOCALID=1", "SLURM_TASKS_PER_NODE=2(x", "MASTER_ADDR=h"}
      << QStringList{"SLURM_TASKS_PER_NODE=2(x"};
  QTest::newRow("srun: SLURM_PROCID not below SLURM_NTASKS")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=2", "SLURM_NTASKS=2"}
      << QStringList{"SLURM_PROCID=2", "SLURM_NTASKS=2"};
  QTest::newRow("srun: SLURM_LOCALID past the node's tasks")
      << QStringList{"SLURM_STEP_ID=0",
                     "SLURM_PROCID=1",
                     "SLURM_NTASKS=4",
                     "SLURM_LOCALID=3",
                     "SLURM_NNODES=2",
                     "SLURM_NODEID=0",
                     "SLURM_TASKS_PER_NODE=2(x2)",
                     "MASTER_ADDR=h"}
      << QStringList{"SLURM_LOCALID=3", "SLURM_TASKS_PER_NODE"};
}

void TestDistEnv::errorsNameTheVariable() {
  QFETCH(QStringList, env);
  QFETCH(QStringList, mentions);
  const FakeEnv fake(env);
  QString message;
  try {
    dist_env_from(fake.getenv());
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  QVERIFY2(!message.isEmpty(), "no std::invalid_argument thrown");
  for (const QString& m : mentions)
    QVERIFY2(message.contains(m), qPrintable("'" + m + "' not in: " + message));
}

void TestDistEnv::workerProcess_data() {
  QTest::addColumn<QStringList>("env");
  QTest::addColumn<bool>("worker");
  QTest::newRow("nothing") << QStringList{} << false;
  QTest::newRow("torchrun") << QStringList{"RANK=0", "WORLD_SIZE=2"} << true;
  QTest::newRow("torchrun world 1") << QStringList{"RANK=0", "WORLD_SIZE=1"} << true;
  QTest::newRow("half of torchrun") << QStringList{"RANK=1"} << true;
  QTest::newRow("srun step of 8") << kSlurmStep8 << true;
  QTest::newRow("srun step of 1") << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=0",
                                                 "SLURM_NTASKS=1"}
                                  << false;
  QTest::newRow("batch script of 8") << QStringList{"SLURM_PROCID=0", "SLURM_NTASKS=8"} << false;
  QTest::newRow("srun step, SLURM_NTASKS junk")
      << QStringList{"SLURM_STEP_ID=0", "SLURM_PROCID=0", "SLURM_NTASKS=x"} << true;
}

void TestDistEnv::workerProcess() {
  QFETCH(QStringList, env);
  QFETCH(bool, worker);
  const FakeEnv fake(env);
  QCOMPARE(studio::launch::is_worker_process(fake.getenv()), worker);
}

void TestDistEnv::slurmPortIsStablePerJob() {
  QCOMPARE(studio::launch::slurm_default_port(123456), 29500 + 3456);
  QCOMPARE(studio::launch::slurm_default_port(9999), 39499);
  QCOMPARE(studio::launch::slurm_default_port(10000), 29500);
}

QTEST_MAIN(TestDistEnv)
// take_store_listen_fd: the socket rank 0 gets from the launcher is taken (the variable unset,
// the descriptor made close-on-exec); anything else in the variable is refused, naming it.
void TestDistEnv::storeListenFd_data() {
  QTest::addColumn<QString>("value");  // "$LISTEN", "$BOUND", "$FILE": such a descriptor's number
  QTest::addColumn<int>("portOffset");  // MASTER_PORT given as the socket's port plus this
  QTest::addColumn<QString>("error");   // "" when taken
  QTest::newRow("unset") << QString() << 0 << "";
  QTest::newRow("the listening socket") << "$LISTEN" << 0 << "";
  QTest::newRow("not a number") << "three" << 0 << "STUDIO_STORE_LISTEN_FD=three is not a descriptor number";
  QTest::newRow("negative") << "-1" << 0 << "STUDIO_STORE_LISTEN_FD=-1 is not a descriptor number";
  QTest::newRow("closed descriptor") << "999" << 0 << "STUDIO_STORE_LISTEN_FD=999 is not a listening socket";
  QTest::newRow("a file") << "$FILE" << 0 << "is not a listening socket";
  QTest::newRow("bound, not listening") << "$BOUND" << 0 << "is not a listening socket";
  QTest::newRow("another port") << "$LISTEN" << 1 << ", not on MASTER_PORT=";
}

void TestDistEnv::storeListenFd() {
  QFETCH(QString, value);
  QFETCH(int, portOffset);
  QFETCH(QString, error);
  auto socket_on_any_port = [](bool listen, int& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    socklen_t len = sizeof addr;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (listen) ::listen(fd, 4);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    return fd;
  };
  int port = 0;
  int fd = -1;
  if (value == "$LISTEN" || value == "$BOUND") fd = socket_on_any_port(value == "$LISTEN", port);
  if (value == "$FILE") fd = ::open("/dev/null", O_RDONLY);
  if (fd >= 0) value = QString::number(fd);
  std::optional<launch_test::ScopedEnv> var;
  if (!value.isNull()) var.emplace("STUDIO_STORE_LISTEN_FD", value.toStdString());
  std::string message;
  std::optional<int> taken;
  try {
    taken = studio::launch::take_store_listen_fd(port + portOffset);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  QVERIFY(qgetenv("STUDIO_STORE_LISTEN_FD").isNull());  // taken out in every case
  if (error.isEmpty()) {
    QVERIFY2(message.empty(), message.c_str());
    QCOMPARE(taken.has_value(), fd >= 0);
    if (taken) {
      QCOMPARE(*taken, fd);
      QCOMPARE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    }
  } else {
    QVERIFY2(message.find(error.toStdString()) != std::string::npos, message.c_str());
    QVERIFY2(message.find("unset") != std::string::npos, message.c_str());
  }
  if (fd >= 0) ::close(fd);
}

#include "tst_dist_env.moc"
