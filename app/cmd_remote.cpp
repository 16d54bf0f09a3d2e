// studio submit | attach | cancel | runs: remote runs from scripts, without a display.
#include "cmd_remote.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "studio/runs/events.h"
#include "studio/base/whole_number.h"
#include "studio/remote/remote_run.h"
#include "studio/remote/run_follow.h"
#include "studio/remote/run_submit.h"
#include "terminal_prompts.h"

namespace studio::cli {
namespace {

namespace remote = studio::remote;

// Exit codes, documented in the usage text.
constexpr int kExitFinished = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitStopped = 3;
constexpr int kExitLost = 4;
constexpr int kExitConnection = 5;
constexpr int kExitInterrupted = 130;

constexpr const char* kUsage =
    "usage: studio submit --host HOST [OPTIONS] CONFIG.yaml\n"
    "       studio attach --host HOST [OPTIONS] RUN_ID\n"
    "       studio attach --host HOST [OPTIONS] --folder DIR\n"
    "       studio cancel --host HOST [OPTIONS] RUN_ID\n"
    "       studio cancel --host HOST [OPTIONS] --sweep SWEEP_ID\n"
    "       studio runs   --host HOST [OPTIONS]\n"
    "\n"
    "Remote runs over SSH, for scripts. HOST is [ssh://][user@]host[:port] or a ~/.ssh/config\n"
    "alias. A run lives in REMOTE_ROOT/RUN_ID on the host and is started detached (its own\n"
    "session and process group) or as a Slurm job, so a dropped connection never stops it.\n"
    "\n"
    "  submit  uploads the config's dataset files (unchanged files are skipped), rewrites its\n"
    "          paths for the host, starts studio-train there and prints the run id alone on its\n"
    "          last line of stdout (progress goes to stderr)\n"
    "  attach  prints every event of the run (events.jsonl) as one JSON line on stdout, from the\n"
    "          first, until the run ends; a dropped connection is retried with backoff. With\n"
    "          --folder, a run folder on the host the studio did not start (a LLaMA-Factory\n"
    "          output_dir: its trainer_log.jsonl lines; or studio-train's events.jsonl)\n"
    "  cancel  stops the run's process group on every node (SIGTERM, then SIGKILL), or scancels\n"
    "          its Slurm job. With --sweep, the whole sweep: one scancel of its job array, so\n"
    "          its running points stop and its pending ones never start\n"
    "  runs    lists the runs under REMOTE_ROOT with their state\n"
    "\n"
    "connection options:\n"
    "  --host HOST           the host (required)\n"
    "  --identity KEY        private key file (default: ssh-agent, ~/.ssh/config, ~/.ssh/id_*)\n"
    "  --known-hosts FILE    known_hosts file (default ~/.ssh/known_hosts)\n"
    "  --ssh-config FILE     ssh config file (default ~/.ssh/config)\n"
    "  --connect-timeout S   seconds for connect + handshake (default 10)\n"
    "  --batch               never ask (unknown host keys are refused, as ssh -o BatchMode)\n"
    "  --remote-root DIR     where runs live on the host (default seqstudio-runs, under home)\n"
    "submit options:\n"
    "  --engine PATH         studio-train on the host (default: studio-train in its PATH)\n"
    "  --nproc N             processes (GPUs) per node (default 1)\n"
    "  --set KEY=VALUE       override a config key (repeatable)\n"
    "  --name NAME           run id prefix (default: the config file's name)\n"
    "  --upload-model        upload local model folders too (else their paths must be remote)\n"
    "  --node HOST           another node of a multi-node run without Slurm (repeatable)\n"
    "  --master-addr ADDR    rank 0's address as the other nodes reach it (default: HOST)\n"
    "  --master-port PORT    rank 0's rendezvous port (default 29500)\n"
    "  --sweep KEY=V1,V2,... a sweep (repeatable; every combination, or with --list the i-th\n"
    "                        values together) as one Slurm job array: one run per point, its\n"
    "                        run ids printed one per line; --parallel K: K tasks at a time\n"
    "  --slurm               submit with sbatch; with --nodes N --gpus-per-node G\n"
    "                        --partition P --time T --account A --cpus-per-task C\n"
    "                        --sbatch DIRECTIVE (repeatable, e.g. --sbatch=--exclusive);\n"
    "                        G (default: --nproc) is also the workers per node; 0: CPU only\n"
    "                        --checkpoint-before-end S: S seconds before the time limit the\n"
    "                        engine writes a checkpoint and the job requeues itself\n"
    "                        (default 300; 0: no signal); --no-requeue: no requeue (neither\n"
    "                        this one nor Slurm's own after a preemption or a node failure)\n"
    "attach options:\n"
    "  --folder DIR          follow this run folder (absolute, or relative to the login\n"
    "                        directory) instead of a run id; its state comes from its files\n"
    "  --log                 also copy the run's train.log (running_log.txt) to stderr\n"
    "  --poll-ms MS          polling interval (default 1000)\n"
    "cancel options:\n"
    "  --sweep SWEEP_ID      the sweep `submit --sweep` printed (or the run id of one of its\n"
    "                        points) instead of RUN_ID\n"
    "  --grace S             seconds between SIGTERM and SIGKILL (default 15, plus ddp_timeout\n"
    "                        when the run's config has save_on_stop)\n"
    "runs options:\n"
    "  --json                one JSON object per run instead of a table\n"
    "\n"
    "exit status of attach: 0 finished, 1 failed, 3 stopped, 4 lost (killed without a record);\n"
    "all commands: 2 bad usage or input, 5 cannot connect (host key, authentication, network).\n";

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

struct Connection {
  remote::RemoteHostRef host;
  int connect_timeout_s = 10;
  bool batch = false;
  std::string remote_root = remote::kDefaultRemoteRoot;

