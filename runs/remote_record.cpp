#include "studio/runs/remote_record.h"

#include <regex>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "studio/base/whole_number.h"

namespace studio {
namespace {

using nlohmann::json;

// DIR/NAME for remote (POSIX) paths, as run_file joins them; DIR empty gives NAME.
std::string join_path(const std::string& dir, const std::string& name) {
  return run_file(dir, name.c_str());
}

}  // namespace

const char* to_string(RemoteRunKind kind) {
  switch (kind) {
    case RemoteRunKind::Slurm:
      return "slurm";
    case RemoteRunKind::Folder:
      return "folder";
    case RemoteRunKind::Detached:
      break;
  }
  return "detached";
}

bool is_valid_run_id(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 200 || run_id[0] == '.' || run_id[0] == '-') return false;
  return run_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
         std::string::npos;
}

void require_job_id(const std::string& job_id) {
  static const std::regex kJobId("[0-9]+(_[0-9]+)?");
  if (!std::regex_match(job_id, kJobId)) {
    throw std::invalid_argument("Slurm job id '" + job_id +
                                "' is not a job id such as 1234 or 1234_7");
  }
}

std::string RemoteRunRecord::run_dir() const {
  return kind == RemoteRunKind::Folder ? folder : join_path(remote_root, run_id);
}

std::string RemoteRunRecord::log_file(int node_rank) const {
  if (kind == RemoteRunKind::Folder)
    return folder_events == kTrainerLogFileName ? kLlamaFactoryLogFileName : kTrainLogFileName;
  if (node_rank > 0) return "train." + std::to_string(node_rank) + ".log";
  return kTrainLogFileName;
}

std::string RemoteRunRecord::pid_file(int node_rank) const {
  if (kind != RemoteRunKind::Folder && node_rank > 0)
    return "train." + std::to_string(node_rank) + ".pid";
  return "train.pid";
}

std::string RemoteRunRecord::output_dir() const {
  return kind == RemoteRunKind::Folder ? "." : kRemoteOutputDir;
}

RemoteHostRef RemoteRunRecord::node_host(int node_rank) const {
  if (node_rank == 0) return host;
  if (node_rank < 0 || node_rank > static_cast<int>(nodes.size())) {
    throw std::out_of_range("run " + run_id + " has no node " + std::to_string(node_rank));
  }
  RemoteHostRef node = host;
  node.target = nodes[static_cast<std::size_t>(node_rank - 1)];
  return node;
}

std::string RemoteRunRecord::events_file_name() const {
  if (kind == RemoteRunKind::Folder) return folder_events;
  return llamafactory_cli.empty() ? kEventsFileName : kTrainerLogFileName;
}

std::string RemoteRunRecord::events_path() const {
  if (kind == RemoteRunKind::Folder) return join_path(folder, folder_events);
  return join_path(run_dir(), join_path(kRemoteOutputDir, events_file_name()));
}

std::string RemoteRunRecord::status_path() const {
  if (kind == RemoteRunKind::Folder) return join_path(folder, kStatusFileName);
  return join_path(run_dir(), studio::status_path(kRemoteOutputDir));
}

std::string RemoteRunRecord::log_path() const { return join_path(run_dir(), log_file()); }

std::string RemoteRunRecord::to_json() const {
  json j{{"version", version},
         {"run_id", run_id},
         {"host", {{"target", host.target},
                   {"identity_file", host.identity_file},
                   {"known_hosts_file", host.known_hosts_file},
                   {"ssh_config_file", host.ssh_config_file}}},
         {"remote_root", remote_root},
         {"engine", engine},
         {"kind", to_string(kind)},
         {"nproc", nproc},
         {"nnodes", nnodes},
         {"nodes", nodes},
         {"master_addr", master_addr},
         {"job_id", job_id},
         {"config_name", config_name},
         {"submitted", submitted},
         {"stop_grace_s", stop_grace_s}};
  if (!llamafactory_cli.empty()) j["llamafactory_cli"] = llamafactory_cli;
  if (!sweep_id.empty()) {
    j["sweep_id"] = sweep_id;
    j["sweep_point"] = sweep_point;
    j["sweep_name"] = sweep_name;
    j["sweep_keys"] = sweep_keys;
  }
  if (kind == RemoteRunKind::Folder) {
    j["folder"] = folder;
    j["folder_events"] = folder_events;
  }
  return j.dump(2) + "\n";
}

