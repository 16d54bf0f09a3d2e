#pragma once
// Submitting a local run config to a remote host: the config's local inputs (dataset_info.json
// and the dataset files it uses, the DeepSpeed JSON, and on request the model folders) are
// uploaded into the new remote run folder over SFTP (unchanged files skipped by size and
// SHA-256), the config is rewritten to point at them (output_dir becomes the run's output/),
// studio-remote.json is written, and the engine is started: detached on one host, one detached
// launcher per node over SSH, or as a Slurm batch job.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "studio/remote/remote_run.h"
#include "studio/remote/slurm_script.h"
#include "studio/remote/ssh_session.h"

namespace studio::remote {

struct SubmitRequest {
  std::string config_file;                 // the local YAML
  std::string base_dir;  // relative paths in it resolve here (as studio-train would run it);
                         // empty: the working directory
  std::vector<std::string> overrides;      // key=value, as `studio-train train --set`
  RemoteHostRef host;                      // node 0 / login node
  std::string remote_root = kDefaultRemoteRoot;
  std::string engine = "studio-train";     // remote path or PATH name
  std::string run_name;                    // run id stem; empty: the config file's stem
  int nproc = 1;                           // workers per node
  std::vector<std::string> extra_nodes;    // multi-node without Slurm: nodes 1..n-1
  std::string master_addr;                 // multi-node: rank 0's address (default: host's)
  int master_port = 0;                     // multi-node: 0 = 29500
  std::optional<SbatchOptions> slurm;      // set: submit with sbatch instead
  bool upload_model = false;  // upload local model_name_or_path / ref_model folders too
  // Non-empty: LLaMA-Factory trains (`llamafactory-cli train` under `studio-train supervise`,
  // FORCE_TORCHRUN): its path or PATH name on the host. The uploaded YAML then leaves out the
  // studio's own keys, and a config that sets one is refused (llamafactory_target.h).
  std::string llamafactory_cli;
};

struct SubmitProgress {
  std::string what;           // "uploading data/train.jsonl", "starting", ...
  int file_index = 0;         // 1-based file being uploaded; 0 for other steps
  int file_count = 0;
  std::uint64_t bytes = 0;    // bytes of this file sent so far
  std::uint64_t total = 0;    // its size
  bool skipped = false;       // unchanged on the remote side: not sent
};
using SubmitProgressFn = std::function<void(const SubmitProgress&)>;

struct SubmitResult {
  RemoteRunRecord record;
  std::string remote_config;     // the rewritten config.yaml as uploaded
  int files_uploaded = 0;
  int files_skipped = 0;
  std::uint64_t bytes_uploaded = 0;
};

// Throws std::invalid_argument for a config that does not load or validate (the diagnostics,
// file:line, in the message) or a local input that is missing; RemoteError / SshError for the
// remote side; std::runtime_error when the engine does not start (its log's last lines quoted).
// Nothing is started when anything before the start fails.
SubmitResult submit_run(const SshSession& session, const SubmitRequest& request,
                        const SubmitProgressFn& progress = {},
                        const NodeConnector& connect_node = {});

// A sweep (config/sweep.h, docs/SWEEPS.md) submitted as one Slurm job array: every point is the base config
// with its values set (after run.overrides), checked against the job's world before anything
// is uploaded; each point gets a run folder of its own, REMOTE_ROOT/SWEEP_ID-NN, with its
// config.yaml and studio-remote.json (sweep_id, sweep_point, job_id "ARRAY_NN"), so that it is
// listed, followed, cancelled and requeued like any submitted run. REMOTE_ROOT/SWEEP_ID holds
// sweep.json (with "remote_runs", the points' run ids), base.yaml and job.sbatch, whose task I
// trains point I in its folder, `parallel` tasks at a time (0: the cluster's limit).
struct SweepSubmitRequest {
  SubmitRequest run;               // the base config, host, engine and `slurm` (required)
  std::vector<std::string> axes;   // "key=v1,v2,...", as `--sweep` gives them
  bool list = false;               // the i-th values together; false: every combination
  int parallel = 0;
};

struct SweepSubmitResult {
  std::string sweep_id;                 // the sweep's folder under remote_root
  std::string job_id;                   // the array's job id
  std::vector<RemoteRunRecord> points;  // in point order; job_id "JOB_I"
  std::vector<std::string> remote_configs;  // each point's config.yaml as uploaded
  int files_uploaded = 0;
  int files_skipped = 0;
  std::uint64_t bytes_uploaded = 0;
};

// Throws as submit_run does; std::invalid_argument lists every invalid point. Nothing is
// uploaded when a point is invalid, and nothing starts when sbatch refuses the script.
SweepSubmitResult submit_sweep(const SshSession& session, const SweepSubmitRequest& request,
                               const SubmitProgressFn& progress = {});

}  // namespace studio::remote