  remote::SshSession connect(const remote::RemoteHostRef& ref) const {
    remote::SshOptions options = studio::remote::ssh_options(ref);
    options.connect_timeout_s = connect_timeout_s;
    return remote::SshSession::connect(options, terminal_host_key_policy(batch),
                                       terminal_secret_prompt(batch));
  }
  remote::SshSession connect() const { return connect(host); }
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "studio: %s\n(`studio submit --help` lists the options of submit, attach, "
                       "cancel and runs)\n", message.c_str());
  return kExitUsage;
}

int exit_code_for(remote::RemoteRunState state) {
  switch (state) {
    case remote::RemoteRunState::Finished:
      return kExitFinished;
    case remote::RemoteRunState::Stopped:
      return kExitStopped;
    case remote::RemoteRunState::Lost:
      return kExitLost;
    default:
      return kExitFailed;
  }
}

// Runs `body`, turning the remote layer's exceptions into messages and exit codes.
template <typename F>
int guarded(const char* command, F&& body) {
  try {
    return body();
  } catch (const remote::RemoteError& e) {
    std::fprintf(stderr, "studio %s: %s\n", command, e.what());
    return e.kind() == remote::RemoteError::Kind::Transfer ? kExitUsage : kExitConnection;
  } catch (const remote::SshError& e) {
    std::fprintf(stderr, "studio %s: %s\n", command, e.what());
    return kExitConnection;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "studio %s: %s\n", command, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "studio %s: %s\n", command, e.what());
    return kExitFailed;
  }
}

