#include "studio/remote/host_inventory.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <stdexcept>

#include "studio/remote/shell_quote.h"

namespace studio::remote {
namespace {

constexpr const char* kSectionMark = "@@studio-inventory:";

// The probe. `$1` is the engine. Each section starts on a line of its own (the leading newline
// protects it from a tool whose output lacks a final newline). `run` keeps a tool's stdout as
// is, tags each stderr line "@@err " and ends with "@@exit N", so warnings on stderr never mix
// into the data lines and the exit status survives the pipe through sed. stdin is /dev/null so
// nothing waits for input.
constexpr const char* kScript = R"sh(exec </dev/null
section() { printf '\n@@studio-inventory:%s\n' "$1"; }
run() { { { "$@" 2>&1 1>&3 3>&-; printf '@@exit %s\n' "$?" >&3; } | sed 's/^/@@err /'; } 3>&1; }
section hostname; hostname 2>/dev/null || uname -n
section os; uname -sr
section cpus; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN
section meminfo; grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
section gpus
if command -v nvidia-smi >/dev/null 2>&1; then
  run nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits
else
  echo '@@missing nvidia-smi not found in PATH'
fi
section engine
e=$1
case $e in '~/'*) e=$HOME/${e#'~/'} ;; esac
case $e in
  /*) where=": no executable file at $e" ;;
  */*) e=$PWD/$e; where=": no executable file at $e" ;;
  *) where=" in PATH ($PATH)"; e=$(command -v "$e" 2>/dev/null) ;;
