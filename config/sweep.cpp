#include "studio/config/sweep.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "studio/base/atomic_file.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"

namespace studio {

namespace {

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

}  // namespace

SweepAxis parse_sweep_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || trim(text.substr(0, eq)).empty())
    throw std::invalid_argument("sweep axis '" + text +
                                "': expected key=value1,value2,... (e.g. learning_rate=1e-4,3e-4)");
  SweepAxis axis;
  axis.key = trim(text.substr(0, eq));
  const std::string rest = text.substr(eq + 1);
  std::string value;
  int depth = 0;
  char quote = 0;
  auto flush = [&] {
    const std::string v = trim(value);
    if (v.empty())
      throw std::invalid_argument("sweep axis '" + text + "': an empty value (two commas in a row, "
                                  "or a comma at an end)");
    axis.values.push_back(v);
    value.clear();
  };
  for (char c : rest) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      flush();
      continue;
    }
    value += c;
  }
  flush();
  return axis;
}

std::string sweep_point_name(int index, std::size_t count, const std::vector<std::string>& sets) {
  const int width = count > 100 ? (count > 1000 ? 4 : 3) : 2;
  std::string number = std::to_string(index);
  number.insert(0, static_cast<std::size_t>(std::max(0, width - static_cast<int>(number.size()))), '0');
  std::string name = number + "-";
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if (i) name += ',';
    for (char c : sets[i]) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '=' || c == '.' || c == '-' || c == '_' || c == '+';
      name += plain ? c : '_';
    }
  }
  if (name.size() > 120) name.resize(120);
  return name;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec) {
  if (spec.axes.empty()) throw std::invalid_argument("a sweep needs at least one key to vary");
  std::set<std::string> keys;
  std::size_t count = spec.mode == SweepMode::Grid ? 1 : spec.axes.front().values.size();
  for (const SweepAxis& a : spec.axes) {
    if (!keys.insert(a.key).second)
      throw std::invalid_argument("sweep key '" + a.key + "' is given twice: give its values once");
    if (a.values.empty()) throw std::invalid_argument("sweep key '" + a.key + "' has no values");
    if (spec.mode == SweepMode::List && a.values.size() != count)
      throw std::invalid_argument(
          "a list sweep takes the i-th value of every key together, but '" + spec.axes.front().key +
          "' has " + std::to_string(count) + " values and '" + a.key + "' " +
          std::to_string(a.values.size()) + ": give each key as many, or sweep the grid");
    if (spec.mode == SweepMode::Grid) {
      count *= a.values.size();
      if (count > kMaxSweepPoints) break;
    }
  }
  if (count > kMaxSweepPoints)
    throw std::invalid_argument("the sweep has more than " + std::to_string(kMaxSweepPoints) +
                                " points: sweep fewer values");
  std::vector<SweepPoint> points;
  for (std::size_t i = 0; i < count; ++i) {
    SweepPoint p;
    p.index = static_cast<int>(i);
    std::size_t rest = i;
    std::vector<std::size_t> pick(spec.axes.size());
    for (std::size_t a = spec.axes.size(); a-- > 0;) {
      const std::size_t n = spec.axes[a].values.size();
      pick[a] = spec.mode == SweepMode::Grid ? rest % n : i;
      if (spec.mode == SweepMode::Grid) rest /= n;
    }
    for (std::size_t a = 0; a < spec.axes.size(); ++a)
      p.sets.push_back(spec.axes[a].key + "=" + spec.axes[a].values[pick[a]]);
    p.name = sweep_point_name(p.index, count, p.sets);
    points.push_back(std::move(p));
  }
  return points;
}

SweepPointConfig sweep_point_config(const RunConfig& base, const SweepPoint& point,
                                    const std::string& output_dir, const ValidateOptions& validate) {
  SweepPointConfig out;
  out.config = base;
  std::vector<std::string> sets = point.sets;
  sets.push_back("output_dir=" + output_dir);
  out.diagnostics = apply_overrides(out.config, sets);
  if (!has_errors(out.diagnostics))
    for (const Diagnostic& d : validate_config(out.config, validate)) out.diagnostics.push_back(d);
  return out;
}

nlohmann::json sweep_to_json(const SweepFile& sweep) {
  nlohmann::json j;
  j["name"] = sweep.name;
  j["mode"] = sweep.spec.mode == SweepMode::Grid ? "grid" : "list";
  j["nproc"] = sweep.nproc;
  j["axes"] = nlohmann::json::array();
  for (const SweepAxis& a : sweep.spec.axes) j["axes"].push_back({{"key", a.key}, {"values", a.values}});
  j["points"] = nlohmann::json::array();
  for (const SweepPoint& p : sweep.points)
    j["points"].push_back({{"index", p.index}, {"name", p.name}, {"sets", p.sets}});
  return j;
}

SweepFile read_sweep(const std::string& sweep_dir) {
  const std::string path = sweep_dir + "/" + kSweepFileName;
  std::string text, error;
  if (!read_file(path, text, error)) throw std::runtime_error(error);
  SweepFile out;
  try {
    const auto j = nlohmann::json::parse(text);
    out.name = j.at("name").get<std::string>();
    const std::string mode = j.at("mode").get<std::string>();
    if (mode != "grid" && mode != "list") throw std::runtime_error("mode '" + mode + "' is not grid or list");
    out.spec.mode = mode == "grid" ? SweepMode::Grid : SweepMode::List;
    out.nproc = j.value("nproc", 1);
    if (out.nproc < 1) throw std::runtime_error("nproc " + std::to_string(out.nproc) + " is not positive");
    for (const auto& a : j.at("axes"))
      out.spec.axes.push_back({a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    for (const auto& p : j.at("points"))
      out.points.push_back({p.at("index").get<int>(), p.at("sets").get<std::vector<std::string>>(),
                            p.at("name").get<std::string>()});
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not a sweep file as studio-train writes it: " + e.what());
  }
  return out;
}

}  // namespace studio