int submit(Args& args, const Connection& conn) {
  if (args.positional().size() != 1) return usage_error("submit takes one CONFIG.yaml");
  remote::SubmitRequest request;
  request.config_file = args.positional().front();
  request.overrides = args.values("--set");
  request.host = conn.host;
  request.remote_root = conn.remote_root;
  if (auto engine = args.value("--engine")) request.engine = *engine;
  if (auto name = args.value("--name")) request.run_name = *name;
  request.nproc = args.positive_int("--nproc", 1);
  request.upload_model = args.flag("--upload-model");
  request.extra_nodes = args.values("--node");
  if (auto addr = args.value("--master-addr")) request.master_addr = *addr;
  if (args.value("--master-port")) request.master_port = args.positive_int("--master-port", 29500);
  if (args.flag("--slurm")) {
    remote::SbatchOptions slurm;
    slurm.nodes = args.positive_int("--nodes", 1);
    slurm.gpus_per_node = request.nproc;
    if (auto g = args.value("--gpus-per-node")) {
      int64_t v = 0;
      const std::string bad = parse_whole(*g, WholeRange{0, 1024}, v);
      if (!bad.empty())
        return usage_error("--gpus-per-node: " + bad + " (0: a CPU-only node, one worker)");
      if (!args.ok()) return usage_error(args.error());
      // The job's workers per node are its GPUs: a different --nproc would be ignored.
      if (args.value("--nproc") && v != request.nproc && !(v == 0 && request.nproc == 1))
        return usage_error("--nproc " + std::to_string(request.nproc) + " and --gpus-per-node " +
                           *g + " disagree: under --slurm each node runs one worker per GPU "
                           "(one with --gpus-per-node 0); give one of them");
      slurm.gpus_per_node = static_cast<int>(v);
    }
    if (auto p = args.value("--partition")) slurm.partition = *p;
    if (auto t = args.value("--time")) slurm.time = *t;
    if (auto a = args.value("--account")) slurm.account = *a;
    if (args.value("--cpus-per-task")) slurm.cpus_per_task = args.positive_int("--cpus-per-task", 1);
    slurm.extra_directives = args.values("--sbatch");
    slurm.requeue = !args.flag("--no-requeue");
    if (auto s = args.value("--checkpoint-before-end")) {
      int64_t v = 0;
      const std::string bad = parse_whole(*s, WholeRange{0, 65535}, v);
      if (!bad.empty())
        return usage_error("--checkpoint-before-end: " + bad + " (give 0..65535 seconds)");
      slurm.checkpoint_before_end_s = static_cast<int>(v);
    }
    if (!request.extra_nodes.empty()) return usage_error("--node is for runs without --slurm");
    request.slurm = slurm;
  }
  const std::vector<std::string> axes = args.values("--sweep");
  if (axes.empty() && (args.flag("--list") || args.value("--parallel")))
    return usage_error("--list and --parallel are for a sweep: give --sweep KEY=V1,V2,...");
  if (!axes.empty() && !request.slurm)
    return usage_error("--sweep is submitted as a Slurm job array: add --slurm (on a host "
                       "without Slurm, run `studio-train sweep` there)");
  const int parallel = args.value("--parallel") ? args.positive_int("--parallel", 1) : 0;
  if (!args.ok()) return usage_error(args.error());
  return guarded("submit", [&] {
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    const remote::SshSession session = conn.connect();
    std::string last_what;
    const remote::SubmitProgressFn show = [&](const remote::SubmitProgress& p) {
          if (p.file_count == 0) {
            std::fprintf(stderr, "%s\n", p.what.c_str());
            return;
          }
          const bool done = p.skipped || p.bytes == p.total;
          if (!tty && !done && p.what == last_what) return;  // one line per file in logs
          last_what = p.what;
          std::fprintf(stderr, "%s[%d/%d] %s  %llu/%llu bytes%s", tty ? "\r\033[K" : "",
                       p.file_index, p.file_count, p.what.c_str(),
                       static_cast<unsigned long long>(p.bytes),
                       static_cast<unsigned long long>(p.total), tty && !done ? "" : "\n");
        };
    if (!axes.empty()) {
      remote::SweepSubmitRequest sweep;
      sweep.run = request;
      sweep.axes = axes;
      sweep.list = args.flag("--list");
      sweep.parallel = parallel;
      const auto done = remote::submit_sweep(session, sweep, show);
      std::fprintf(stderr,
                   "uploaded %d file(s) (%llu bytes), %d unchanged; sweep %s submitted on %s as "
                   "Slurm job array %s (%zu tasks)\n",
                   done.files_uploaded, static_cast<unsigned long long>(done.bytes_uploaded),
                   done.files_skipped, done.sweep_id.c_str(), session.where().c_str(),
                   done.job_id.c_str(), done.points.size());
      // One run id per line, in point order: each is attached to, cancelled and listed alone.
      for (const auto& point : done.points)
        std::fprintf(stderr, "  %s  job %s  %s\n", point.run_id.c_str(), point.job_id.c_str(),
                     point.sweep_point.c_str());
      for (const auto& point : done.points) std::printf("%s\n", point.run_id.c_str());
      return kExitFinished;
    }
    const auto result = remote::submit_run(
        session, request, show,
        [&](const remote::RemoteHostRef& node) { return conn.connect(node); });
    std::fprintf(stderr, "uploaded %d file(s) (%llu bytes), %d unchanged; run %s started on %s\n",
                 result.files_uploaded, static_cast<unsigned long long>(result.bytes_uploaded),
                 result.files_skipped, result.record.run_id.c_str(), session.where().c_str());
    if (!result.record.job_id.empty())
      std::fprintf(stderr, "Slurm job %s\n", result.record.job_id.c_str());
    std::printf("%s\n", result.record.run_id.c_str());
    return kExitFinished;
  });
}

