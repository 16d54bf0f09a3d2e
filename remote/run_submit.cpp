#include "studio/remote/run_submit.h"

#include "studio/config/llamafactory_target.h"

#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <openssl/evp.h>

#include "studio/config/config_io.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/config/sweep.h"
#include "studio/base/atomic_file.h"
#include "studio/config/validate.h"
#include "studio/data/dataset_info.h"
#include "studio/remote/sftp_client.h"
#include "studio/remote/shell_quote.h"
#include "studio/remote/slurm_state.h"
#include "remote_text.h"

namespace studio::remote {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInputsDir = ".inputs";  // under remote_root, shared by its runs
constexpr const char* kSbatchFile = "job.sbatch";
constexpr int kDefaultMasterPort = 29500;

struct Upload {
  fs::path local;
  std::string remote;  // relative to the login directory, or absolute
};

using detail::basename_of;
using detail::join_path;
using detail::last_lines;

std::string sha256_hex(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  }
  return detail::hex_digest(md, len);
}

// Plans the uploads and rewrites the config's local paths to where they will be on the remote
// side. Uploaded folders go to <remote_root>/.inputs/<name>-<hash of the local path>/, shared by
// every run under that root, so submitting again skips what did not change; the config then
// names them relative to the run folder ("../.inputs/..."), the engine's working directory.
class InputPlan {
 public:
  InputPlan(const fs::path& base, std::string remote_root)
      : base_(base), remote_root_(std::move(remote_root)) {}

  const std::vector<Upload>& uploads() const { return uploads_; }
  const std::vector<std::string>& notes() const { return notes_; }
  // Files written on the remote side from text (a rewritten dataset YAML): {text, remote path}.
  const std::vector<std::pair<std::string, std::string>>& texts() const { return texts_; }

  // LLaMA-Factory v1: each local data file or folder the config or its dataset YAML names goes
  // to .inputs like a dataset folder; a dataset YAML is rewritten to name them there and written
  // into the run folder, the engine's working directory.
  void v1_datasets(RunConfig& cfg, const std::string& run_dir) {
    relocate_v1_datasets(
        cfg, base_.string(),
        [&](const std::string& absolute) {
          const fs::path path(absolute);
          const std::string key = folder_key(path);
          if (fs::is_directory(path)) {
            // Every file must really lie in the folder (a link out of it is refused).
            add_tree(path, key, "", &path, absolute);
            return run_relative(key);
          }
          confine(path, path.parent_path(), absolute);  // as a dataset_dir's files are
          add_file(path, key, path.filename().string());
          return run_relative(key) + "/" + path.filename().string();
        },
        [&](const std::string& name, const std::string& text) {
          texts_.push_back({text, join_path(run_dir, name)});
          return name;
        });
  }

  void dataset(RunConfig& cfg) {
    const fs::path dir = local(cfg.dataset_dir);
    if (!fs::is_directory(dir)) {
      if (fs::path(cfg.dataset_dir).is_absolute()) {
        notes_.push_back("dataset_dir " + cfg.dataset_dir + " is not here: used as a remote path");
        return;
      }
      throw std::invalid_argument("dataset_dir '" + cfg.dataset_dir + "' (" + dir.string() +
                                  ") does not exist: give the local folder holding "
                                  "dataset_info.json, or an absolute path on the remote host");
    }
    const std::string key = folder_key(dir);
    add_file(dir / "dataset_info.json", key, "dataset_info.json");
    // A dataset_info.json that does not name the datasets is bad input like any config error.
    auto checked = [](auto&& read) {
      try {
        return read();
      } catch (const std::invalid_argument&) {
        throw;
      } catch (const std::exception& e) {
        throw std::invalid_argument(e.what());
      }
    };
    const auto info = checked([&] { return data::DatasetInfo::read(dir.string()); });
    std::vector<std::string> names = cfg.dataset;
    names.insert(names.end(), cfg.eval_dataset.begin(), cfg.eval_dataset.end());
    for (const std::string& name : names) {
      const data::DatasetAttr attr = checked([&] { return info.find(name); });
      const fs::path rel = fs::path(attr.file_name).lexically_normal();
      if (rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
        throw std::invalid_argument("dataset '" + name + "': file_name '" + attr.file_name +
                                    "' is outside dataset_dir " + dir.string() +
                                    "; only files inside it can be uploaded");
      }
      const fs::path file = dir / rel;
      if (fs::is_directory(file)) {
        add_tree(file, key, rel.string(), &dir, name);
      } else if (fs::is_regular_file(file)) {
        confine(file, dir, name);
        add_file(file, key, rel.string());
      } else {
        throw std::invalid_argument("dataset '" + name + "': " + file.string() +
                                    " (file_name in " + (dir / "dataset_info.json").string() +
                                    ") does not exist");
      }
    }
    cfg.dataset_dir = run_relative(key);
  }

