// Remote runs end to end: a real OpenSSH server on 127.0.0.1 (sshd_server.h) and the real CPU
// engine (studio-train) on the demo model. The "remote host" is this machine, so every remote
// file is also checked by reading it directly, independently of SSH.
//
// Covered: submit (upload with skip-unchanged, config rewritten) -> follow -> finish with every
// event delivered byte for byte; the connection cut mid-run (sshd and its sessions killed) and
// reattached with no event lost or repeated; cancel; a remote root whose path holds spaces,
// quotes, '$', backticks, ';' and a newline; clear errors before anything starts; and the
// headless `studio submit/attach/runs/cancel` with their exit codes, `studio attach` included
// through a cut connection.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpServer>
#include <QFileInfo>
#include <QtTest>

#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "sshd_server.h"
#include "studio/remote/remote_run.h"
#include "studio/remote/run_follow.h"
#include "studio/remote/run_submit.h"

using namespace studio::remote;

namespace {

QByteArray read_file(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

bool write_file(const QString& path, const QByteArray& data) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(data) == data.size();
}

// The steps of the "step" events (one per optimizer step with logging_steps 1), in order.
QList<qint64> train_steps(const QByteArray& events) {
  QList<qint64> steps;
  for (const QByteArray& line : events.split('\n')) {
    if (line.isEmpty()) continue;
    const auto j = nlohmann::json::parse(line.toStdString());
    if (j.value("event", "") == "step") steps.append(j.at("step").get<qint64>());
  }
  return steps;
}

// Entries under `root` (itself included) that other users could read, write or enter: any
// group or other permission bit. Symbolic links are not followed.
QStringList notPrivate(const QString& root) {
  QStringList open;
  QStringList todo{root};
  while (!todo.isEmpty()) {
    const QString path = todo.takeLast();
    struct stat st {};
    if (::lstat(QFile::encodeName(path).constData(), &st) != 0) continue;
    if ((st.st_mode & 077) != 0 && !S_ISLNK(st.st_mode))
      open << QStringLiteral("%1 (%2)").arg(path).arg(st.st_mode & 07777, 4, 8, QLatin1Char('0'));
    if (!S_ISDIR(st.st_mode)) continue;
    for (const QString& name : QDir(path).entryList(QDir::AllEntries | QDir::Hidden | QDir::System |
                                                    QDir::NoDotAndDotDot))
      todo << QDir(path).filePath(name);
  }
  return open;
}

// Every file under `root` that holds `secret`.
QStringList filesHolding(const QString& root, const QByteArray& secret) {
  QStringList found;
  QStringList todo{root};
  while (!todo.isEmpty()) {
    const QFileInfo info(todo.takeLast());
    if (info.isSymLink()) continue;
    if (info.isDir()) {
      for (const QString& name : QDir(info.filePath()).entryList(QDir::AllEntries | QDir::Hidden |
                                                                  QDir::NoDotAndDotDot))
        todo << QDir(info.filePath()).filePath(name);
    } else if (read_file(info.filePath()).contains(secret)) {
      found << info.filePath();
    }
  }
  return found;
}

// Every live process whose argv or environment holds `secret`.
QStringList processesHolding(const QByteArray& secret) {
  QStringList found;
  for (const QString& pid : QDir("/proc").entryList(QDir::Dirs)) {
    if (pid.toInt() <= 0) continue;
    for (const char* what : {"cmdline", "environ"})
      if (read_file("/proc/" + pid + "/" + what).contains(secret))
        found << "/proc/" + pid + "/" + what + ": " + read_file("/proc/" + pid + "/cmdline").replace('\0', ' ');
  }
  return found;
}

bool contiguous(const QList<qint64>& steps, qint64 first, qint64 last) {
  if (steps.size() != last - first + 1) return false;
  for (int i = 0; i < steps.size(); ++i) {
    if (steps[i] != first + i) return false;
  }
  return true;
}

// What follow_run delivered, collected from its thread.
struct Collected {
  std::mutex mutex;
  std::string events;
  std::atomic<int> lines{0};
  std::atomic<int> connected{0};
  std::atomic<int> disconnected{0};
  std::string last_error;
  FollowCallbacks callbacks() {
    FollowCallbacks c;
    c.on_events = [this](const std::string& bytes) {
      std::lock_guard<std::mutex> lock(mutex);
      events += bytes;
      lines += static_cast<int>(std::count(bytes.begin(), bytes.end(), '\n'));
    };
    c.on_connected = [this] { ++connected; };
    c.on_disconnected = [this](const std::string& error, int, std::chrono::milliseconds) {
      std::lock_guard<std::mutex> lock(mutex);
      last_error = error;
      ++disconnected;
    };
    return c;
  }
};

}  // namespace