int attach(Args& args, const Connection& conn) {
  const auto folder = args.value("--folder");
  if (folder ? !args.positional().empty() : args.positional().size() != 1)
    return usage_error("attach takes one RUN_ID, or --folder DIR");
  std::string run_id = folder ? std::string() : args.positional().front();
  remote::FollowOptions options;
  options.follow_log = args.flag("--log");
  if (args.value("--poll-ms")) options.poll_interval = std::chrono::milliseconds(args.positive_int("--poll-ms", 1000));
  if (!args.ok()) return usage_error(args.error());
  return guarded("attach", [&] {
    // The first connection fails fast (a wrong host or run id is not worth retrying); once the
    // run is found, connection problems are retried for as long as the run goes on.
    remote::RemoteRunRecord record;
    {
      const remote::SshSession session = conn.connect();
      record = folder ? remote::attach_folder(session, conn.host, *folder)
                      : remote::read_remote_record(session, conn.remote_root, run_id);
    }
    record.host = conn.host;  // this connection's way to the host, not the submitter's
    if (folder) run_id = record.folder;
    const std::string events_name = record.events_file_name();
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    remote::FollowCursor cursor;
    remote::FollowCallbacks callbacks;
    // The lines go out as written; what a reader would skip or repair in them is said on
    // stderr, the first case of each kind at once and the counts at the end.
    EventStreamParser parser(EventStreamParser::kDefaultMaxLineBytes, line_format_of(events_name));
    ReadProblems told;
    std::vector<Event> parsed;
    callbacks.on_events = [&](const std::string& bytes) {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      std::fflush(stdout);
      parsed.clear();
      parser.feed(bytes, parsed);
      const ReadProblems& now = parser.problems();
      if (now.first_issue_line != told.first_issue_line ||
          now.first_bad_line != told.first_bad_line) {
        std::fprintf(stderr, "studio attach: %s\n", now.summary(events_name).c_str());
      }
      told = now;
    };
    callbacks.on_log = [](const std::string& bytes) {
      std::fwrite(bytes.data(), 1, bytes.size(), stderr);
    };
    std::string last_state;
    callbacks.on_status = [&](const remote::RemoteRunStatus& s) {
      const std::string state = remote::to_string(s.state);
      if (state != last_state) {
        std::fprintf(stderr, "studio attach: %s %s%s%s\n", run_id.c_str(), state.c_str(),
                     s.reason.empty() ? "" : ": ", s.reason.c_str());
        last_state = state;
      }
    };
    bool reconnecting = false;
    callbacks.on_connected = [&] {
      if (reconnecting) std::fprintf(stderr, "studio attach: reconnected\n");
      reconnecting = false;
    };
    callbacks.on_disconnected = [&](const std::string& error, int attempt,
                                    std::chrono::milliseconds retry_in) {
      reconnecting = true;
      std::fprintf(stderr, "studio attach: connection lost (%s); retry %d in %.1f s\n",
                   error.c_str(), attempt, static_cast<double>(retry_in.count()) / 1000.0);
    };
    const auto end = remote::follow_run([&] { return conn.connect(record.host); }, record,
                                        cursor, callbacks, options, g_interrupted);
    if (parser.problems().any())
      std::fprintf(stderr, "studio attach: in all, %s\n",
                   parser.problems().summary(events_name).c_str());
    if (!end) {
      std::fprintf(stderr, "studio attach: interrupted; the run goes on (attach again to follow it)\n");
      return kExitInterrupted;
    }
    return exit_code_for(end->state);
  });
}