esac
case $e in /*) [ -f "$e" ] && [ -x "$e" ] || e= ;; *) e= ;; esac
if [ -n "$e" ]; then
  printf '@@path %s\n' "$e"
  run "$e" --version
else
  printf '@@missing %s not found%s\n' "$1" "$where"
fi
section slurm
if command -v sinfo >/dev/null 2>&1; then
  run sinfo -h -o '%P|%a|%D|%G|%l'
else
  echo '@@missing sinfo not found in PATH'
fi
section end
)sh";

// The engine's first --version line: "studio-train X.Y.Z" (app/studio_train_main.cpp).
constexpr const char* kEngineBanner = "studio-train ";

// LibTorch CUDA initialisation on a many-GPU node and nvidia-smi both take seconds.
constexpr std::chrono::seconds kProbeTimeout{60};

std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> fields_of(const std::string& line, char sep) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  std::string field;
  while (std::getline(in, field, sep)) fields.push_back(trimmed(field));
  if (!line.empty() && line.back() == sep) fields.emplace_back();
  return fields;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// A whole non-negative number, or -1.
long long number_or_negative(const std::string& text) {
  if (text.empty() || text.size() > 18 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(text);
}

std::string joined(const std::vector<std::string>& lines, const char* sep) {
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : sep) + line;
  return text;
}

// One tool's section as `run` (or a "@@missing" line) printed it.
struct ToolOutput {
  std::string missing;  // the "@@missing" text; then nothing else is set
  std::string path;     // "@@path"
  int exit_status = -1;
  std::vector<std::string> out;
  std::vector<std::string> err;

  // What went wrong, for a note: the tool's stderr, or its stdout when stderr is empty
  // (nvidia-smi reports driver problems on stdout).
  std::string failure() const {
    const std::string text = joined(err.empty() ? out : err, " / ");
    return "exit status " + std::to_string(exit_status) + (text.empty() ? "" : ": " + text);
  }
};

ToolOutput read_tool(const std::string& section, const std::vector<std::string>& lines) {
  ToolOutput tool;
  bool exited = false;
  for (const std::string& line : lines) {
    if (starts_with(line, "@@missing ")) {
      tool.missing = line.substr(10);
      return tool;
    }
    if (starts_with(line, "@@path ")) {
      tool.path = line.substr(7);
    } else if (starts_with(line, "@@err ")) {
      tool.err.push_back(line.substr(6));
    } else if (starts_with(line, "@@exit ")) {
      tool.exit_status = static_cast<int>(number_or_negative(line.substr(7)));
      exited = true;
    } else {
      tool.out.push_back(line);
    }
  }
  if (!exited)
    throw std::runtime_error("host inventory: section '" + section +
                             "' has no exit status (output cut short?)");
  return tool;
}

// Sections by name, each with its non-empty lines. Text before the first section (a login
// banner from the remote shell's startup files) is skipped.
std::map<std::string, std::vector<std::string>> split_sections(const std::string& output) {
  std::map<std::string, std::vector<std::string>> sections;
  std::vector<std::string>* current = nullptr;
  for (const std::string& line : nonempty_lines(output)) {
    if (starts_with(line, kSectionMark)) {
      current = &sections[line.substr(std::string(kSectionMark).size())];
    } else if (current != nullptr) {
      current->push_back(line);
    }
  }
  return sections;
}

const std::vector<std::string>& section(
    const std::map<std::string, std::vector<std::string>>& sections, const std::string& name) {
  const auto it = sections.find(name);
  if (it == sections.end())
    throw std::runtime_error("host inventory: the output has no '" + name +
                             "' section (not the probe's output, or cut short)");
  return it->second;
}

std::string first_line(const std::map<std::string, std::vector<std::string>>& sections,
                       const std::string& name) {
  const auto& lines = section(sections, name);
  if (lines.empty()) throw std::runtime_error("host inventory: section '" + name + "' is empty");
  return lines.front();
}

void read_meminfo(const std::vector<std::string>& lines, HostInventory& inv) {
  for (const std::string& line : lines) {
    const auto colon = line.find(':');
    std::istringstream value(colon == std::string::npos ? std::string() : line.substr(colon + 1));
    long long kib = -1;
    std::string unit;
    value >> kib >> unit;
    if (colon == std::string::npos || kib < 0 || unit != "kB")
      throw std::runtime_error("host inventory: meminfo line '" + line + "' is not 'Name: N kB'");
    (starts_with(line, "MemTotal:") ? inv.mem_total_kib : inv.mem_available_kib) = kib;
  }
  if (inv.mem_total_kib <= 0)
    throw std::runtime_error("host inventory: /proc/meminfo has no MemTotal");
}

void read_gpus(const ToolOutput& tool, HostInventory& inv) {
  if (!tool.missing.empty()) {
    inv.gpu_note = "no GPUs: " + tool.missing;
  } else if (tool.exit_status != 0) {
    inv.gpu_note = "no GPUs: nvidia-smi failed, " + tool.failure();
  } else {
    inv.gpus = parse_nvidia_smi_gpus(joined(tool.out, "\n"));
    if (inv.gpus.empty()) inv.gpu_note = "no GPUs: nvidia-smi lists none";
  }
}

void read_engine(const ToolOutput& tool, HostInventory& inv) {
  if (!tool.missing.empty()) {
    inv.engine_note = tool.missing;
    return;
  }
  inv.engine_path = tool.path;
  if (tool.exit_status != 0) {
    inv.engine_note = tool.path + " --version failed, " + tool.failure();
    return;
  }
  const std::string first = tool.out.empty() ? std::string() : tool.out.front();
  const std::string version = starts_with(first, kEngineBanner)
                                  ? trimmed(first.substr(std::string(kEngineBanner).size()))
                                  : std::string();
  if (version.empty()) {
    inv.engine_note = tool.path + " --version printed '" + first +
                      "', not \"studio-train VERSION\": is it the studio's engine?";
    return;
  }
  inv.engine_found = true;
  inv.engine_version = version;
  inv.engine_details = joined({tool.out.begin() + 1, tool.out.end()}, "\n");
}

void read_slurm(const ToolOutput& tool, HostInventory& inv) {
  if (!tool.missing.empty()) {
    inv.slurm_note = tool.missing;
  } else if (tool.exit_status != 0) {
    inv.slurm_note = "sinfo failed, " + tool.failure();
  } else {
    inv.slurm = true;
    inv.partitions = parse_sinfo_partitions(joined(tool.out, "\n"));
  }
}

}  // namespace

std::string inventory_command(const std::string& engine) {
  if (engine.empty() || engine.front() == '-')
    throw std::invalid_argument("engine '" + engine +
                                "': give a path or a command name that does not start with '-'");
  return shell_join({"sh", "-c", kScript, "studio-inventory", engine});
}

std::vector<GpuInfo> parse_nvidia_smi_gpus(const std::string& output) {
  std::vector<GpuInfo> gpus;
  for (const std::string& line : nonempty_lines(output)) {
    std::vector<std::string> f = fields_of(line, ',');
    // Memory is "[N/A]" on some partitioned (MIG) devices: shown as 0.
    const auto mib = [](const std::string& text) {
      return text == "[N/A]" ? 0 : number_or_negative(text);
    };
    if (f.size() < 4 || number_or_negative(f.front()) < 0 || mib(f[f.size() - 2]) < 0 ||
        mib(f.back()) < 0)
      throw std::runtime_error("nvidia-smi line '" + line +
                               "' is not 'index, name, memory.total, memory.used' in MiB");
    GpuInfo gpu;
    gpu.index = static_cast<int>(number_or_negative(f.front()));
    gpu.name = joined({f.begin() + 1, f.end() - 2}, ", ");  // a name may hold commas
    gpu.memory_total_mib = mib(f[f.size() - 2]);
    gpu.memory_used_mib = mib(f.back());
    gpus.push_back(gpu);
  }
  return gpus;
}

std::vector<SlurmPartition> parse_sinfo_partitions(const std::string& output) {
  std::vector<SlurmPartition> partitions;
  for (const std::string& line : nonempty_lines(output)) {
    const std::vector<std::string> f = fields_of(line, '|');
    const long long nodes = f.size() == 5 ? number_or_negative(f[2]) : -1;
    if (nodes < 0 || f[0].empty())
      throw std::runtime_error("sinfo line '" + line +
                               "' is not 'partition|availability|nodes|gres|time limit'");
    SlurmPartition p;
    p.is_default = f[0].back() == '*';
    p.name = p.is_default ? f[0].substr(0, f[0].size() - 1) : f[0];
    p.availability = f[1];
    p.nodes = static_cast<int>(nodes);
    p.gres = f[3] == "(null)" ? std::string() : f[3];
    p.time_limit = f[4];
    auto same = std::find_if(partitions.begin(), partitions.end(),
                             [&](const SlurmPartition& q) { return q.name == p.name; });
    if (same == partitions.end()) {
      partitions.push_back(p);
      continue;
    }
    same->nodes += p.nodes;
    same->is_default = same->is_default || p.is_default;
    if (!p.gres.empty() && same->gres.find(p.gres) == std::string::npos)
      same->gres += (same->gres.empty() ? "" : ", ") + p.gres;
  }
  return partitions;
}

HostInventory parse_inventory_output(const std::string& output) {
  const auto sections = split_sections(output);
  section(sections, "end");
  HostInventory inv;
  inv.hostname = first_line(sections, "hostname");
  inv.os = first_line(sections, "os");
  const std::string cpus = first_line(sections, "cpus");
  inv.cpu_count = static_cast<int>(std::min(number_or_negative(cpus), 1LL << 30));
  if (inv.cpu_count <= 0)
    throw std::runtime_error("host inventory: CPU count '" + cpus + "' is not a positive number");
  read_meminfo(section(sections, "meminfo"), inv);
  read_gpus(read_tool("gpus", section(sections, "gpus")), inv);
  read_engine(read_tool("engine", section(sections, "engine")), inv);
  read_slurm(read_tool("slurm", section(sections, "slurm")), inv);
  return inv;
}

HostInventory probe_inventory(const SshSession& session, const std::string& engine) {
  const ExecResult result =
      session.exec(inventory_command(engine),
                   std::max<std::chrono::milliseconds>(
                       kProbeTimeout, std::chrono::seconds(session.operation_timeout_s())));
  if (result.exit_status != 0)
    throw std::runtime_error(session.where() + ": the host inventory script failed (exit status " +
                             std::to_string(result.exit_status) + "): " + result.std_err);
  try {
    return parse_inventory_output(result.std_out);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(session.where() + ": " + e.what());
  }
}

}  // namespace studio::remote