  void model(std::string& path, const char* key_name, bool upload) {
    const fs::path dir = local(path);
    const bool here = fs::is_directory(dir);
    if (upload && here) {
      const std::string key = folder_key(dir);
      add_tree(dir, key, "");
      path = run_relative(key);
      return;
    }
    if (fs::path(path).is_absolute()) {
      notes_.push_back(std::string(key_name) + " " + path + " is used as a remote path" +
                       (here ? " (it exists here too; upload_model sends this copy)" : ""));
      return;
    }
    throw std::invalid_argument(
        std::string(key_name) + " '" + path + "' is relative" +
        (here ? ": it is a folder on this machine; upload it (--upload-model) or give its "
                "absolute path on the remote host"
              : " and not a folder here: give the model's absolute path on the remote host"));
  }

  // A DeepSpeed JSON is small and run-specific: it goes into the run folder itself.
  void deepspeed(std::optional<std::string>& path, const std::string& run_dir) {
    if (!path) return;
    const fs::path file = local(*path);
    if (fs::is_regular_file(file)) {
      uploads_.push_back({file, join_path(run_dir, "deepspeed.json")});
      *path = "deepspeed.json";
    } else if (!fs::path(*path).is_absolute()) {
      throw std::invalid_argument("deepspeed '" + *path + "' (" + file.string() +
                                  ") does not exist here: give the local file or an absolute "
                                  "path on the remote host");
    }
  }

 private:
  fs::path local(const std::string& p) const {
    const fs::path path(p);
    return (path.is_absolute() ? path : base_ / path).lexically_normal();
  }
  std::string folder_key(const fs::path& dir) const {
    const fs::path abs = fs::weakly_canonical(dir);
    std::string name = abs.filename().string();
    for (char& c : name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '-';
    }
    if (name.empty() || name[0] == '.') name = "input" + name;
    return name + "-" + sha256_hex(abs.string()).substr(0, 12);
  }
  std::string remote_dir(const std::string& key) const {
    return join_path(join_path(remote_root_, kInputsDir), key);
  }
  static std::string run_relative(const std::string& key) {
    return std::string("../") + kInputsDir + "/" + key;
  }
  void add_file(const fs::path& file, const std::string& key, const std::string& rel) {
    if (!fs::is_regular_file(file)) {
      throw std::invalid_argument(file.string() + " does not exist or is not a file");
    }
    uploads_.push_back({file, join_path(remote_dir(key), rel)});
  }
  // A file that is a symbolic link (or lies under one) leading out of the dataset folder would
  // upload whatever it leads to, e.g. a key in ~/.ssh: refused, naming both.
  static void confine(const fs::path& file, const fs::path& dataset_dir, const std::string& name) {
    const fs::path real = fs::weakly_canonical(file);
    const fs::path root = fs::weakly_canonical(dataset_dir);
    const fs::path rel = real.lexically_relative(root);
    if (rel.empty() || *rel.begin() == ".." || rel.is_absolute()) {
      throw std::invalid_argument("dataset '" + name + "': " + file.string() + " leads to " +
                                  real.string() + ", outside dataset_dir " + root.string() +
                                  " (a symbolic link); only files inside it can be uploaded");
    }
  }
  // Every regular file under `dir`; with `confined_to`, each must really lie inside that folder
  // (the files of dataset `dataset`).
  void add_tree(const fs::path& dir, const std::string& key, const std::string& rel,
                const fs::path* confined_to = nullptr, const std::string& dataset = {}) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      if (confined_to) confine(entry.path(), *confined_to, dataset);
      files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      const std::string sub = file.lexically_relative(dir).string();
      add_file(file, key, rel.empty() ? sub : join_path(rel, sub));
    }
  }

  fs::path base_;
  std::string remote_root_;
  std::vector<Upload> uploads_;
  std::vector<std::string> notes_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