// The points of a sweep on the host, in point order: those whose record names the sweep `id`,
// or, when none does, the sweep of the point whose run id is `id`.
std::vector<remote::RemoteRunRecord> sweep_points(const remote::SshSession& session,
                                                  const Connection& conn, const std::string& id) {
  std::vector<std::string> problems;
  const std::vector<remote::RemoteRunRecord> all =
      remote::list_remote_runs(session, conn.remote_root, &problems);
  for (const std::string& problem : problems)
    std::fprintf(stderr, "studio cancel: %s\n", problem.c_str());
  std::string sweep = id;
  const auto named = [&](const remote::RemoteRunRecord& r) { return r.sweep_id == sweep; };
  if (std::none_of(all.begin(), all.end(), named)) {
    const auto point = std::find_if(
        all.begin(), all.end(), [&](const remote::RemoteRunRecord& r) { return r.run_id == id; });
    if (point == all.end()) {
      throw std::invalid_argument("no sweep or run " + id + " under " + conn.remote_root + " on " +
                                  session.where() + "; `studio runs --host ...` lists them");
    }
    if (point->sweep_id.empty())
      throw std::invalid_argument("run " + id +
                                  " is not a point of a sweep: cancel it without --sweep");
    sweep = point->sweep_id;
  }
  std::vector<remote::RemoteRunRecord> points;
  std::copy_if(all.begin(), all.end(), std::back_inserter(points), named);
  std::sort(points.begin(), points.end(),
            [](const auto& a, const auto& b) { return a.run_id < b.run_id; });
  for (remote::RemoteRunRecord& point : points) point.host = conn.host;
  return points;
}

int cancel(Args& args, const Connection& conn) {
  if (const auto sweep = args.value("--sweep")) {
    if (!args.positional().empty() || args.values("--sweep").size() > 1)
      return usage_error("cancel --sweep takes one SWEEP_ID and no RUN_ID");
    if (args.value("--grace"))
      return usage_error("--grace is for a run: a sweep is cancelled by Slurm (its KillWait)");
    if (!args.ok()) return usage_error(args.error());
    return guarded("cancel", [&] {
      const remote::SshSession session = conn.connect();
      const auto points = sweep_points(session, conn, *sweep);
      for (const std::string& line : remote::cancel_sweep(session, points))
        std::printf("%s\n", line.c_str());
      return kExitFinished;
    });
  }
  if (args.positional().size() != 1) return usage_error("cancel takes one RUN_ID");
  const int grace = args.value("--grace") ? args.positive_int("--grace", 15)
                                          : -1;  // the run record's
  if (!args.ok()) return usage_error(args.error());
  return guarded("cancel", [&] {
    const remote::SshSession session = conn.connect();
    remote::RemoteRunRecord record =
        remote::read_remote_record(session, conn.remote_root, args.positional().front());
    record.host = conn.host;
    for (const std::string& line : remote::cancel_run(
             session, record, grace,
             [&](const remote::RemoteHostRef& node) { return conn.connect(node); })) {
      std::printf("%s\n", line.c_str());
    }
    return kExitFinished;
  });
}

