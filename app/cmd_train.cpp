// studio-train train / eval: a run config in, a trained model (or a loss) out.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/config_io.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/config/validate.h"
#include "studio/data/dataset.h"
#include "studio/data/tokenizer.h"
#include "studio/launch/dist_env.h"
#include "studio/launch/launch_options.h"
#include "studio/launch/launcher.h"
#include "studio/runs/events.h"
#include "studio/runs/run_outcome.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/checkpoint.h"
#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/parallel/node_rendezvous.h"
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/train_loop.h"

namespace studio::app {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_checkpoint_stop{false};

extern "C" void on_stop_signal(int) {
  g_stop = true;
}
// SIGUSR1: write a checkpoint, then stop (the Slurm batch script sends it when the time limit is
// near; remote/slurm_script.h).
extern "C" void on_checkpoint_stop_signal(int) {
  g_checkpoint_stop = true;
  g_stop = true;
}

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_checkpoint_stop_signal);
}

// A job that Slurm requeued (preemption, a node failure, `scontrol requeue`, or the batch
// script's own requeue before the time limit) runs its batch script again with
// SLURM_RESTART_COUNT set: 0 when it has not been requeued.
int slurm_restart_count() {
  const char* v = std::getenv("SLURM_RESTART_COUNT");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != nullptr && *end == '\0' && n > 0 ? static_cast<int>(std::min<long>(n, 1 << 20)) : 0;
}

// The newest checkpoint of output_dir whose files match its manifest, as an absolute path; those
// passed over are said on stderr (the workers' log says it again).
std::optional<std::string> newest_good_checkpoint(const std::string& output_dir) {
  std::vector<std::string> skipped;
  const auto found = trainer::last_good_checkpoint(output_dir, &skipped);
  for (const std::string& why : skipped)
    std::cerr << "studio-train: not resuming from " << why << "\n";
  if (!found) return std::nullopt;
  return std::filesystem::absolute(*found).lexically_normal().string();
}

