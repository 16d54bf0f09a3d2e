#include "studio/ui/runs/nvidia_smi.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace studio {

const std::vector<std::string>& nvidia_smi_query_args() {
  static const std::vector<std::string> args = {
      "--query-gpu=index,memory.used,memory.total,utilization.gpu,power.draw,power.limit,name",
      "--format=csv,noheader,nounits"};
  return args;
}

namespace {

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return {};
  const auto b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

double number(const std::string& field) {
  const std::string t = trim(field);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  return !t.empty() && end != t.c_str() && *end == '\0' ? v : kNoValue;
}

}  // namespace

bool parse_nvidia_smi(const std::string& text, std::vector<GpuMemory>& out, std::string& error) {
  out.clear();
  std::istringstream in(text);
  std::string line;
  int number_of_line = 0;
  while (std::getline(in, line)) {
    ++number_of_line;
    if (trim(line).empty()) continue;
    std::vector<std::string> f;
    std::size_t start = 0;
    for (int i = 0; i < 6; ++i) {  // the name (last) may itself hold commas
      const std::size_t comma = line.find(',', start);
      if (comma == std::string::npos) break;
      f.push_back(line.substr(start, comma - start));
      start = comma + 1;
    }
    f.push_back(line.substr(start));
    if (f.size() != 7) {
      error = "nvidia-smi line " + std::to_string(number_of_line) + " has " +
              std::to_string(f.size()) + " fields, 7 expected: " + line.substr(0, 200);
      return false;
    }
    const double index = number(f[0]);
    if (std::isnan(index)) {
      error = "nvidia-smi line " + std::to_string(number_of_line) + ": the GPU index '" +
              trim(f[0]) + "' is not a number";
      return false;
    }
    GpuMemory g;
    g.rank = g.device = static_cast<int>(index);
    g.allocated_mib = number(f[1]);
    g.total_mib = number(f[2]);
    g.util_percent = number(f[3]);
    g.power_w = number(f[4]);
    g.power_limit_w = number(f[5]);
    out.push_back(g);
  }
  if (out.empty()) {
    error = "nvidia-smi listed no GPU";
    return false;
  }
  return true;
}

}  // namespace studio