// Writes `text` to a private local temporary file and uploads it (atomically, like any file).
void upload_text(const SftpClient& sftp, const std::string& text, const std::string& remote) {
  std::string pattern = (fs::temp_directory_path() / "studio-upload-XXXXXX").string();
  const int fd = mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("cannot create a temporary file in " + fs::temp_directory_path().string());
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{pattern};
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write the temporary file " + pattern);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  sftp.upload(pattern, remote);
}

// Fails early, before any upload, when the engine cannot be found on the host.
void require_engine(const SshSession& session, const std::string& engine,
                    const char* what = "the engine", const char* fix = "install studio-train on "
                                                                      "the host or give its path "
                                                                      "(--engine)") {
  const ExecResult r = session.exec(shell_command(
      {"sh", "-c",
       "case $1 in */*) [ -f \"$1\" ] && [ -x \"$1\" ] ;; *) command -v \"$1\" >/dev/null 2>&1 "
       ";; esac",
       "studio-check", engine}));
  if (r.exit_status != 0) {
    throw std::runtime_error(session.where() + ": " + what + " '" + engine +
                             "' is not an executable file there or in its PATH; " + fix);
  }
}

class Uploader {
 public:
  Uploader(const SubmitProgressFn& progress, SubmitResult& result)
      : progress_(progress), result_(result) {}

  void run(const SshSession& session, const std::vector<Upload>& uploads,
           const std::string& prefix) {
    SftpClient sftp(session);
    std::map<std::string, bool> made;
    const int count = static_cast<int>(uploads.size());
    for (int i = 0; i < count; ++i) {
      const Upload& u = uploads[static_cast<std::size_t>(i)];
      const std::string dir = u.remote.substr(0, u.remote.find_last_of('/'));
      if (!made[dir]) {
        sftp.mkdir_p(dir);
        made[dir] = true;
      }
      SubmitProgress p;
      p.what = prefix + "uploading " + u.local.string();
      p.file_index = i + 1;
      p.file_count = count;
      p.total = fs::file_size(u.local);
      if (progress_) progress_(p);
      const UploadResult r = sftp.upload(u.local.string(), u.remote, [&](std::uint64_t sent, std::uint64_t total) {
        p.bytes = sent;
        p.total = total;
        if (progress_) progress_(p);
      });
      if (r.skipped) {
        ++result_.files_skipped;
        p.skipped = true;
        p.bytes = p.total;
        p.what = prefix + "unchanged, skipped " + u.local.string();
        if (progress_) progress_(p);
      } else {
        ++result_.files_uploaded;
        result_.bytes_uploaded += r.bytes;
      }
    }
  }

  void step(const std::string& what) {
    if (!progress_) return;
    SubmitProgress p;
    p.what = what;
    progress_(p);
  }

 private:
  const SubmitProgressFn& progress_;
  SubmitResult& result_;
};

long long start_detached(const SshSession& session, const RemoteRunRecord& record, int node,
                         const LauncherArgs& args) {
  const RemoteRunLayout layout = run_layout(record, node);
  const ExecResult r = session.exec(detached_start_command(layout, record.engine, args));
  if (r.exit_status != 0) {
    const ExecResult log =
        session.exec(shell_command({"tail", "-n", "5", "--", join_path(layout.run_dir, layout.log_file)}));
    throw std::runtime_error(session.where() + ": studio-train did not start for node " +
                             std::to_string(node) + " of run " + record.run_id + " (exit " +
                             std::to_string(r.exit_status) + "): " + last_lines(r.std_err, 3) +
                             (log.std_out.empty() ? "" : "\nits log ends:\n" + last_lines(log.std_out, 5)));
  }
  return parse_start_output(r.std_out);
}

