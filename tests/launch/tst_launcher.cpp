// launch_workers with real processes: launch_probe workers report their environment, fail, ignore
// SIGTERM or print on request, and the launcher's environment, stopping, timing, output tagging
// and failure recording are checked against what the workers and OUTPUT_DIR show.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "launch_test_util.h"
#include "studio/base/atomic_file.h"
#include "studio/launch/launcher.h"

using launch_test::ScopedEnv;
using nlohmann::json;
using studio::launch::launch_workers;
using studio::launch::LaunchOptions;
using studio::launch::LaunchResult;

namespace {

LaunchOptions probe(const QString& out, int nproc, const QStringList& extra = {}) {
  LaunchOptions opt;
  opt.nproc = nproc;
  opt.worker_argv = {STUDIO_LAUNCH_PROBE, "--out", out.toStdString()};
  for (const QString& a : extra) opt.worker_argv.push_back(a.toStdString());
  return opt;
}

struct Timed {
  LaunchResult result;
  double seconds = 0;
};

Timed timed_launch(const LaunchOptions& opt, const std::atomic<bool>* stop = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  Timed t;
  t.result = launch_workers(opt, stop);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

json read_json(const QString& path) {
  std::ifstream in(path.toStdString());
  if (!in) return json();
  return json::parse(in, nullptr, false);
}

int count_rank_files(const QString& dir) {
  return int(QDir(dir).entryList({"rank-*.json"}, QDir::Files).size());
}

// Waits until `n` workers have written their files (they are set up), up to 20 s.
bool wait_for_ranks(const QString& dir, int n) {
  for (int i = 0; i < 2000; ++i) {
    if (count_rank_files(dir) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Gone, or a zombie waiting for a reaper that is not us.
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

QStringList lines_of(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no std::invalid_argument thrown>";
}

}  // namespace

class TestLauncher : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void environmentOfEveryRank_data();
  void environmentOfEveryRank();
  void userEnvironmentWins();
  void failureStopsTheOthers_data();
  void failureStopsTheOthers();
  void sigtermIgnoredEscalatesToSigkill_data();
  void sigtermIgnoredEscalatesToSigkill();
  void stopFlagStopsEveryWorker_data();
  void stopFlagStopsEveryWorker();
  void rankZeroEndIsNotDuplicated_data();
  void rankZeroEndIsNotDuplicated();
  void outputOfOtherRanksIsTagged();
  void workersDieWithAKilledLauncher();
  void badOptionsAreRefused_data();
  void badOptionsAreRefused();
  void freePortIsBindable();
  void busyPortFailsBeforeAnyWorker();
  void heldPortIsHandedToRankZero();
  void signalNames();
};

void TestLauncher::environmentOfEveryRank_data() {
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("nnodes");
  QTest::addColumn<int>("nodeRank");
  QTest::addColumn<int>("port");  // 0: the launcher chooses
  QTest::newRow("1 process") << 1 << 1 << 0 << 0;
  QTest::newRow("2 processes") << 2 << 1 << 0 << 0;
  QTest::newRow("4 processes, given port") << 4 << 1 << 0 << 29611;
  QTest::newRow("2 per node, node 1 of 2") << 2 << 2 << 1 << 29612;
  QTest::newRow("4 per node, node 2 of 3") << 4 << 3 << 2 << 29613;
  QTest::newRow("1 per node, node 0 of 4") << 1 << 4 << 0 << 29614;
}

void TestLauncher::environmentOfEveryRank() {
  QFETCH(int, nproc);
  QFETCH(int, nnodes);
  QFETCH(int, nodeRank);
  QFETCH(int, port);
  ScopedEnv alloc("PYTORCH_CUDA_ALLOC_CONF", std::nullopt);
  ScopedEnv alloc2("PYTORCH_ALLOC_CONF", std::nullopt);
  ScopedEnv nccl("TORCH_NCCL_AVOID_RECORD_STREAMS", std::nullopt);
  ScopedEnv omp("OMP_NUM_THREADS", std::nullopt);
  ScopedEnv stale_rank("LOCAL_RANK", "7");  // the launcher's own value must not leak through
  ScopedEnv stale_fd("STUDIO_STORE_LISTEN_FD", "9");  // nor an outer launcher's socket
  QTemporaryDir dir;
  LaunchOptions opt = probe(dir.path(), nproc);
  opt.nnodes = nnodes;
  opt.node_rank = nodeRank;
  opt.master_port = port;
  opt.master_addr = "10.1.2.3";
  opt.extra_env = {{"STUDIO_LAUNCHED", "1"}};
  const Timed t = timed_launch(opt);
  QCOMPARE(t.result.exit_code, 0);
  QCOMPARE(t.result.failed_rank, -1);
  QVERIFY(t.result.reason.empty());
  QCOMPARE(int(t.result.exit_codes.size()), nproc);
  QCOMPARE(count_rank_files(dir.path()), nproc);

  std::set<int> pids;
  std::set<std::string> ports;
  for (int local = 0; local < nproc; ++local) {
    const int rank = nodeRank * nproc + local;
    const json j = read_json(dir.filePath(QString("rank-%1.json").arg(rank)));
    QVERIFY2(j.is_object(), qPrintable(QString("no file of rank %1").arg(rank)));
    const json& env = j["env"];
    QCOMPARE(env["RANK"].get<std::string>(), std::to_string(rank));
    QCOMPARE(env["LOCAL_RANK"].get<std::string>(), std::to_string(local));
    QCOMPARE(env["WORLD_SIZE"].get<std::string>(), std::to_string(nnodes * nproc));
    QCOMPARE(env["LOCAL_WORLD_SIZE"].get<std::string>(), std::to_string(nproc));
    QCOMPARE(env["NNODES"].get<std::string>(), std::to_string(nnodes));
    QCOMPARE(env["NODE_RANK"].get<std::string>(), std::to_string(nodeRank));
    QCOMPARE(env["GROUP_RANK"].get<std::string>(), std::to_string(nodeRank));
    QCOMPARE(env["MASTER_ADDR"].get<std::string>(), std::string("10.1.2.3"));
    QCOMPARE(env["PYTORCH_CUDA_ALLOC_CONF"].get<std::string>(),
             std::string("expandable_segments:True"));
    QCOMPARE(env["TORCH_NCCL_AVOID_RECORD_STREAMS"].get<std::string>(), std::string("1"));
    if (nproc > 1)
      QVERIFY(std::stoi(env["OMP_NUM_THREADS"].get<std::string>()) >= 1);
    else
      QCOMPARE(env["OMP_NUM_THREADS"].get<std::string>(), std::string("<unset>"));
    QCOMPARE(env["STUDIO_LAUNCHED"].get<std::string>(), std::string("1"));  // extra_env
    ports.insert(env["MASTER_PORT"].get<std::string>());
    if (port != 0) QCOMPARE(env["MASTER_PORT"].get<std::string>(), std::to_string(port));
    // The worker's own reading of that environment agrees.
    QVERIFY2(j.contains("dist"), qPrintable(QString::fromStdString(j.value("dist_error", ""))));
    const json& d = j["dist"];
    QCOMPARE(d["source"].get<std::string>(), std::string("torchrun"));
    QCOMPARE(d["rank"].get<int>(), rank);
    QCOMPARE(d["local_rank"].get<int>(), local);
    QCOMPARE(d["world_size"].get<int>(), nnodes * nproc);
    QCOMPARE(d["local_world_size"].get<int>(), nproc);
    QCOMPARE(d["nnodes"].get<int>(), nnodes);
    QCOMPARE(d["node_rank"].get<int>(), nodeRank);
    QCOMPARE(j["ppid"].get<int>(), int(::getpid()));
    pids.insert(j["pid"].get<int>());
    // Rank 0 of a world of several gets the store's socket as descriptor 3, listening on
    // MASTER_PORT; every other rank gets neither the socket nor the variable.
    if (rank == 0 && nnodes * nproc > 1) {
      QCOMPARE(env["STUDIO_STORE_LISTEN_FD"].get<std::string>(), std::string("3"));
      QVERIFY2(j["fd3"].is_object(), j["fd3"].dump().c_str());
      QCOMPARE(j["fd3"]["listening"].get<bool>(), true);
      QCOMPARE(std::to_string(j["fd3"]["port"].get<int>()), env["MASTER_PORT"].get<std::string>());
    } else {
      QCOMPARE(env["STUDIO_STORE_LISTEN_FD"].get<std::string>(), std::string("<unset>"));
      QCOMPARE(j["fd3"], json("none"));
    }
    // On rank 0's node the port takes connections before any rank serves on it: the launcher
    // listened on it before starting them (no rank of this probe ever listens).
    if (nodeRank == 0 && nnodes * nproc > 1) QVERIFY(j["master_port_connects"].get<bool>());
  }
  QCOMPARE(int(pids.size()), nproc);
  QCOMPARE(int(ports.size()), 1);  // a chosen port is the same for every rank
  const int used = std::stoi(*ports.begin());
  QVERIFY(used > 0 && used <= 65535);
}

void TestLauncher::userEnvironmentWins() {
  ScopedEnv alloc("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync");
  ScopedEnv nccl("TORCH_NCCL_AVOID_RECORD_STREAMS", "0");
  ScopedEnv omp("OMP_NUM_THREADS", "3");
  QTemporaryDir dir;
  const Timed t = timed_launch(probe(dir.path(), 2));
  QCOMPARE(t.result.exit_code, 0);
  for (int rank = 0; rank < 2; ++rank) {
    const json env = read_json(dir.filePath(QString("rank-%1.json").arg(rank)))["env"];
    QCOMPARE(env["PYTORCH_CUDA_ALLOC_CONF"].get<std::string>(),
             std::string("backend:cudaMallocAsync"));
    QCOMPARE(env["TORCH_NCCL_AVOID_RECORD_STREAMS"].get<std::string>(), std::string("0"));
    QCOMPARE(env["OMP_NUM_THREADS"].get<std::string>(), std::string("3"));
  }
  // The newer name counts as the user's choice too: no PYTORCH_CUDA_ALLOC_CONF is added.
  ScopedEnv unset("PYTORCH_CUDA_ALLOC_CONF", std::nullopt);
  ScopedEnv newer("PYTORCH_ALLOC_CONF", "expandable_segments:False");
  QTemporaryDir dir2;
  QCOMPARE(timed_launch(probe(dir2.path(), 1)).result.exit_code, 0);
  QCOMPARE(
      read_json(dir2.filePath("rank-0.json"))["env"]["PYTORCH_CUDA_ALLOC_CONF"].get<std::string>(),
      std::string("<unset>"));
}

void TestLauncher::failureStopsTheOthers_data() {
  QTest::addColumn<int>("nproc");
  QTest::addColumn<QStringList>("how");
  QTest::addColumn<int>("failedRank");
  QTest::addColumn<int>("exitCode");
  QTest::addColumn<QString>("reason");
  QTest::newRow("rank 2 of 4 exits 1") << 4 << QStringList{"--fail-rank", "2", "--code", "1"} << 2
                                       << 1 << "rank 2 exited with code 1";
  // A piped rank's last stderr line is its error message: the reason carries it.
  QTest::newRow("rank 1 of 2 prints, then exits 1")
      << 2 << QStringList{"--print", "--fail-rank", "1", "--code", "1"} << 1 << 1
      << "rank 1 exited with code 1: err 1";
  QTest::newRow("rank 0 of 2 exits 3") << 2 << QStringList{"--fail-rank", "0", "--code", "3"} << 0
                                       << 3 << "rank 0 exited with code 3";
  QTest::newRow("rank 1 of 3 is SIGKILLed")
      << 3 << QStringList{"--signal-rank", "1", "--signal", "9"} << 1 << 137
      << "rank 1 was killed by signal 9 (SIGKILL)";
  QTest::newRow("rank 3 of 4 is SIGSEGVed")
      << 4 << QStringList{"--signal-rank", "3", "--signal", "11"} << 3 << 139
      << "rank 3 was killed by signal 11 (SIGSEGV)";
}

void TestLauncher::failureStopsTheOthers() {
  QFETCH(int, nproc);
  QFETCH(QStringList, how);
  QFETCH(int, failedRank);
  QFETCH(int, exitCode);
  QFETCH(QString, reason);
  QTemporaryDir dir, output;
  LaunchOptions opt = probe(dir.path(), nproc, how + QStringList{"--sleep-ms", "60000"});
  opt.output_dir = output.path().toStdString();
  // A run in progress: rank 0 wrote its start and status.json, then the failure came.
  {
    studio::EventWriter w;
    QVERIFY(w.open(studio::events_path(opt.output_dir)).empty());
    studio::StartEvent start;
    start.world_size = nproc;
    QVERIFY(w.write(start).empty());
    studio::RunStatus running;
    running.step = 42;
    QVERIFY(running.write(studio::status_path(opt.output_dir)).empty());
  }
  const Timed t = timed_launch(opt);
  QVERIFY2(t.seconds < 10, qPrintable(QString("took %1 s").arg(t.seconds)));
  QCOMPARE(t.result.failed_rank, failedRank);
  QCOMPARE(t.result.exit_code, exitCode);
  QCOMPARE(QString::fromStdString(t.result.reason), reason);
  QVERIFY(!t.result.stopped);
  for (int r = 0; r < nproc; ++r) {
    if (r == failedRank) continue;
    QCOMPARE(t.result.exit_codes[r], 128 + SIGTERM);  // the launcher's SIGTERM, not a timeout
  }

  // Recorded for the studio: one end event and status.json, both naming the rank.
  QVERIFY2(t.result.record_error.empty(), t.result.record_error.c_str());
  const auto events = launch_test::read_events(opt.output_dir);
  const auto ends = launch_test::end_events(events);
  QCOMPARE(int(ends.size()), 1);
  QCOMPARE(ends[0], &events.back());
  QCOMPARE(QString::fromStdString(ends[0]->get<studio::EndEvent>()->state), QString("failed"));
  QCOMPARE(QString::fromStdString(ends[0]->get<studio::EndEvent>()->reason), reason);
  QCOMPARE(ends[0]->raw["exit_code"].get<int>(), exitCode);
  studio::RunStatus status;
  std::string error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(opt.output_dir), status, error),
           error.c_str());
  QCOMPARE(int(status.state), int(studio::RunState::Failed));
  QCOMPARE(QString::fromStdString(status.reason), reason);
  QCOMPARE(status.exit_code.value_or(-1), exitCode);
  QCOMPARE(status.step.value_or(-1), std::int64_t{42});
  QCOMPARE(status.pid, std::int64_t{::getpid()});
}

void TestLauncher::sigtermIgnoredEscalatesToSigkill_data() {
  QTest::addColumn<double>("timeout");
  QTest::newRow("1 s") << 1.0;
  QTest::newRow("default 8 s: all gone within 10 s") << LaunchOptions{}.stop_timeout_s;
}

void TestLauncher::sigtermIgnoredEscalatesToSigkill() {
  QFETCH(double, timeout);
  QTemporaryDir dir;
  LaunchOptions opt =
      probe(dir.path(), 3,
            {"--fail-rank", "1", "--code", "4", "--ignore-sigterm", "--sleep-ms", "60000"});
  opt.stop_timeout_s = timeout;
  const Timed t = timed_launch(opt);
  QCOMPARE(t.result.failed_rank, 1);
  QCOMPARE(t.result.exit_code, 4);
  QCOMPARE(t.result.exit_codes[0], 128 + SIGKILL);
  QCOMPARE(t.result.exit_codes[2], 128 + SIGKILL);
  QVERIFY2(t.seconds >= timeout, qPrintable(QString("SIGKILL came after %1 s").arg(t.seconds)));
  QVERIFY2(t.seconds < std::min(timeout + 1.5, 10.0),
           qPrintable(QString("took %1 s").arg(t.seconds)));
}

void TestLauncher::stopFlagStopsEveryWorker_data() {
  QTest::addColumn<QStringList>("behaviour");
  QTest::addColumn<int>("workerExit");  // what the launcher saw of every worker
  QTest::addColumn<QString>("endReason");
  const QString launcher = "stopped: the launcher was asked to stop (SIGINT/SIGTERM)";
  QTest::newRow("SIGTERM kills") << QStringList{} << 128 + SIGTERM << launcher;
  QTest::newRow("SIGTERM ignored: SIGKILL")
      << QStringList{"--ignore-sigterm"} << 128 + SIGKILL << launcher;
  QTest::newRow("graceful: rank 0 writes its own end")
      << QStringList{"--graceful"} << 0 << "rank 0 stopped on SIGTERM";
}

void TestLauncher::stopFlagStopsEveryWorker() {
  QFETCH(QStringList, behaviour);
  QFETCH(int, workerExit);
  QFETCH(QString, endReason);
  QTemporaryDir dir, output;
  LaunchOptions opt = probe(
      dir.path(), 3, behaviour + QStringList{"--sleep-ms", "60000", "--events-dir", output.path()});
  opt.output_dir = output.path().toStdString();
  opt.stop_timeout_s = 1;
  std::atomic<bool> stop{false};
  std::atomic<bool> ready{false};
  std::thread stopper([&] {
    ready = wait_for_ranks(dir.path(), 3);
    stop = true;  // what the caller's SIGINT handler does
  });
  const Timed t = timed_launch(opt, &stop);
  stopper.join();
  QVERIFY(ready);
  QVERIFY(t.result.stopped);
  QCOMPARE(t.result.exit_code, studio::launch::kExitStopped);
  QCOMPARE(t.result.failed_rank, -1);
  QVERIFY2(t.seconds < 10, qPrintable(QString("took %1 s").arg(t.seconds)));
  for (int code : t.result.exit_codes) QCOMPARE(code, workerExit);

  const auto events = launch_test::read_events(opt.output_dir);
  const auto ends = launch_test::end_events(events);
  QCOMPARE(int(ends.size()), 1);
  QCOMPARE(QString::fromStdString(ends[0]->get<studio::EndEvent>()->state), QString("stopped"));
  QCOMPARE(QString::fromStdString(ends[0]->get<studio::EndEvent>()->reason), endReason);
  studio::RunStatus status;
  std::string error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(opt.output_dir), status, error),
           error.c_str());
  QCOMPARE(int(status.state), int(studio::RunState::Stopped));
  QCOMPARE(QString::fromStdString(status.reason), endReason);
}