class TestRemoteRun : public QObject {
  Q_OBJECT

 private:
  SshdFixture server_;
  QTemporaryDir local_;
  QString root_;  // the remote root: a path a careless shell line would break on
  RemoteHostRef host_;

  SshSession connect() const {
    SshOptions o = studio::remote::ssh_options(host_);
    o.connect_timeout_s = 5;
    o.operation_timeout_s = 20;
    return SshSession::connect(o, reject_unknown_host_keys());
  }

  // The demo SFT config with `steps` steps and one train event per step.
  QString writeConfig(const QString& name, int steps, const QByteArray& extra = {}) {
    QByteArray yaml = read_file(QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/sft_demo.yaml"));
    yaml.replace("model_name_or_path: build/demo/model",
                 "model_name_or_path: " + local_.filePath("model").toUtf8());
    yaml.replace("dataset_dir: resources/demo/data",
                 "dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data");
    yaml.replace("max_steps: 60", "max_steps: " + QByteArray::number(steps));
    yaml.replace("logging_steps: 5", "logging_steps: 1");
    yaml.replace("save_steps: 30", "save_steps: 100000");
    yaml.replace("eval_steps: 30", "eval_steps: 100000");
    yaml += extra;
    const QString path = local_.filePath(name);
    return write_file(path, yaml) ? path : QString();
  }

  // Follows a run to its end, polling every 200 ms.
  std::optional<RemoteRunStatus> followToEnd(const RemoteRunRecord& record, Collected& got,
                                             FollowCursor& cursor) {
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(200);
    std::atomic<bool> stop{false};
    return follow_run([this] { return connect(); }, record, cursor, got.callbacks(), options,
                      stop);
  }

  SubmitRequest request(const QString& config) const {
    SubmitRequest r;
    r.config_file = config.toStdString();
    r.host = host_;
    r.remote_root = root_.toStdString();
    r.engine = STUDIO_TRAIN_EXE;
    r.upload_model = true;
    return r;
  }

  QString remoteFile(const RemoteRunRecord& record, const QString& rel) const {
    return QString::fromStdString(record.run_dir()) + "/" + rel;
  }

  QStringList cliConnection() const { return server_.cli_connection(root_); }

  int runStudio(const QStringList& args, QByteArray* out, QByteArray* err, int timeoutMs) {
    QProcess p;
    p.start(QStringLiteral(STUDIO_EXE), args);
    if (!p.waitForFinished(timeoutMs)) {
      p.kill();
      p.waitForFinished();
      return -1;
    }
    if (out) *out = p.readAllStandardOutput();
    if (err) *err = p.readAllStandardError();
    return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  }

 private slots:
  void initTestCase() {
    QVERIFY(local_.isValid());
    const QString error = server_.set_up(local_.path());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    host_ = server_.host_ref();
    root_ = local_.filePath("remote root 'q' $HOME `echo x`; y\nz");

    QProcess init;
    init.start(QStringLiteral(STUDIO_TRAIN_EXE),
               {"init-model", "--config", STUDIO_SOURCE_DIR "/resources/demo/model/config.json",
                "--out", local_.filePath("model"), "--seed", "7"});
    QVERIFY(init.waitForFinished(120000));
    QVERIFY2(init.exitCode() == 0, init.readAllStandardError().constData());
  }

  void submitFollowFinish() {
    const QString config = writeConfig("short.yaml", 12);
    QVERIFY(!config.isEmpty());
    const SshSession session = connect();
    int progressCalls = 0;
    const SubmitResult result =
        submit_run(session, request(config), [&](const SubmitProgress&) { ++progressCalls; });
    QVERIFY(progressCalls > 0);
    QCOMPARE(result.files_skipped, 0);
    QVERIFY(result.files_uploaded >= 6);  // dataset_info, the dataset, 4 model files
    QVERIFY(is_valid_run_id(result.record.run_id));
    // The run folder is where the record says, under the awkward root, with the rewritten config.
    const QString yaml = read_file(remoteFile(result.record, "config.yaml"));
    QVERIFY(yaml.contains("output_dir: output"));
    QVERIFY(yaml.contains("dataset_dir: ../.inputs/data-"));
    QVERIFY(yaml.contains("model_name_or_path: ../.inputs/model-"));
    QCOMPARE(read_remote_record(session, root_.toStdString(), result.record.run_id).to_json(),
             result.record.to_json());

    Collected got;
    FollowCursor cursor;
    const auto end = followToEnd(result.record, got, cursor);
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    const QByteArray onDisk = read_file(remoteFile(result.record, "output/events.jsonl"));
    QCOMPARE(QByteArray::fromStdString(got.events), onDisk);
    QCOMPARE(cursor.events, static_cast<std::uint64_t>(onDisk.size()));
    QVERIFY(contiguous(train_steps(onDisk), 1, 12));
    QVERIFY(onDisk.trimmed().endsWith("\"state\":\"finished\"}"));

    // Listed, with its state; and submitting again sends nothing that did not change.
    const auto runs = list_remote_runs(session, root_.toStdString());
    QVERIFY(std::any_of(runs.begin(), runs.end(),
                        [&](const RemoteRunRecord& r) { return r.run_id == result.record.run_id; }));
    const SubmitResult again = submit_run(session, request(config));
    QCOMPARE(again.files_uploaded, 0);
    QCOMPARE(again.files_skipped, result.files_uploaded);
    QVERIFY(again.record.run_id != result.record.run_id);
    cancel_run(session, again.record, 5);
  }

  // A LLaMA-Factory v1 file whose train_dataset is a dataset YAML with paths relative to the
  // config's folder: the data files go to .inputs, the YAML is rewritten into the run folder to
  // name them there, and the run on the host reads them and finishes.
  void llamaFactoryV1DatasetYamlUploaded() {
    const QDir project(local_.filePath("v1-project"));
    QVERIFY(project.mkpath("data"));
    const QString fixtures = QStringLiteral(STUDIO_SOURCE_DIR "/tests/fixtures/configs/v1/data/");
    for (const char* f : {"sft.yaml", "identity.json", "chat.jsonl", "messages.jsonl"})
      QVERIFY(QFile::copy(fixtures + f, project.filePath("data/") + f));
    const QString config = project.filePath("train_v1.yaml");
    QVERIFY(write_file(config, "model: " + local_.filePath("model").toUtf8() +
                                   "\ntemplate: qwen\ntrain_dataset: data/sft.yaml\n"
                                   "output_dir: outputs/v1\nmicro_batch_size: 2\n"
                                   "cutoff_len: 128\nmax_steps: 3\nlogging_steps: 1\n"));
    const SshSession session = connect();
    SubmitRequest r = request(config);
    r.base_dir = project.path().toStdString();
    const SubmitResult result = submit_run(session, r);
    const QString yaml = read_file(remoteFile(result.record, "config.yaml"));
    QVERIFY2(yaml.contains("train_dataset: train_dataset.yaml"), qPrintable(yaml));
    const QString dataset = read_file(remoteFile(result.record, "train_dataset.yaml"));
    QVERIFY2(dataset.contains("path: ../.inputs/chat.jsonl-") && dataset.contains("converter: sharegpt"),
             qPrintable(dataset));

    Collected got;
    FollowCursor cursor;
    const auto end = followToEnd(result.record, got, cursor);
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    QVERIFY(contiguous(train_steps(read_file(remoteFile(result.record, "output/events.jsonl"))), 1, 3));
  }

  // LLaMA-Factory as the trainer on the host (its environment from scripts/setup.sh): the YAML
  // uploaded has none of the studio's own keys, `studio-train supervise` runs llamafactory-cli
  // with FORCE_TORCHRUN on 2 processes, and following delivers its trainer_log.jsonl byte for
  // byte to the finished status. A config with a key LLaMA-Factory cannot run is refused first.
  void llamaFactoryOnTheHost() {
    const QString config = writeConfig("lf.yaml", 6);
    QVERIFY(!config.isEmpty());
    const SshSession session = connect();
    SubmitRequest r = request(config);
    r.llamafactory_cli = STUDIO_LLAMAFACTORY_CLI;
    r.nproc = 2;
    // A plain root: Hugging Face datasets (inside LLaMA-Factory) expands $VARIABLES in data
    // paths, so the awkward root of the other tests (which holds "$HOME") would not be found.
    r.remote_root = local_.filePath("lf root").toStdString();
    const SubmitResult result = submit_run(session, r);
    QCOMPARE(result.record.llamafactory_cli, std::string(STUDIO_LLAMAFACTORY_CLI));
    const QByteArray yaml = read_file(remoteFile(result.record, "config.yaml"));
    QVERIFY(yaml.contains("output_dir: output"));
    QVERIFY2(!yaml.contains("sequence_parallel"), yaml.constData());

    Collected got;
    FollowCursor cursor;
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(200);
    std::atomic<bool> stop{false};
    const auto end = follow_run([this] { return connect(); }, result.record, cursor,
                                got.callbacks(), options, stop);
    QVERIFY(end.has_value());
    const QByteArray log = read_file(remoteFile(result.record, "train.log"));
    QVERIFY2(to_string(end->state) == std::string("finished"),
             log.mid(std::max<qsizetype>(0, log.indexOf("Error: ") - 300), 2000).constData());
    const QByteArray onDisk = read_file(remoteFile(result.record, "output/trainer_log.jsonl"));
    QCOMPARE(QByteArray::fromStdString(got.events), onDisk);
    QList<qint64> steps;
    for (const QByteArray& line : onDisk.split('\n'))
      if (!line.isEmpty() && line.contains("\"loss\""))
        steps << nlohmann::json::parse(line.toStdString()).at("current_steps").get<qint64>();
    QVERIFY(contiguous(steps, 1, 6));
    attachToAFolderNotStartedHere(session, result.record);
    if (QTest::currentTestFailed()) return;

    const QString bad = writeConfig("lf-sp.yaml", 6, "sequence_parallel_size: 2\n");
    SubmitRequest refused = request(bad);
    refused.llamafactory_cli = STUDIO_LLAMAFACTORY_CLI;
    refused.nproc = 2;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, submit_run(session, refused));
  }