// The world a request runs in and where its config's relative paths resolve.
struct World {
  fs::path config_path;
  fs::path base;
  ValidateOptions vo;
  bool slurm = false;
  int nnodes = 1;
  int nproc = 1;
};

World world_of(const SubmitRequest& request, const NodeConnector& connect_node) {
  World w;
  w.slurm = request.slurm.has_value();
  if (w.slurm) request.slurm->validate();
  w.nnodes = w.slurm ? request.slurm->nodes : 1 + static_cast<int>(request.extra_nodes.size());
  w.nproc = w.slurm ? std::max(1, request.slurm->gpus_per_node) : request.nproc;
  if (w.nproc < 1) throw std::invalid_argument("--nproc " + std::to_string(w.nproc) + ": give 1 or more");
  if (!w.slurm && w.nnodes > 1 && !connect_node) {
    throw std::invalid_argument("a run over several nodes needs a connection to each node");
  }
  w.config_path = fs::absolute(request.config_file);
  w.vo.nproc_per_node = w.nproc;
  w.vo.nnodes = w.nnodes;
  w.base = request.base_dir.empty() ? fs::current_path() : fs::absolute(request.base_dir);
  w.vo.base_dir = w.base.string();
  return w;
}

// The config with `overrides`, checked against the world it will run in, as it is read here.
// `what` names it in the message ("point 01-learning_rate=3e-5 of the sweep").
RunConfig checked_config(const World& w, const SubmitRequest& request,
                         const std::vector<std::string>& overrides, const std::string& what = {}) {
  CheckResult check = check_config_file(w.config_path.string(), w.vo, overrides);
  const std::string name = w.config_path.string() + (what.empty() ? "" : " (" + what + ")");
  if (!check.ok()) {
    throw std::invalid_argument(name + " cannot be submitted:\n" + format_all(check.diagnostics));
  }
  if (!request.llamafactory_cli.empty()) {
    if (const std::string why = llamafactory_refusal(check.config); !why.empty())
      throw std::invalid_argument(name + " cannot be run by LLaMA-Factory:\n" + why);
  }
  return check.config;
}

// A run folder made ready on the host, nothing started: inputs uploaded, config.yaml and
// studio-remote.json written.
struct Staged {
  RemoteRunRecord record;
  RemoteRunLayout layout;
  std::vector<SshSession> others;  // nodes 1..n-1 of a multi-node run without Slurm
};