void TestLauncher::rankZeroEndIsNotDuplicated_data() {
  QTest::addColumn<bool>("statusWritten");  // rank 0 got to write status.json too
  QTest::newRow("end written, status still running") << false;
  QTest::newRow("end and status written") << true;
}

void TestLauncher::rankZeroEndIsNotDuplicated() {
  QFETCH(bool, statusWritten);
  QTemporaryDir dir, output;
  const std::string out = output.path().toStdString();
  studio::RunStatus before;
  before.state = statusWritten ? studio::RunState::Failed : studio::RunState::Running;
  before.reason = statusWritten ? "NCCL watchdog: rank 1 did not answer" : "";
  before.step = 7;
  QVERIFY(before.write(studio::status_path(out)).empty());
  // Rank 0 saw the problem first, wrote its end (failed) and exited 1; rank 1 then fails too.
  LaunchOptions opt = probe(dir.path(), 2,
                            {"--events-dir", output.path(), "--write-end", "failed", "--fail-rank",
                             "0", "--code", "1", "--sleep-ms", "60000"});
  opt.output_dir = out;
  const Timed t = timed_launch(opt);
  QCOMPARE(t.result.failed_rank, 0);
  QVERIFY2(t.result.record_error.empty(), t.result.record_error.c_str());

  const auto events = launch_test::read_events(out);
  const auto ends = launch_test::end_events(events);
  QCOMPARE(int(ends.size()), 1);
  const QString rank0_reason = "rank 0 wrote its own end: failed";
  QCOMPARE(QString::fromStdString(ends[0]->get<studio::EndEvent>()->reason), rank0_reason);
  studio::RunStatus status;
  std::string error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(out), status, error), error.c_str());
  QCOMPARE(int(status.state), int(studio::RunState::Failed));
  // A status rank 0 finished is its account; one still `running` is completed from its end.
  QCOMPARE(QString::fromStdString(status.reason),
           statusWritten ? QString::fromStdString(before.reason) : rank0_reason);
  QCOMPARE(status.step.value_or(-1), std::int64_t{7});
}