// A restarted world's workers: from `resume`, or, when no checkpoint was written, from the start
// in the same output_dir (its events.jsonl is appended to; nothing is removed). Appended after
// the user's own --set: the later one wins.
void add_resume_args(std::vector<std::string>& argv, const std::optional<std::string>& resume) {
  if (resume) {
    argv.insert(argv.end(), {"--set", "overwrite_output_dir=false", "--set",
                             "resume_from_checkpoint=" + *resume});
  } else {
    argv.insert(argv.end(), {"--set", "overwrite_output_dir=true"});
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Appends a restart event to the run's events.jsonl (node 0's launcher only).
void record_restart(const std::string& output_dir, const RestartEvent& event) {
  EventWriter writer;
  std::string error = writer.open(events_path(output_dir));
  if (error.empty()) error = writer.write(event);
  if (error.empty()) error = writer.close();
  if (!error.empty()) std::cerr << "studio-train: could not record the restart: " << error << "\n";
}

// A config that fails validation in a run folder made for it (the studio's launch folder: it
// exists and has no events yet) gets a failed end event and status.json naming the first error,
// FILE:LINE:COL: key: message, so that the run's dashboard opens on it. A folder holding another
// run's events is left alone.
void record_config_error(const RunConfig& cfg, const std::vector<Diagnostic>& diags) {
  if (cfg.output_dir.empty() || std::getenv("STUDIO_LAUNCHED")) return;
  std::error_code ec;
  if (!std::filesystem::is_directory(cfg.output_dir, ec) ||
      std::filesystem::exists(events_path(cfg.output_dir), ec))
    return;
  for (const Diagnostic& d : diags) {
    if (d.severity != Severity::Error) continue;
    RunOutcome outcome;
    outcome.exit_code = kExitInvalid;
    outcome.reason = d.format();
    record_run_outcome(cfg.output_dir, outcome);
    return;
  }
}

// Loads CONFIG.yaml, applies --set overrides and validates for a run on this machine. Returns
// false after printing every problem.
bool load_for_run(const Argv& argv, const char* cmd, RunConfig& cfg, int& exit_code,
                  int nproc_per_node = 1, int nnodes = 1) {
  cli::Args args(argv, {"--set"}, {"--skip-bad-rows"});
  if (!args.ok() || args.positional().size() != 1) {
    exit_code = usage_error(std::string(cmd) + ": " +
                            (args.ok() ? "expected one CONFIG.yaml" : args.error()));
    return false;
  }
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--set") sets.push_back(argv[i + 1]);
  for (const auto& a : argv)
    if (a.rfind("--set=", 0) == 0) sets.push_back(a.substr(6));
  LoadResult loaded = load_config_file(args.positional().front());
  auto diags = loaded.diagnostics;
  ValidateOptions opt;
  opt.nproc_per_node = nproc_per_node;
  opt.nnodes = nnodes;
  opt.for_training = true;
  if (loaded.ok()) {
    auto more = apply_overrides(loaded.config, sets);
    diags.insert(diags.end(), more.begin(), more.end());
    more = validate_config(loaded.config, opt);
    diags.insert(diags.end(), more.begin(), more.end());
  }
  std::cerr << format_all(diags);
  if (has_errors(diags)) {
    exit_code = kExitInvalid;
    record_config_error(loaded.config, diags);
    return false;
  }
  cfg = normalized(loaded.config);
  resolve_llamafactory_v1(cfg, opt);  // a v1 file's stage, template and accumulation
  resolve_hub_models(cfg);
  return true;
}

// `--nproc N [--nnodes ...]`: start the workers of this node and watch them (torchrun's job).
int launch(Argv args, const launch::LauncherFlags& flags) {
  launch::LaunchOptions opt =
      launch::launch_options_from(flags, [](const char* n) { return std::getenv(n); });
  // Validate once here, for the whole world, before any worker starts.
  RunConfig cfg;
  int code = kExitOk;
  if (!load_for_run(args, "train", cfg, code, opt.nproc, opt.nnodes)) return code;
  opt.worker_argv = {launch::self_executable_path(), "train"};
  opt.worker_argv.insert(opt.worker_argv.end(), args.begin(), args.end());
  opt.output_dir = cfg.output_dir;
  // save_on_stop: a stop request must leave the workers the time of that last checkpoint;
  // SIGUSR1 always writes one.
  opt.stop_request_extra_s = stop_grace_seconds(cfg, 0);
  RunConfig saving = cfg;
  saving.save_on_stop = true;
  opt.checkpoint_stop_extra_s = stop_grace_seconds(saving, 0);
  opt.checkpoint_stop = &g_checkpoint_stop;
  // Workers leave the run's end record to the launcher when a peer failed first: it alone
  // knows which rank that was.
  opt.extra_env.emplace_back("STUDIO_LAUNCHED", "1");
  install_stop_handlers();
  std::cerr << "studio-train: launching " << opt.nproc << " worker" << (opt.nproc > 1 ? "s" : "")
            << (opt.nnodes > 1 ? " on node " + std::to_string(opt.node_rank) + " of " +
                                     std::to_string(opt.nnodes)
                               : std::string())
            << (opt.max_restarts > 0
                    ? ", restarting them up to " + std::to_string(opt.max_restarts) +
                          " time(s) after a failure"
                    : std::string())
            << "\n";
  const bool fixed_port = opt.master_port != 0;
  // A requeued Slurm job: the run continues from its newest complete checkpoint (or starts over
  // in the same output_dir when none was written), and the events say so once, on node 0.
  if (const int requeues = slurm_restart_count(); requeues > 0) {
    const auto resume = newest_good_checkpoint(cfg.output_dir);
    const char* job = std::getenv("SLURM_JOB_ID");
    RestartEvent event;
    event.time = now_seconds();
    event.attempt = requeues;
    event.reason = "Slurm requeued job " + std::string(job ? job : "?") +
                   " (SLURM_RESTART_COUNT=" + std::to_string(requeues) + ")";
    event.resume_from = resume.value_or("");
    event.step = resume ? trainer::checkpoint_step(*resume) : 0;
    std::cerr << "studio-train: " << event.reason << ": "
              << (resume ? "resuming from " + *resume
                         : std::string("no checkpoint yet, starting over"))
              << "\n";
    if (opt.node_rank == 0) record_restart(cfg.output_dir, event);
    add_resume_args(opt.worker_argv, resume);
  }
  const std::vector<std::string> requeued_argv = opt.worker_argv;
  // Several nodes with restarts: the launchers meet at node 0's rendezvous before each round
  // (trainer/parallel/node_rendezvous.h). A launcher started while the others wait for it (a
  // node that came back) joins the round they are in.
  std::unique_ptr<trainer::dist::NodeRendezvous> rdzv;
  int first_round = 0;
  auto rendezvous_failed = [&](const std::string& why) {
    std::cerr << "studio-train: " << why << "\n";
    if (opt.node_rank == 0) {
      const std::string error = record_run_outcome(cfg.output_dir, RunOutcome{1, false, why});
      if (!error.empty())
        std::cerr << "studio-train: could not record the outcome: " << error << "\n";
    }
    return 1;
  };
  if (opt.elastic()) {
    trainer::dist::RendezvousOptions ro;
    ro.host = opt.master_addr;
    ro.port = opt.master_port;
    ro.nnodes = opt.nnodes;
    ro.node_rank = opt.node_rank;
    ro.run_id = opt.rdzv_id.empty() ? "run" : opt.rdzv_id;
    ro.join_timeout = std::chrono::seconds(opt.rdzv_timeout_s);
    try {
      rdzv = std::make_unique<trainer::dist::NodeRendezvous>(ro);
      first_round = rdzv->current_round();
    } catch (const std::exception& e) {
      return rendezvous_failed(e.what());
    }
    if (first_round > 0)
      std::cerr << "studio-train: node " << opt.node_rank << " joins the run at restart "
                << first_round << ", where the other nodes wait\n";
  }
  launch::LaunchResult result;
  std::optional<std::string> resume;  // where the next round resumes (node 0 decides with rdzv)
  for (int attempt = first_round;; ++attempt) {
    if (rdzv) {
      // Node 0 holds the round's worker port from before it publishes it until its rank 0 takes
      // it over (launch_workers), so that no other process can take it meanwhile.
      launch::HeldPort round_port;
      if (opt.node_rank == 0) {
        std::string error;
        round_port = launch::HeldPort::listen_on(0, error);
        if (!round_port.held())
          return rendezvous_failed("cannot open a port for the workers' store: " + error);
      }
      trainer::dist::Round round;
      try {
        round = rdzv->join(attempt, round_port.port(), resume.value_or(""));
      } catch (const std::exception& e) {
        return rendezvous_failed(e.what());
      }
      // Every node's workers: the port node 0 chose for this round, its checkpoint.
      opt.master_port = round.master_port;
      // (A round node 0 joins late was published before, with a port of its own.)
      opt.store_listen_fd =
          round_port.held() && round.master_port == round_port.port() ? round_port.release() : -1;
      if (attempt > 0) {
        opt.worker_argv = requeued_argv;
        add_resume_args(opt.worker_argv, round.resume_from.empty()
                                             ? std::nullopt
                                             : std::optional<std::string>(round.resume_from));
      }
    }
    // torchrun's variables for the attempt (a worker may read them; fault injection does).
    opt.extra_env.erase(
        std::remove_if(opt.extra_env.begin(), opt.extra_env.end(),
                       [](const auto& kv) { return kv.first.rfind("TORCHELASTIC_", 0) == 0; }),
        opt.extra_env.end());
    opt.extra_env.emplace_back("TORCHELASTIC_RESTART_COUNT", std::to_string(attempt));
    opt.extra_env.emplace_back("TORCHELASTIC_MAX_RESTARTS", std::to_string(opt.max_restarts));
    const bool restart_left = attempt < opt.max_restarts;
    opt.record_failure = !restart_left;
    result = launch::launch_workers(opt, &g_stop);
    if (result.exit_code == 0 || result.stopped || g_stop) break;
    // Across nodes, the round's cause is the first failure a node saw of its own (its worker
    // died); a node whose workers only lost their peers (kExitPeerFailed) takes that one.
    int failed_rank = result.failed_rank;
    std::string reason = result.reason;
    if (rdzv) {
      if (result.exit_code != launch::kExitPeerFailed)
        rdzv->report_failure(attempt, std::to_string(result.failed_rank) + "\n" + result.reason);
      if (const auto shared = rdzv->failure(attempt, std::chrono::seconds(3))) {
        const auto cut = shared->find('\n');
        failed_rank = cut == std::string::npos ? -1 : std::atoi(shared->substr(0, cut).c_str());
        reason = cut == std::string::npos ? *shared : shared->substr(cut + 1);
      }
    }
    if (!restart_left) {
      // Recorded by launch_workers with this node's view; node 0 records the round's cause.
      if (rdzv && opt.node_rank == 0 && reason != result.reason) {
        result.reason = reason;
        result.record_error =
            record_run_outcome(cfg.output_dir, RunOutcome{result.exit_code, false, reason});
      }
      break;
    }
    // The whole world again, from the newest complete checkpoint (or from the start when none
    // was written), with the same data order and RNG state as an uninterrupted run: resuming
    // restores both (trainer/checkpoint.h). Across nodes, node 0 decides and the rendezvous tells
    // the others.
    resume = !rdzv || opt.node_rank == 0 ? newest_good_checkpoint(cfg.output_dir) : std::nullopt;
    std::cerr << "studio-train: " << reason << "\nstudio-train: restart " << attempt + 1 << " of "
              << opt.max_restarts << ": "
              << (rdzv && opt.node_rank != 0 ? std::string("from the checkpoint node 0 chooses")
                  : resume                   ? "resuming from " + *resume
                                             : std::string("no checkpoint yet, starting over"))
              << "\n";
    if (opt.node_rank == 0) {
      RestartEvent event;
      event.time = now_seconds();
      event.attempt = attempt + 1;
      event.max_restarts = opt.max_restarts;
      event.failed_rank = failed_rank;
      event.reason = reason;
      event.resume_from = resume.value_or("");
      event.step = resume ? trainer::checkpoint_step(*resume) : 0;
      record_restart(cfg.output_dir, event);
    }
    if (!rdzv) {
      opt.worker_argv = requeued_argv;
      add_resume_args(opt.worker_argv, resume);
      // A port of its own (the failed world's may still be held: TIME_WAIT, a dying rank):
      // launch_workers binds a new one when none was given.
      if (!fixed_port) opt.master_port = 0;
    }
  }
  if (!result.record_error.empty())
    std::cerr << "studio-train: could not record the outcome: " << result.record_error << "\n";
  if (result.exit_code != 0) std::cerr << "studio-train: " << result.reason << "\n";
  return result.exit_code;
}

}  // namespace