Staged stage_run(const SshSession& session, const SubmitRequest& request, const World& w,
                 RunConfig cfg, RemoteRunRecord record, Uploader& uploader, SubmitResult& result,
                 const NodeConnector& connect_node, bool check_engine) {
  const bool slurm = w.slurm;
  const int nnodes = w.nnodes;
  const bool lf = !request.llamafactory_cli.empty();
  record.host = request.host;
  record.remote_root = request.remote_root.empty() ? kDefaultRemoteRoot : request.remote_root;
  record.engine = request.engine.empty() ? "studio-train" : request.engine;
  record.kind = slurm ? RemoteRunKind::Slurm : RemoteRunKind::Detached;
  record.nproc = w.nproc;
  record.nnodes = nnodes;
  record.nodes = slurm ? std::vector<std::string>{} : request.extra_nodes;
  record.config_name = w.config_path.filename().string();
  record.submitted = static_cast<double>(std::time(nullptr));
  record.stop_grace_s = static_cast<int>(stop_grace_seconds(cfg, kDefaultCancelGraceSeconds));
  record.llamafactory_cli = request.llamafactory_cli;
  if (!slurm && nnodes > 1) {
    if (!request.master_addr.empty()) {
      record.master_addr = request.master_addr;
    } else {
      std::string error;
      const auto target = parse_ssh_target(request.host.target, error);
      if (!target) throw std::invalid_argument("host '" + request.host.target + "': " + error);
      record.master_addr = target->host;
    }
  }
  Staged staged;
  staged.layout = run_layout(record);
  const RemoteRunLayout& layout = staged.layout;

  InputPlan plan(w.base, record.remote_root);
  if (cfg.is_v1())
    plan.v1_datasets(cfg, record.run_dir());
  else
    plan.dataset(cfg);
  plan.model(cfg.model_name_or_path, "model_name_or_path", request.upload_model);
  if (cfg.ref_model) plan.model(*cfg.ref_model, "ref_model", request.upload_model);
  plan.deepspeed(cfg.deepspeed, record.run_dir());
  cfg.output_dir = layout.output_dir;
  // LLaMA-Factory refuses keys it does not know; it writes into the folder the studio made.
  if (lf) cfg.overwrite_output_dir = true;
  result.remote_config = to_yaml(cfg, lf ? YamlStyle::LlamaFactory : YamlStyle::Minimal);
  for (const std::string& note : plan.notes()) uploader.step(note);

  // Every node gets the inputs (a shared file system makes the later copies no-ops: same size
  // and hash) and its own start; node 0 last writes the record.
  std::vector<SshSession>& others = staged.others;
  for (int node = 1; node < nnodes && !slurm; ++node) {
    uploader.step("connecting to node " + std::to_string(node) + " (" + record.nodes[node - 1] + ")");
    others.push_back(connect_node(record.node_host(node)));
  }
  auto node_session = [&](int node) -> const SshSession& {
    return node == 0 ? session : others[static_cast<std::size_t>(node - 1)];
  };
  for (int node = 0; node < (slurm ? 1 : nnodes) && check_engine; ++node) {
    require_engine(node_session(node), record.engine);
    if (lf)
      require_engine(node_session(node), record.llamafactory_cli, "LLaMA-Factory's llamafactory-cli",
                     "install LLaMA-Factory there (pip install llamafactory) or give its path");
  }
  for (int node = 0; node < (slurm ? 1 : nnodes); ++node) {
    const std::string prefix = nnodes > 1 && !slurm ? "node " + std::to_string(node) + ": " : "";
    const SshSession& s = node_session(node);
    SftpClient(s).mkdir_p(record.run_dir());
    uploader.run(s, plan.uploads(), prefix);
    SftpClient sftp(s);
    for (const auto& [text, remote] : plan.texts()) upload_text(sftp, text, remote);
    upload_text(sftp, result.remote_config, join_path(record.run_dir(), layout.config_file));
    upload_text(sftp, record.to_json(), join_path(record.run_dir(), kRemoteRecordFileName));
  }
  staged.record = std::move(record);
  return staged;
}

}  // namespace