void TestLauncher::outputOfOtherRanksIsTagged() {
  QTemporaryDir dir;
  const QString out_path = dir.filePath("stdout.txt"), err_path = dir.filePath("stderr.txt");
  const int out_fd =
      ::open(out_path.toLocal8Bit().constData(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int err_fd =
      ::open(err_path.toLocal8Bit().constData(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  QVERIFY(out_fd >= 0 && err_fd >= 0);
  QTemporaryDir ranks;
  LaunchOptions opt = probe(ranks.path(), 3, {"--print"});
  opt.stdout_fd = out_fd;
  opt.stderr_fd = err_fd;
  const Timed t = timed_launch(opt);
  ::close(out_fd);
  ::close(err_fd);
  QCOMPARE(t.result.exit_code, 0);

  const QStringList out = lines_of(out_path);
  const QStringList expected_out = {"out 0 a",
                                    "out 0 b",
                                    "[rank 1] out 1 a",
                                    "[rank 1] out 1 b",
                                    "[rank 1] partial 1",
                                    "[rank 2] out 2 a",
                                    "[rank 2] out 2 b",
                                    "[rank 2] partial 2"};
  QCOMPARE(QSet<QString>(out.begin(), out.end()),
           QSet<QString>(expected_out.begin(), expected_out.end()));
  QCOMPARE(out.size(), expected_out.size());
  for (const QString r : {"1", "2"}) {  // each rank's lines in order, the partial one last
    const auto a = out.indexOf("[rank " + r + "] out " + r + " a");
    const auto b = out.indexOf("[rank " + r + "] out " + r + " b");
    const auto p = out.indexOf("[rank " + r + "] partial " + r);
    QVERIFY(a < b && b < p);
  }
  const QStringList err = lines_of(err_path);
  const QStringList expected_err = {"err 0", "[rank 1] err 1", "[rank 2] err 2"};
  QCOMPARE(QSet<QString>(err.begin(), err.end()),
           QSet<QString>(expected_err.begin(), expected_err.end()));
  QCOMPARE(err.size(), expected_err.size());
}

void TestLauncher::workersDieWithAKilledLauncher() {
  QTemporaryDir dir;
  const LaunchOptions opt = probe(dir.path(), 2, {"--sleep-ms", "60000"});
  const pid_t launcher = ::fork();
  QVERIFY(launcher >= 0);
  if (launcher == 0) {
    launch_workers(opt, nullptr);
    ::_exit(0);
  }
  const bool started = wait_for_ranks(dir.path(), 2);
  std::vector<pid_t> workers;
  for (int r = 0; r < 2; ++r)
    workers.push_back(read_json(dir.filePath(QString("rank-%1.json").arg(r))).value("pid", 0));
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  QVERIFY(started);
  bool all_gone = false;
  for (int i = 0; i < 500 && !all_gone; ++i) {
    all_gone = std::all_of(workers.begin(), workers.end(), process_gone);
    if (!all_gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t w : workers)
    if (w > 0 && !process_gone(w)) ::kill(w, SIGKILL);  // do not leave them to the next test
  QVERIFY2(all_gone, "workers outlived their SIGKILLed launcher by 5 s");
}

void TestLauncher::badOptionsAreRefused_data() {
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("nnodes");
  QTest::addColumn<int>("nodeRank");
  QTest::addColumn<int>("port");
  QTest::addColumn<QString>("program");
  QTest::addColumn<QString>("expected");
  const QString p = STUDIO_LAUNCH_PROBE;
  QTest::newRow("no workers") << 0 << 1 << 0 << 0 << p << "nproc must be at least 1";
  QTest::newRow("node rank past the nodes")
      << 2 << 2 << 2 << 29500 << p << "node_rank 2 is not in 0..1";
  QTest::newRow("several nodes need a port") << 2 << 2 << 0 << 0 << p << "master_port 0";
  QTest::newRow("port out of range") << 1 << 1 << 0 << 70000 << p << "master_port 70000";
  QTest::newRow("empty program") << 1 << 1 << 0 << 0 << ""
                                 << "worker_argv is empty";
  QTest::newRow("missing program") << 1 << 1 << 0 << 0 << "/nonexistent/studio-train"
                                   << "cannot execute '/nonexistent/studio-train'";
}

void TestLauncher::badOptionsAreRefused() {
  QFETCH(int, nproc);
  QFETCH(int, nnodes);
  QFETCH(int, nodeRank);
  QFETCH(int, port);
  QFETCH(QString, program);
  QFETCH(QString, expected);
  LaunchOptions opt;
  opt.nproc = nproc;
  opt.nnodes = nnodes;
  opt.node_rank = nodeRank;
  opt.master_port = port;
  if (!program.isEmpty()) opt.worker_argv = {program.toStdString()};
  const std::string message = message_of([&] { launch_workers(opt, nullptr); });
  QVERIFY2(message.find(expected.toStdString()) != std::string::npos, message.c_str());
}

void TestLauncher::freePortIsBindable() {
  const int port = studio::launch::choose_free_port();
  QVERIFY(port > 0 && port <= 65535);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::close(fd);
  QCOMPARE(rc, 0);
}

// A given port another process listens on: the launch fails before any worker starts, naming
// the port and what to do, and the failure is recorded in the output folder.
void TestLauncher::busyPortFailsBeforeAnyWorker() {
  const int other = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  QCOMPARE(::bind(other, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  QCOMPARE(::listen(other, 4), 0);
  QCOMPARE(::getsockname(other, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  QTemporaryDir dir, output;
  LaunchOptions opt = probe(dir.path(), 2);
  opt.master_port = port;
  opt.output_dir = output.path().toStdString();
  const Timed t = timed_launch(opt);
  ::close(other);
  QCOMPARE(t.result.exit_code, 1);
  const std::string expected = "cannot listen on port " + std::to_string(port) +
                               " for the run's rendezvous store: bind: Address already in use";
  QVERIFY2(t.result.reason.find(expected) == 0, t.result.reason.c_str());
  QVERIFY2(t.result.reason.find("pass another --master-port") != std::string::npos,
           t.result.reason.c_str());
  QCOMPARE(count_rank_files(dir.path()), 0);
  QCOMPARE(t.result.exit_codes, std::vector<int>({-1, -1}));
  QVERIFY2(t.result.record_error.empty(), t.result.record_error.c_str());
  studio::RunStatus status;
  std::string error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(opt.output_dir), status, error),
           error.c_str());
  QCOMPARE(int(status.state), int(studio::RunState::Failed));
  QCOMPARE(status.reason, t.result.reason);
}

// A port the caller already holds (node 0 of a multi-node run publishes it first): rank 0 gets
// that very socket, and launch_workers closes the caller's copy, so the port is free afterwards.
void TestLauncher::heldPortIsHandedToRankZero() {
  using studio::launch::HeldPort;
  std::string error;
  HeldPort held = HeldPort::listen_on(0, error);
  QVERIFY2(held.held(), error.c_str());
  const int port = held.port();
  QTemporaryDir dir;
  LaunchOptions opt = probe(dir.path(), 2);
  opt.master_port = port;
  opt.store_listen_fd = held.release();
  QVERIFY(!held.held());
  const Timed t = timed_launch(opt);
  QCOMPARE(t.result.exit_code, 0);
  const json rank0 = read_json(dir.filePath("rank-0.json"));
  QVERIFY2(rank0["fd3"].is_object(), rank0.dump().c_str());
  QCOMPARE(rank0["fd3"]["port"].get<int>(), port);
  QCOMPARE(rank0["fd3"]["listening"].get<bool>(), true);
  const json rank1 = read_json(dir.filePath("rank-1.json"));
  QCOMPARE(rank1["fd3"], json("none"));
  QVERIFY(rank1["master_port_connects"].get<bool>());
  const HeldPort again = HeldPort::listen_on(port, error);
  QVERIFY2(again.held(), error.c_str());
}

void TestLauncher::signalNames() {
  QCOMPARE(QString::fromStdString(studio::launch::signal_name(SIGKILL)), QString("SIGKILL"));
  QCOMPARE(QString::fromStdString(studio::launch::signal_name(SIGTERM)), QString("SIGTERM"));
  QCOMPARE(QString::fromStdString(studio::launch::signal_name(SIGRTMIN + 3)),
           QString("signal %1").arg(SIGRTMIN + 3));
}

QTEST_MAIN(TestLauncher)
#include "tst_launcher.moc"