RemoteRunRecord RemoteRunRecord::from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers too large for a double
    throw std::invalid_argument(where + ": not a run record (" + std::string(e.what()) + ")");
  }
  RemoteRunRecord r;
  std::string key;
  try {
    if (!j.is_object()) throw std::invalid_argument("not a JSON object");
    auto get = [&](const json& obj, const char* name, auto& out) {
      key = name;
      if (!obj.contains(name)) throw std::invalid_argument("missing");
      if constexpr (std::is_same_v<std::decay_t<decltype(out)>, int>) {
        // get_to would cut 4294967304 to 8.
        if (std::string problem = json_whole(obj.at(name), out); !problem.empty())
          throw std::invalid_argument(problem);
      } else {
        obj.at(name).get_to(out);
      }
    };
    get(j, "version", r.version);
    if (r.version != 1) {
      throw std::invalid_argument("version " + std::to_string(r.version) +
                                  " is newer than this studio reads (1); update the studio");
    }
    get(j, "run_id", r.run_id);
    if (!is_valid_run_id(r.run_id)) throw std::invalid_argument("'" + r.run_id + "' is not a run id");
    key = "host";
    const json& host = j.at("host");
    get(host, "target", r.host.target);
    get(host, "identity_file", r.host.identity_file);
    get(host, "known_hosts_file", r.host.known_hosts_file);
    get(host, "ssh_config_file", r.host.ssh_config_file);
    get(j, "remote_root", r.remote_root);
    get(j, "engine", r.engine);
    std::string kind;
    get(j, "kind", kind);
    if (kind == "slurm") {
      r.kind = RemoteRunKind::Slurm;
    } else if (kind == "detached") {
      r.kind = RemoteRunKind::Detached;
    } else if (kind == "folder") {
      r.kind = RemoteRunKind::Folder;
    } else {
      throw std::invalid_argument("'" + kind + "' is not detached, slurm or folder");
    }
    get(j, "nproc", r.nproc);
    get(j, "nnodes", r.nnodes);
    get(j, "nodes", r.nodes);
    get(j, "master_addr", r.master_addr);
    get(j, "job_id", r.job_id);
    get(j, "config_name", r.config_name);
    get(j, "submitted", r.submitted);
    if (j.contains("stop_grace_s")) {
      get(j, "stop_grace_s", r.stop_grace_s);
      if (r.stop_grace_s < 0) throw std::invalid_argument("must not be negative");
    }
    if (j.contains("llamafactory_cli")) get(j, "llamafactory_cli", r.llamafactory_cli);
    if (j.contains("sweep_id")) {
      get(j, "sweep_id", r.sweep_id);
      if (!is_valid_run_id(r.sweep_id)) throw std::invalid_argument("'" + r.sweep_id + "' is not a folder name");
      get(j, "sweep_point", r.sweep_point);
      get(j, "sweep_name", r.sweep_name);
      get(j, "sweep_keys", r.sweep_keys);
    }
    if (r.kind == RemoteRunKind::Folder) {
      get(j, "folder", r.folder);
      if (r.folder.empty()) throw std::invalid_argument("empty: the folder followed is needed");
      get(j, "folder_events", r.folder_events);
      if (r.folder_events != kEventsFileName &&
          r.folder_events != kTrainerLogFileName)
        throw std::invalid_argument("'" + r.folder_events + "' is not " +
                                    kEventsFileName + " or " + kTrainerLogFileName);
    }
    if (r.kind == RemoteRunKind::Slurm && !r.job_id.empty()) {
      key = "job_id";
      require_job_id(r.job_id);
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": run record key '" + key + "': " + e.what());
  }
  return r;
}

}  // namespace studio