int cmd_train(const Argv& argv) {
  Argv args = argv;
  const auto flags = launch::take_launcher_flags(args);
  if (flags.any()) return launch(args, flags);

  // A worker (started by our launcher, torchrun or srun) or a single process.
  const auto env = launch::dist_env_from_environment();
  // Rank 0's store socket from our launcher (taken out of the environment on every rank).
  const std::optional<int> store_fd = launch::take_store_listen_fd(env.master_port);
  RunConfig cfg;
  int code = kExitOk;
  if (!load_for_run(args, "train", cfg, code, env.local_world_size, env.nnodes)) return code;
  install_stop_handlers();
  // A reader of this process's output that goes away (a launcher killed with the pipes it reads
  // rank > 0's output from, a studio or a pager that closed): the writes fail, training goes on
  // (and a stop still ends it cleanly) rather than dying of SIGPIPE mid-step.
  std::signal(SIGPIPE, SIG_IGN);

  // STUDIO_DIST_BACKEND: nccl (the default on GPUs) or gloo (on GPUs: host-staged collectives that
  // let several ranks share one GPU, for checks on a 1-GPU machine; on CPUs Gloo is the only one).
  const char* backend_env = std::getenv("STUDIO_DIST_BACKEND");
  const std::string backend = backend_env && *backend_env ? backend_env : "nccl";
  if (backend != "nccl" && backend != "gloo")
    return usage_error("STUDIO_DIST_BACKEND=" + backend + " is not a backend: nccl or gloo");
  const bool gloo_on_cuda = backend == "gloo";
  // The rank's GPU first: the communicator (NCCL), the model and every CUDA stream are created on
  // the current device.
  const std::optional<int> cuda_device = trainer::select_cuda_device(env.local_rank, gloo_on_cuda);
  std::unique_ptr<trainer::dist::Communicator> comm;
  if (env.distributed()) {
    trainer::dist::CommOptions c;
    c.rank = env.rank;
    c.world_size = env.world_size;
    c.master_addr = env.master_addr;
    c.master_port = env.master_port;
    c.store_listen_fd = store_fd.value_or(-1);
    c.sp = cfg.sequence_parallel_size;
    c.ulysses_degree = cfg.sequence_parallel_mode == SpMode::Ulysses ? cfg.sequence_parallel_size
                       : cfg.sequence_parallel_mode == SpMode::Usp
                           ? cfg.sequence_parallel_ulysses_degree
                           : 1;
    c.ring_degree = cfg.sequence_parallel_size / std::max<int64_t>(1, c.ulysses_degree);
    c.timeout = std::chrono::seconds(cfg.ddp_timeout);
    c.cuda = cuda_device.has_value();
    c.cuda_device = cuda_device.value_or(0);
    c.gloo_on_cuda = c.cuda && gloo_on_cuda;
    const char* verify_env = std::getenv("STUDIO_VERIFY_COLLECTIVES");
    c.verify_collectives = verify_env && std::string(verify_env) == "1";
    comm = std::make_unique<trainer::dist::Communicator>(c);
  } else if (cfg.sequence_parallel_size > 1) {
    return usage_error(
        "train: sequence_parallel_size " + std::to_string(cfg.sequence_parallel_size) +
        " needs as many processes: add --nproc " + std::to_string(cfg.sequence_parallel_size));
  }
  const bool rank0 = env.rank == 0;

  const auto tokenizer = data::Tokenizer::load(cfg.model_name_or_path);
  data::DatasetOptions dopt;
  dopt.skip_bad_rows = std::find(args.begin(), args.end(), "--skip-bad-rows") != args.end();
  dopt.on_warning = [rank0](const std::string& w) {
    if (rank0) std::cerr << "warning: " << w << "\n";
  };
  std::string error;
  auto info = read_model_info(cfg.model_name_or_path, error);
  if (!info) throw std::runtime_error(error);

  trainer::TrainInputs in;
  in.checkpoint_stop = &g_checkpoint_stop;
  in.config = cfg;
  in.model_dir = cfg.model_name_or_path;
  in.model = *info;
  size_t n_train = 0, n_eval = 0;
  if (cfg.pairwise()) {
    auto pairs = data::load_pair_data(cfg, tokenizer, dopt);
    in.train_pairs = std::move(pairs.train);
    in.eval_pairs = std::move(pairs.eval);
    n_train = in.train_pairs.size();
    n_eval = in.eval_pairs.size();
  } else if (cfg.stage == Stage::Kto) {
    // Each example with its mismatched KL sequence, as LLaMA-Factory's FeedbackDatasetProcessor.
    auto feedback = data::load_feedback_data(cfg, tokenizer, dopt);
    in.train_feedback = std::move(feedback.train);
    in.eval_feedback = std::move(feedback.eval);
    n_train = in.train_feedback.size();
    n_eval = in.eval_feedback.size();
  } else if (cfg.stage == Stage::Pt) {
    // LLaMA-Factory's pre-training data: each text + eos, every token a label, packed into
    // cutoff_len blocks unless packing: false (data/dataset/pretrain.cpp).
    auto pt = data::load_pt_data(cfg, tokenizer, dopt);
    in.train = std::move(pt.train);
    in.eval = std::move(pt.eval);
    n_train = in.train.size();
    n_eval = in.eval.size();
  } else {
    // Packing as LLaMA-Factory: samples truncated to cutoff_len - 1 and packed into sequences of
    // at most cutoff_len - 1 tokens (it keeps the last position for a pad token).
    const bool packing = cfg.packing || cfg.neat_packing;
    RunConfig data_cfg = cfg;
    if (packing) data_cfg.cutoff_len = std::max<int64_t>(1, cfg.cutoff_len - 1);
    auto sft = data::load_sft_data(data_cfg, tokenizer, dopt);
    const size_t samples = sft.train.size();
    in.train =
        packing ? trainer::pack_samples(sft.train, data_cfg.cutoff_len) : std::move(sft.train);
    in.eval = packing ? trainer::pack_samples(sft.eval, data_cfg.cutoff_len) : std::move(sft.eval);
    n_train = in.train.size();
    n_eval = in.eval.size();
    if (packing && rank0)
      std::cerr << "studio-train: " << (cfg.neat_packing ? "neat packing: " : "packing: ")
                << samples << " training samples in " << n_train << " sequences of at most "
                << data_cfg.cutoff_len << " tokens\n";
  }
  in.pad_id = tokenizer.pad_id().value_or(tokenizer.eos_id().value_or(0));
  in.terminal = rank0 && ::isatty(STDERR_FILENO) != 0;
  in.comm = comm.get();
  in.local_rank = env.local_rank;
  in.share_gpus = gloo_on_cuda;
  // pt's blocks: cutoff_len tokens, or cutoff_len - 1 when the file sets packing: true (as LF).
  const std::string blocks =
      cfg.pt_packs() && !in.train.empty()
          ? " training blocks of " + std::to_string(in.train.front().input_ids.size()) + " tokens, "
          : std::string();
  if (rank0)
    std::cerr << "studio-train: " << n_train
              << (cfg.pairwise()                    ? " training pairs, "
                  : cfg.stage == Stage::Kto         ? " training examples, "
                  : !blocks.empty()                 ? blocks.c_str()
                  : cfg.packing || cfg.neat_packing ? " packed training sequences, "
                                                    : " training samples, ")
              << n_eval << " for evaluation, output in " << cfg.output_dir << "\n";
  trainer::TrainResult result;
  try {
    result = trainer::Trainer(std::move(in)).run(&g_stop);
  } catch (const trainer::dist::CollectiveError& e) {
    // A peer failed first (no watchdog named a stalled rank): under studio-train's launcher
    // this exit code lets it report the peer's own failure instead of this one.
    if (!std::getenv("STUDIO_LAUNCHED") ||
        std::string_view(e.what()).find("; watchdog: ") != std::string_view::npos)
      throw;
    std::cerr << "studio-train train: " << e.what() << "\n";
    return launch::kExitPeerFailed;
  }
  if (rank0) {
    std::cerr << "studio-train: " << result.final_state << " at step " << result.steps;
    if (!result.step_losses.empty())
      std::cerr << ", loss " << result.step_losses.front() << " -> " << result.step_losses.back();
    std::cerr << "\n";
  }
  return result.final_state == "stopped" ? 130 : kExitOk;
}

int cmd_eval(const Argv& argv) {
  RunConfig cfg;
  int code = kExitOk;
  if (!load_for_run(argv, "eval", cfg, code)) return code;
  const auto tokenizer = data::Tokenizer::load(cfg.model_name_or_path);
  data::DatasetOptions dopt;
  dopt.skip_bad_rows = std::find(argv.begin(), argv.end(), "--skip-bad-rows") != argv.end();
  auto sft = cfg.stage == Stage::Pt ? data::load_pt_data(cfg, tokenizer, dopt)
                                    : data::load_sft_data(cfg, tokenizer, dopt);
  const bool held_out = !sft.eval.empty();
  if (!held_out)
    std::cerr << "studio-train eval: no val_size or eval_dataset: evaluating on the training "
                 "data\n";
  const double loss = trainer::evaluate_model(
      cfg.model_name_or_path, held_out ? sft.eval : sft.train, cfg.per_device_eval_batch_size,
      tokenizer.pad_id().value_or(tokenizer.eos_id().value_or(0)));
  std::printf("%.6f\n", loss);
  return kExitOk;
}

}  // namespace studio::app