std::string format_time(double unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

int runs(Args& args, const Connection& conn) {
  if (!args.positional().empty()) return usage_error("runs takes no arguments");
  const bool as_json = args.flag("--json");
  if (!args.ok()) return usage_error(args.error());
  return guarded("runs", [&] {
    const remote::SshSession session = conn.connect();
    std::vector<std::string> problems;
    const auto records = remote::list_remote_runs(session, conn.remote_root, &problems);
    if (!as_json) {
      std::printf("%-44s %-9s %7s %-9s %-5s %-16s %s\n", "RUN_ID", "STATE", "STEP", "KIND",
                  "PROCS", "SUBMITTED", "CONFIG");
    }
    for (const auto& record : records) {
      const remote::RemoteRunStatus status = remote::query_status(session, record);
      long long step = -1;
      try {
        const auto j = nlohmann::json::parse(status.status_json);
        if (j.contains("step")) json_whole(j["step"], step);  // stays -1 unless whole
      } catch (const std::exception&) {
      }
      if (as_json) {
        nlohmann::json j{{"run_id", record.run_id}, {"state", remote::to_string(status.state)},
                         {"reason", status.reason}, {"kind", remote::to_string(record.kind)},
                         {"job_id", record.job_id}, {"nnodes", record.nnodes},
                         {"nproc", record.nproc}, {"submitted", record.submitted},
                         {"config", record.config_name}};
        j["step"] = step >= 0 ? nlohmann::json(step) : nlohmann::json();
        if (!record.sweep_id.empty()) {
          j["sweep"] = record.sweep_id;
          j["sweep_point"] = record.sweep_point;
        }
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%-44s %-9s %7s %-9s %-5s %-16s %s\n", record.run_id.c_str(),
                    remote::to_string(status.state),
                    step >= 0 ? std::to_string(step).c_str() : "-",
                    remote::to_string(record.kind),
                    (std::to_string(record.nnodes) + "x" + std::to_string(record.nproc)).c_str(),
                    format_time(record.submitted).c_str(),
                    (record.config_name +
                     (record.sweep_id.empty() ? "" : "  (sweep point " + record.sweep_point + ")"))
                        .c_str());
      }
    }
    for (const std::string& problem : problems) std::fprintf(stderr, "studio runs: %s\n", problem.c_str());
    return kExitFinished;
  });
}

}  // namespace

std::optional<int> run_remote_command(int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  const std::string command = argv[1];
  static const std::set<std::string> kCommands{"submit", "attach", "cancel", "runs"};
  if (!kCommands.count(command)) return std::nullopt;
  Args args(std::vector<std::string>(argv + 2, argv + argc),
            {"--host", "--identity", "--known-hosts", "--ssh-config", "--connect-timeout",
             "--remote-root", "--engine", "--nproc", "--set", "--name", "--node", "--master-addr",
             "--master-port", "--nodes", "--gpus-per-node", "--partition", "--time", "--account",
             "--cpus-per-task", "--sbatch", "--checkpoint-before-end", "--poll-ms", "--grace",
             "--folder", "--sweep", "--parallel"},
            {"--help", "-h", "--batch", "--upload-model", "--slurm", "--no-requeue", "--log",
             "--json", "--list"});
  if (args.ok() && (args.flag("--help") || args.flag("-h"))) {
    std::fputs(kUsage, stdout);
    return kExitFinished;
  }
  if (!args.ok()) return usage_error(args.error());
  Connection conn;
  const auto host = args.value("--host");
  if (!host) return usage_error(command + " needs --host [user@]host[:port]");
  conn.host.target = *host;
  if (auto v = args.value("--identity")) conn.host.identity_file = *v;
  if (auto v = args.value("--known-hosts")) conn.host.known_hosts_file = *v;
  if (auto v = args.value("--ssh-config")) conn.host.ssh_config_file = *v;
  if (auto v = args.value("--remote-root")) conn.remote_root = *v;
  if (args.value("--connect-timeout")) conn.connect_timeout_s = args.positive_int("--connect-timeout", 10);
  conn.batch = args.flag("--batch");
  if (!args.ok()) return usage_error(args.error());
  try {
    (void)studio::remote::ssh_options(conn.host);
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
  if (command == "submit") return submit(args, conn);
  if (command == "attach") return attach(args, conn);
  if (command == "cancel") return cancel(args, conn);
  return runs(args, conn);
}

}  // namespace studio::cli