SubmitResult submit_run(const SshSession& session, const SubmitRequest& request,
                        const SubmitProgressFn& progress, const NodeConnector& connect_node) {
  SubmitResult result;
  Uploader uploader(progress, result);
  const World w = world_of(request, connect_node);
  const bool slurm = w.slurm;
  const int nnodes = w.nnodes;
  const int nproc = w.nproc;
  RunConfig cfg = checked_config(w, request, request.overrides);
  RemoteRunRecord proto;
  proto.run_id = make_run_id(request.run_name.empty() ? w.config_path.stem().string() : request.run_name);
  Staged staged = stage_run(session, request, w, std::move(cfg), std::move(proto), uploader, result,
                            connect_node, true);
  RemoteRunRecord& record = staged.record;
  const RemoteRunLayout& layout = staged.layout;
  auto node_session = [&](int node) -> const SshSession& {
    return node == 0 ? session : staged.others[static_cast<std::size_t>(node - 1)];
  };

  if (slurm) {
    SbatchOptions options = *request.slurm;
    if (options.job_name == SbatchOptions{}.job_name) options.job_name = record.run_id;
    options.llamafactory_cli = record.llamafactory_cli;
    options.output_dir = layout.output_dir;
    uploader.step("submitting " + std::string(kSbatchFile) + " with sbatch");
    SftpClient sftp(session);
    upload_text(sftp, sbatch_script(options, record.engine, layout.config_file),
                join_path(record.run_dir(), kSbatchFile));
    const ExecResult r = session.exec(sbatch_submit_command(layout, kSbatchFile));
    if (r.exit_status != 0) {
      throw std::runtime_error(session.where() + ": sbatch refused run " + record.run_id + ": " +
                               last_lines(r.std_err + r.std_out, 3));
    }
    record.job_id = parse_sbatch_output(r.std_out).job_id;
    upload_text(sftp, record.to_json(), join_path(record.run_dir(), kRemoteRecordFileName));
  } else if (nnodes == 1) {
    uploader.step("starting studio-train");
    LauncherArgs args;
    args.nproc = nproc;
    args.llamafactory_cli = record.llamafactory_cli;
    args.output_dir = layout.output_dir;
    start_detached(session, record, 0, args);
  } else {
    const int port = request.master_port > 0 ? request.master_port : kDefaultMasterPort;
    int started = 0;
    try {
      for (int node = 0; node < nnodes; ++node) {
        uploader.step("starting studio-train on node " + std::to_string(node));
        LauncherArgs args;
        args.nproc = nproc;
        args.nnodes = nnodes;
        args.node_rank = node;
        args.master_addr = record.master_addr;
        args.master_port = port;
        args.llamafactory_cli = record.llamafactory_cli;
        args.output_dir = layout.output_dir;
        start_detached(node_session(node), record, node, args);
        ++started;
      }
    } catch (...) {
      // A partial start would hang the started nodes at rendezvous: stop them.
      for (int node = 0; node < started; ++node) {
        node_session(node).exec(cancel_command(run_layout(record, node),
                                               basename_of(record.engine), 2),
                                std::chrono::seconds(30));
      }
      throw;
    }
  }
  result.record = record;
  return result;
}