 private:
  // The finished LLaMA-Factory output folder, copied to where a user's own run would leave it
  // (no studio record around it), attached to by its path: its state from its files (finished by
  // train_results.json, running while written recently, lost after a silence), its
  // trainer_log.jsonl followed byte for byte, never cancelled; what is not a run folder refused.
  void attachToAFolderNotStartedHere(const SshSession& session, const RemoteRunRecord& submitted) {
    const QString output = remoteFile(submitted, "output");
    const QString folder = local_.filePath("users own/lf out");
    QVERIFY(QDir().mkpath(folder));
    for (const QString& name : QDir(output).entryList(QDir::Files))
      if (name != "status.json")  // written by the studio's supervisor: not in a user's folder
        QVERIFY(QFile::copy(output + "/" + name, folder + "/" + name));
    QVERIFY(QFileInfo::exists(folder + "/train_results.json"));
    // The run's own output folder belongs to a submitted run: attach by its id instead.
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             attach_folder(session, host_, output.toStdString()));

    const RemoteRunRecord record = attach_folder(session, host_, folder.toStdString());
    QCOMPARE(record.kind, RemoteRunKind::Folder);
    QCOMPARE(QString::fromStdString(record.folder), folder);
    QCOMPARE(record.folder_events, std::string("trainer_log.jsonl"));
    QCOMPARE(record.run_id, folder_run_id(host_, folder.toStdString()));
    QVERIFY2(is_valid_run_id(record.run_id) && record.run_id.rfind("lf-out-", 0) == 0,
             record.run_id.c_str());
    QCOMPARE(RemoteRunRecord::from_json(record.to_json(), "test").to_json(), record.to_json());
    QCOMPARE(QString::fromStdString(record.events_path()), folder + "/trainer_log.jsonl");

    RemoteRunStatus status = query_status(session, record);
    QCOMPARE(to_string(status.state), "finished");
    QVERIFY2(QString::fromStdString(status.reason).contains("train_results.json"), status.reason.c_str());
    Collected got;
    FollowCursor cursor;
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(200);
    std::atomic<bool> stop{false};
    const auto end = follow_run([this] { return connect(); }, record, cursor, got.callbacks(),
                                options, stop);
    QVERIFY(end.has_value());
    QCOMPARE(QByteArray::fromStdString(got.events), read_file(folder + "/trainer_log.jsonl"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cancel_run(session, record));
    // Headless, the same: `studio attach --folder` prints its lines and exits 0 (finished).
    QByteArray out, err;
    QCOMPARE(runStudio(QStringList{"attach"} << cliConnection() << "--folder" << folder, &out, &err, 60000), 0);
    QCOMPARE(out, read_file(folder + "/trainer_log.jsonl"));
    QVERIFY2(err.contains("finished: training completed"), err.constData());

    // Without the results: running while written recently, lost after a long silence.
    QVERIFY(QFile::remove(folder + "/train_results.json"));
    QFile::remove(folder + "/all_results.json");
    status = query_status(session, record);
    QCOMPARE(to_string(status.state), "running");
    QVERIFY2(QString::fromStdString(status.reason).contains("last written"), status.reason.c_str());
    for (const QString& name : QDir(folder).entryList(QDir::Files)) {
      QFile f(folder + "/" + name);
      QVERIFY(f.open(QIODevice::ReadWrite));
      QVERIFY(f.setFileTime(QDateTime::currentDateTime().addSecs(-3600),
                            QFileDevice::FileModificationTime));
    }
    status = query_status(session, record);
    QCOMPARE(to_string(status.state), "lost");
    QVERIFY2(QString::fromStdString(status.reason).contains("for 60 min, and LLaMA-Factory recorded no end"),
             status.reason.c_str());

    // Not a run folder; not a folder at all.
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             attach_folder(session, host_, local_.filePath("users own").toStdString()));
    try {
      attach_folder(session, host_, local_.filePath("no such").toStdString());
      QFAIL("a missing folder was attached to");
    } catch (const RemoteError& e) {
      QVERIFY2(QString(e.what()).contains("no folder"), e.what());
    }
  }

 private slots:
  void cutConnectionThenReattach() {
    const QString config = writeConfig("long.yaml", 90);
    const SubmitResult result = submit_run(connect(), request(config));
    Collected got;
    FollowCursor cursor;
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(200);
    options.backoff_initial = std::chrono::milliseconds(300);
    options.backoff_max = std::chrono::milliseconds(1000);
    std::atomic<bool> stop{false};
    std::optional<RemoteRunStatus> end;
    std::string thrown;
    std::thread follower([&] {
      try {
        end = follow_run([this] { return connect(); }, result.record, cursor, got.callbacks(),
                         options, stop);
      } catch (const std::exception& e) {
        thrown = e.what();
      }
    });
    auto finish = qScopeGuard([&] {
      stop = true;
      follower.join();
    });
    QTRY_VERIFY_WITH_TIMEOUT(got.lines.load() >= 5, 120000);
    const int before = got.lines.load();
    server_.stop();  // every session is cut; the engine, detached, trains on
    QTRY_VERIFY_WITH_TIMEOUT(got.disconnected.load() >= 2, 20000);
    QThread::msleep(1500);
    const QString error = server_.restart();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(got.connected.load() >= 2, 20000);
    finish.dismiss();
    follower.join();
    QVERIFY2(thrown.empty(), thrown.c_str());
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    // The run went on while nobody watched, and reading on from the cursor lost nothing.
    const QByteArray onDisk = read_file(remoteFile(result.record, "output/events.jsonl"));
    QCOMPARE(QByteArray::fromStdString(got.events), onDisk);
    QVERIFY(got.lines.load() > before);
    QVERIFY(contiguous(train_steps(onDisk), 1, 90));
    QVERIFY(!got.last_error.empty());
  }

  // Cancelled with the grace its record carries: save_on_stop's checkpoint is written before the
  // run ends, within the time the record gives it (15 s + ddp_timeout).
  void cancelStopsTheRun() {
    const QString config = writeConfig("cancel.yaml", 100000, "save_on_stop: true\nddp_timeout: 600\n");
    const SshSession session = connect();
    const SubmitResult result = submit_run(session, request(config));
    QCOMPARE(result.record.stop_grace_s, 15 + 600);
    // A failed check returns at once: the endless run must not outlive the test.
    auto stopRun = qScopeGuard([&] { cancel_run(connect(), result.record, 5); });
    QTRY_VERIFY_WITH_TIMEOUT(query_status(session, result.record).state == RemoteRunState::Running,
                             120000);
    QTRY_VERIFY_WITH_TIMEOUT(read_file(remoteFile(result.record, "output/events.jsonl"))
                                 .contains("{\"event\":\"step\""),
                             60000);
    const auto lines = cancel_run(session, result.record);
    QCOMPARE(lines.size(), std::size_t(1));
    QVERIFY2(QString::fromStdString(lines[0]).startsWith("node 0: stopped "), lines[0].c_str());
    const RemoteRunStatus status = query_status(session, result.record);
    QCOMPARE(to_string(status.state), "stopped");
    const QString reason = QString::fromStdString(status.reason);
    const QRegularExpression said(
        "^stopped at step (\\d+); saved to resume from: resume_from_checkpoint: (.*/checkpoint-\\1)$");
    const auto m = said.match(reason);
    QVERIFY2(m.hasMatch(), qPrintable(reason));
    // output_dir is relative to the run folder there (the rewritten config's "output")
    QVERIFY2(QFile::exists(remoteFile(result.record, m.captured(2) + "/trainer_state.json")),
             qPrintable(reason));
  }

  void multiNodeWithoutSlurm() {
    // Two "nodes" that are the same host: each launcher gets its own pid file and log, as nodes
    // sharing an NFS home need, and they meet at rank 0's address and port.
    const QString config = writeConfig("nodes.yaml", 6);
    SubmitRequest r = request(config);
    r.extra_nodes = {host_.target};
    r.master_addr = "127.0.0.1";
    QTcpServer probe;  // a free port for the rendezvous
    QVERIFY(probe.listen(QHostAddress::LocalHost));
    r.master_port = probe.serverPort();
    probe.close();
    const SshSession session = connect();
    const NodeConnector nodes = [](const RemoteHostRef& node) {
      return SshSession::connect(studio::remote::ssh_options(node), reject_unknown_host_keys());
    };
    const SubmitResult result = submit_run(session, r, {}, nodes);
    QCOMPARE(result.record.nnodes, 2);
    Collected got;
    FollowCursor cursor;
    std::atomic<bool> stop{false};
    const auto end = follow_run([this] { return connect(); }, result.record, cursor,
                                got.callbacks(), FollowOptions{}, stop);
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    QVERIFY(got.events.find("\"world_size\":2") != std::string::npos);
    QVERIFY(read_file(remoteFile(result.record, "train.1.log")).contains("node 1 of 2"));
    const auto lines = cancel_run(session, result.record, 5, nodes);
    QCOMPARE(lines.size(), std::size_t(2));
    QVERIFY2(QString::fromStdString(lines[0]).startsWith("node 1: not-running"), lines[0].c_str());
    QVERIFY2(QString::fromStdString(lines[1]).startsWith("node 0: not-running"), lines[1].c_str());
  }

  void errorsBeforeAnythingStarts_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing engine") << "engine" << "is not an executable file there";
    QTest::newRow("bad config value") << "config" << "bad.yaml:";
    QTest::newRow("relative model folder") << "model" << "is relative";
    QTest::newRow("missing dataset file") << "dataset" << "does not exist";
    QTest::newRow("dataset file linked out") << "dataset link" << "outside dataset_dir";
    QTest::newRow("dataset folder with a link out") << "dataset folder link" << "outside dataset_dir";
  }
  void errorsBeforeAnythingStarts() {
    QFETCH(QString, key);
    QFETCH(QString, expected);
    QString config = writeConfig("bad.yaml", 5);
    SubmitRequest r = request(config);
    QByteArray yaml = read_file(config);
    if (key == "engine") r.engine = "/nonexistent/studio-train";
    if (key == "config") yaml.replace("learning_rate: 3.0e-3", "learning_rate: fast");
    if (key == "model") {
      QVERIFY(QDir::setCurrent(local_.path()));
      yaml.replace(local_.filePath("model").toUtf8(), "model");
      r.upload_model = false;
    }
    if (key.startsWith("dataset")) {
      // A file_name inside the folder that leads out of it (a key, say) must not be uploaded.
      const QString data = local_.filePath(key.replace(' ', '-'));
      QVERIFY(QDir().mkpath(data + "/rows"));
      QVERIFY(write_file(local_.filePath("id_secret"), "PRIVATE KEY"));
      const char* file = key == "dataset" ? "gone.json" : key == "dataset-link" ? "x.json" : "rows";
      if (key == "dataset-link") QVERIFY(QFile::link(local_.filePath("id_secret"), data + "/x.json"));
      if (key == "dataset-folder-link") {
        QVERIFY(write_file(data + "/rows/a.json", "[]"));
        QVERIFY(QFile::link(local_.filePath("id_secret"), data + "/rows/b.json"));
      }
      QVERIFY(write_file(data + "/dataset_info.json",
                         QByteArray(R"({"demo_sft": {"file_name": ")") + file + "\"}}"));
      yaml.replace("dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data",
                   "dataset_dir: " + data.toUtf8());
    }
    QVERIFY(write_file(config, yaml));
    const QStringList before = QDir(root_).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    QString message;
    try {
      submit_run(connect(), r);
    } catch (const std::exception& e) {
      message = QString::fromUtf8(e.what());
    }
    QVERIFY2(message.contains(expected), qPrintable(message));
    QCOMPARE(QDir(root_).entryList(QDir::Dirs | QDir::NoDotAndDotDot), before);  // no run folder
  }

  void headlessCommands() {
    const QString config = writeConfig("cli.yaml", 8);
    QByteArray out, err;
    QStringList submit{"submit"};
    submit << cliConnection() << "--engine" << STUDIO_TRAIN_EXE << "--upload-model" << config;
    QCOMPARE(runStudio(submit, &out, &err, 120000), 0);
    const QString runId = QString::fromUtf8(out).trimmed().split('\n').last();
    QVERIFY2(is_valid_run_id(runId.toStdString()), out.constData());
    QVERIFY2(err.contains("unchanged"), err.constData());  // the model was uploaded before

    QCOMPARE(runStudio(QStringList{"attach"} << cliConnection() << runId, &out, &err, 240000), 0);
    RemoteRunRecord record;
    record.remote_root = root_.toStdString();
    record.run_id = runId.toStdString();
    QCOMPARE(out, read_file(remoteFile(record, "output/events.jsonl")));
    QVERIFY(contiguous(train_steps(out), 1, 8));
    QVERIFY2(!err.contains("not as the format says"), err.constData());

    QCOMPARE(runStudio(QStringList{"runs"} << cliConnection() << "--json", &out, &err, 60000), 0);
    bool listed = false;
    for (const QByteArray& line : out.split('\n')) {
      if (line.isEmpty()) continue;
      const auto j = nlohmann::json::parse(line.toStdString());
      if (j.at("run_id") == runId.toStdString()) {
        listed = true;
        QCOMPARE(QString::fromStdString(j.at("state").get<std::string>()), QString("finished"));
        QCOMPARE(j.at("step").get<int>(), 8);
      }
    }
    QVERIFY2(listed, out.constData());
    QCOMPARE(runStudio(QStringList{"cancel"} << cliConnection() << runId, &out, &err, 60000), 0);
    QVERIFY2(out.startsWith("node 0: not-running "), out.constData());

    // Lines another writer added with odd fields: printed as written, and what a reader must
    // repair or skip in them said on stderr (first case with its line, then the counts).
    const QString events = remoteFile(record, "output/events.jsonl");
    const int lines = read_file(events).count('\n');
    QFile more(events);
    QVERIFY(more.open(QIODevice::Append));
    more.write("{\"event\":\"step\",\"step\":9,\"gpus\":[{\"rank\":0,\"device\":\"cuda:0\"}]}\n"
               "not json\n");
    more.close();
    QCOMPARE(runStudio(QStringList{"attach"} << cliConnection() << runId, &out, &err, 60000), 0);
    QCOMPARE(out, read_file(events));
    const QString said = QString::fromUtf8(err);
    QVERIFY2(said.contains(QStringLiteral("studio attach: in all, events.jsonl: 1 line had fields not "
                                          "as the format says, kept without them or converted (1 "
                                          "field converted, 0 dropped; first: line %1: field "
                                          "'gpus[0].device': expected an integer device index, got "
                                          "string \"cuda:0\": read as 0); 1 line skipped whole "
                                          "(first: line %2: invalid JSON at column 1: found 'no', "
                                          "which is not a JSON value")
                                .arg(lines + 1)
                                .arg(lines + 2)),
             err.constData());

    // A failed run exits 1 with the engine's reason; a cancelled one 3.
    QStringList failing = submit;
    failing.insert(failing.size() - 1, "--set");
    failing.insert(failing.size() - 1, "dataset=no_such_dataset");
    QCOMPARE(runStudio(failing, &out, &err, 120000), 2);  // refused before the start: bad input
    QVERIFY2(err.contains("no_such_dataset"), err.constData());

    // Bad input and unknown hosts: exit 2 and 5 with the reason.
    QCOMPARE(runStudio(QStringList{"attach"} << cliConnection() << "no-such-run", &out, &err, 60000), 2);
    QVERIFY2(err.contains("no run no-such-run"), err.constData());
    QStringList unknownKey = cliConnection();
    unknownKey[unknownKey.indexOf("--known-hosts") + 1] = local_.filePath("empty_known_hosts");
    QCOMPARE(runStudio(QStringList{"runs"} << unknownKey, &out, &err, 60000), 5);
    QVERIFY2(err.contains("SHA256:"), err.constData());
    QCOMPARE(runStudio({"attach", "--host", "-oProxyCommand=x", "r"}, &out, &err, 60000), 2);

    // A sweep is a Slurm job array: without --slurm it is refused before connecting, as are
    // --list and --parallel without --sweep (tst_slurm_live submits one).
    QStringList sweep = submit;
    sweep.insert(sweep.size() - 1, "--sweep");
    sweep.insert(sweep.size() - 1, "learning_rate=1e-3,3e-3");
    QCOMPARE(runStudio(sweep, &out, &err, 60000), 2);
    QVERIFY2(err.contains("--sweep is submitted as a Slurm job array: add --slurm"), err.constData());
    QStringList listOnly = submit;
    listOnly.insert(listOnly.size() - 1, "--list");
    QCOMPARE(runStudio(listOnly, &out, &err, 60000), 2);
    QVERIFY2(err.contains("--list and --parallel are for a sweep"), err.constData());

    // `cancel --sweep` takes a sweep id (or a point's run id) alone; a plain run is no sweep
    // (tst_slurm_live cancels a real one).
    QCOMPARE(runStudio(QStringList{"cancel"} << cliConnection() << "--sweep" << "s" << runId, &out,
                       &err, 60000), 2);
    QVERIFY2(err.contains("cancel --sweep takes one SWEEP_ID and no RUN_ID"), err.constData());
    QCOMPARE(runStudio(QStringList{"cancel"} << cliConnection() << "--sweep" << runId, &out, &err,
                       60000), 2);
    QVERIFY2(err.contains(("run " + runId + " is not a point of a sweep").toUtf8()),
             err.constData());
    QCOMPARE(runStudio(QStringList{"cancel"} << cliConnection() << "--sweep" << "no-such-sweep",
                       &out, &err, 60000), 2);
    QVERIFY2(err.contains("no sweep or run no-such-sweep under"), err.constData());
    // Under --slurm, --gpus-per-node is the workers per node (0: a CPU-only node): a negative
    // count, or one that --nproc contradicts, is refused before connecting.
    for (const auto& [extra, said] :
         {std::pair{QStringList{"--gpus-per-node", "-1"}, QByteArray("--gpus-per-node: ")},
          std::pair{QStringList{"--nproc", "2", "--gpus-per-node", "4"},
                    QByteArray("--nproc 2 and --gpus-per-node 4 disagree")}}) {
      QStringList slurm = submit;
      for (const QString& arg : QStringList{"--slurm"} + extra) slurm.insert(slurm.size() - 1, arg);
      QCOMPARE(runStudio(slurm, &out, &err, 60000), 2);
      QVERIFY2(err.contains(said), err.constData());
    }
  }

  void headlessAttachSurvivesCut() {
    // `studio attach` on a run while sshd and every session die and come back: it retries, and
    // its stdout ends up holding every event exactly once.
    const QString config = writeConfig("cli-cut.yaml", 60);
    const SubmitResult result = submit_run(connect(), request(config));
    QProcess attach;
    attach.start(QStringLiteral(STUDIO_EXE), QStringList{"attach"} << cliConnection() << "--poll-ms"
                                                 << "200"
                                                 << QString::fromStdString(result.record.run_id));
    QByteArray out;
    QTRY_VERIFY_WITH_TIMEOUT((out += attach.readAllStandardOutput()).count('\n') >= 5, 120000);
    server_.stop();
    QByteArray err;
    QTRY_VERIFY_WITH_TIMEOUT((err += attach.readAllStandardError()).contains("connection lost"),
                             20000);
    QThread::msleep(1500);
    const QString error = server_.restart();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(attach.waitForFinished(240000));
    out += attach.readAllStandardOutput();
    err += attach.readAllStandardError();
    QCOMPARE(attach.exitCode(), 0);
    QVERIFY2(err.contains("reconnected"), err.constData());
    QCOMPARE(out, read_file(remoteFile(result.record, "output/events.jsonl")));
    QVERIFY(contiguous(train_steps(out), 1, 60));
  }

  // What the run leaves on the host is the user's alone (folders 0700, files 0600: the upload,
  // the run record, the engine's events, status, checkpoints and log), and a key passphrase
  // reaches no file there and no process's argv or environment, on the host or here.
  void privateOnTheHost() {
    const QByteArray passphrase = "s3cret-Passphrase-" + QByteArray::number(::getpid());
    const QString key = server_.make_key("user_encrypted", "ed25519", passphrase);
    QVERIFY(server_.authorize(key));
    RemoteHostRef host = host_;
    host.identity_file = key.toStdString();
    SshOptions o = studio::remote::ssh_options(host);
    o.connect_timeout_s = 5;
    o.operation_timeout_s = 20;
    int asked = 0;
    const SecretPrompt prompt = [&](const SecretRequest& r) -> std::optional<std::string> {
      ++asked;
      if (r.kind != SecretRequest::Kind::KeyPassphrase) return std::nullopt;
      return passphrase.toStdString();
    };
    auto connectEncrypted = [&] { return SshSession::connect(o, reject_unknown_host_keys(), prompt); };
    QString config = writeConfig("private.yaml", 30);
    QByteArray yaml = read_file(config);
    yaml.replace("save_steps: 100000", "save_steps: 10");
    QVERIFY(write_file(config, yaml));
    SubmitRequest r = request(config);
    r.host = host;
    const SubmitResult result = submit_run(connectEncrypted(), r);
    QVERIFY(asked >= 1);
    // While the engine runs (its first steps are out, its end is not): no process holds the
    // passphrase.
    const QString events = remoteFile(result.record, "output/events.jsonl");
    QTRY_VERIFY_WITH_TIMEOUT(read_file(events).contains("\"event\":\"step\""), 60000);
    QStringList holders = processesHolding(passphrase);
    QVERIFY(!read_file(events).contains("\"event\":\"end\""));
    QVERIFY2(holders.isEmpty(), qPrintable(holders.join('\n')));
    Collected got;
    FollowCursor cursor;
    FollowOptions options;
    options.poll_interval = std::chrono::milliseconds(200);
    std::atomic<bool> stop{false};
    const auto end = follow_run(connectEncrypted, result.record, cursor, got.callbacks(), options, stop);
    QVERIFY(end.has_value());
    QCOMPARE(to_string(end->state), "finished");
    QVERIFY(QDir(remoteFile(result.record, "output/checkpoint-20")).exists());

    const QStringList open = notPrivate(root_);
    QVERIFY2(open.isEmpty(), qPrintable(open.join('\n')));
    holders = filesHolding(root_, passphrase);
    QVERIFY2(holders.isEmpty(), qPrintable(holders.join('\n')));
  }

  void cleanupTestCase() { server_.stop(); }
};

QTEST_MAIN(TestRemoteRun)
#include "tst_remote_run.moc"