SweepSubmitResult submit_sweep(const SshSession& session, const SweepSubmitRequest& request,
                               const SubmitProgressFn& progress) {
  const SubmitRequest& base = request.run;
  if (!base.slurm) {
    throw std::invalid_argument(
        "a sweep is submitted as a Slurm job array: give the Slurm options (--slurm); on a host "
        "without Slurm, run `studio-train sweep` there (docs/SWEEPS.md)");
  }
  if (request.parallel < 0)
    throw std::invalid_argument("--parallel " + std::to_string(request.parallel) + ": give 0 (no limit) or more");
  const World w = world_of(base, {});
  SweepSpec spec;
  spec.mode = request.list ? SweepMode::List : SweepMode::Grid;
  for (const std::string& axis : request.axes) spec.axes.push_back(parse_sweep_axis(axis));
  const std::vector<SweepPoint> points = expand_sweep(spec);
  if (static_cast<int>(points.size()) > kMaxArraySize) {
    throw std::invalid_argument("the sweep has " + std::to_string(points.size()) +
                                " points, more than a Slurm job array holds by default (" +
                                std::to_string(kMaxArraySize) + "): sweep fewer values");
  }
  // Every point checked against the world it runs in before anything is uploaded: one invalid
  // point refuses the sweep, each named.
  std::vector<RunConfig> configs;
  std::string problems;
  for (const SweepPoint& p : points) {
    std::vector<std::string> overrides = base.overrides;
    overrides.insert(overrides.end(), p.sets.begin(), p.sets.end());
    try {
      configs.push_back(checked_config(w, base, overrides, "sweep point " + p.name));
    } catch (const std::invalid_argument& e) {
      problems += std::string(e.what()) + "\n";
    }
  }
  if (!problems.empty()) {
    throw std::invalid_argument(problems +
                                "nothing was submitted: change the swept values or the base "
                                "config so that every point is valid");
  }

  SweepSubmitResult out;
  SubmitResult counts;
  Uploader uploader(progress, counts);
  const std::string stem = base.run_name.empty() ? w.config_path.stem().string() : base.run_name;
  out.sweep_id = make_run_id(stem);
  const int width = static_cast<int>(points.front().name.find('-'));  // the names' NN- digits
  const std::string prefix = out.sweep_id + "-";
  for (std::size_t i = 0; i < points.size(); ++i) {
    RemoteRunRecord proto;
    proto.run_id = array_task_dir(prefix, width, static_cast<int>(i));
    proto.sweep_id = out.sweep_id;
    proto.sweep_point = points[i].name;
    proto.sweep_name = stem;
    for (const SweepAxis& a : spec.axes) proto.sweep_keys.push_back(a.key);
    uploader.step("point " + points[i].name + ": run folder " + proto.run_id);
    SubmitResult point_result;
    Uploader point_uploader(progress, point_result);
    Staged staged = stage_run(session, base, w, configs[i], std::move(proto), point_uploader,
                              point_result, {}, i == 0);
    counts.files_uploaded += point_result.files_uploaded;
    counts.files_skipped += point_result.files_skipped;
    counts.bytes_uploaded += point_result.bytes_uploaded;
    out.points.push_back(std::move(staged.record));
    out.remote_configs.push_back(std::move(point_result.remote_config));
  }

  // The sweep's own folder: what it is (sweep.json with each point's run id), the base config
  // as given, and the array's job script; sbatch runs there.
  const std::string root = base.remote_root.empty() ? kDefaultRemoteRoot : base.remote_root;
  const std::string sweep_dir = join_path(root, out.sweep_id);
  SftpClient sftp(session);
  sftp.mkdir_p(sweep_dir);
  SweepFile file;
  file.name = stem;
  file.spec = spec;
  file.nproc = w.nproc;
  file.points = points;
  nlohmann::json j = sweep_to_json(file);
  j["remote_runs"] = nlohmann::json::array();
  for (const RemoteRunRecord& r : out.points) j["remote_runs"].push_back(r.run_id);
  upload_text(sftp, j.dump(2) + "\n", join_path(sweep_dir, kSweepFileName));
  std::string base_text, error;
  if (!read_file(w.config_path.string(), base_text, error)) throw std::runtime_error(error);
  upload_text(sftp, base_text, join_path(sweep_dir, "base.yaml"));

  SbatchOptions options = *base.slurm;
  if (options.job_name == SbatchOptions{}.job_name) options.job_name = out.sweep_id;
  options.llamafactory_cli = base.llamafactory_cli;
  options.output_dir = kRemoteOutputDir;
  options.array_size = static_cast<int>(points.size());
  options.array_parallel = request.parallel;
  options.array_dir_prefix = prefix;
  options.array_index_width = width;
  uploader.step("submitting " + std::string(kSbatchFile) + " with sbatch (" +
                std::to_string(points.size()) + " array tasks)");
  upload_text(sftp, sbatch_script(options, out.points.front().engine, "config.yaml"),
              join_path(sweep_dir, kSbatchFile));
  const ExecResult r =
      session.exec(sbatch_array_submit_command(sweep_dir, prefix, width, kSbatchFile));
  if (r.exit_status != 0) {
    throw std::runtime_error(session.where() + ": sbatch refused sweep " + out.sweep_id + ": " +
                             last_lines(r.std_err + r.std_out, 3) +
                             " (its point folders stay under " + root + ")");
  }
  out.job_id = parse_sbatch_output(r.std_out).job_id;
  for (RemoteRunRecord& rec : out.points) {
    const std::size_t index = static_cast<std::size_t>(&rec - out.points.data());
    rec.job_id = out.job_id + "_" + std::to_string(index);
    upload_text(sftp, rec.to_json(), join_path(rec.run_dir(), kRemoteRecordFileName));
  }
  out.files_uploaded = counts.files_uploaded;
  out.files_skipped = counts.files_skipped;
  out.bytes_uploaded = counts.bytes_uploaded;
  return out;
}

}  // namespace studio::remote
