#include "studio/trainer/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/base/whole_number.h"
#include "studio/trainer/hf_checkpoint.h"

namespace fs = std::filesystem;

namespace studio::trainer {
namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kRngFile = "rng_state.pt";

nlohmann::json to_json(const TrainerState& s) {
  return {{"global_step", s.global_step},   {"total_steps", s.total_steps},
          {"epoch", s.epoch()},             {"data_epoch", s.data_epoch},
          {"step_in_epoch", s.step_in_epoch}, {"steps_per_epoch", s.steps_per_epoch},
          {"seed", s.seed},                 {"tokens_seen", s.tokens_seen}};
}

TrainerState from_json(const nlohmann::json& j, const std::string& path) {
  TrainerState s;
  auto read = [&](const char* key, int64_t& into, bool required = true) {
    const auto it = j.find(key);
    std::string problem = it == j.end() ? (required ? "missing" : "") : json_whole(*it, into);
    if (!problem.empty())
      throw std::runtime_error(path + ": " + key + ": " + problem +
                               " (the checkpoint is incomplete: resume from an earlier one)");
  };
  read("global_step", s.global_step);
  read("total_steps", s.total_steps);
  read("data_epoch", s.data_epoch);
  read("step_in_epoch", s.step_in_epoch);
  read("steps_per_epoch", s.steps_per_epoch);
  int64_t seed = 0;
  read("seed", seed);  // the config's seed: 0 to int64's largest
  s.seed = static_cast<uint64_t>(seed);
  read("tokens_seen", s.tokens_seen, false);
  return s;
}

int64_t step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  const std::string prefix = "checkpoint-";
  if (name.rfind(prefix, 0) != 0) return -1;
  try {
    size_t used = 0;
    const long long v = std::stoll(name.substr(prefix.size()), &used);
    return used == name.size() - prefix.size() ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

double TrainerState::epoch() const {
  return static_cast<double>(data_epoch) +
         static_cast<double>(step_in_epoch) / static_cast<double>(std::max<int64_t>(1, steps_per_epoch));
}

std::string checkpoint_name(int64_t step) { return "checkpoint-" + std::to_string(step); }

std::string checkpoint_staging_dir(const std::string& output_dir, int64_t step) {
  return (fs::path(output_dir) / ("." + checkpoint_name(step) + ".saving")).string();
}

void prepare_checkpoint(const std::string& staging) {
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec)
    throw std::runtime_error("cannot create the checkpoint staging folder " + staging + ": " +
                             ec.message());
}

std::string commit_checkpoint(const std::string& output_dir, const std::string& staging,
                              const TrainerState& state) {
  const fs::path final_dir = fs::path(output_dir) / checkpoint_name(state.global_step);
  try {
    torch::save(at::detail::getDefaultCPUGenerator().get_state(),
                (fs::path(staging) / kRngFile).string());
    // The state file goes last: its presence marks a complete checkpoint.
    const std::string err = write_file_atomic((fs::path(staging) / kStateFile).string(),
                                              to_json(state).dump(2) + "\n");
    if (!err.empty()) throw std::runtime_error(err);
    if (fs::exists(final_dir)) fs::remove_all(final_dir);
    fs::rename(staging, final_dir);
  } catch (const std::exception& e) {
    abandon_checkpoint(staging);
    throw std::runtime_error("cannot write checkpoint " + final_dir.string() + ": " + e.what());
  }
  return final_dir.string();
}

void abandon_checkpoint(const std::string& staging) {
  std::error_code ec;
  fs::remove_all(staging, ec);
}

int64_t checkpoint_step(const std::string& dir) {
  return step_of(fs::path(dir).lexically_normal().filename().empty()
                     ? fs::path(dir).lexically_normal().parent_path()
                     : fs::path(dir).lexically_normal());
}

std::vector<std::string> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const int64_t step = step_of(e.path());
    if (step >= 0 && e.is_directory() && fs::exists(e.path() / kStateFile))
      found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::optional<std::string> last_checkpoint(const std::string& output_dir) {
  auto all = list_checkpoints(output_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

void rotate_checkpoints(const std::string& output_dir, int64_t limit) {
  auto all = list_checkpoints(output_dir);
  for (size_t i = 0; limit > 0 && all.size() - i > static_cast<size_t>(limit); ++i) {
    std::error_code ec;
    fs::remove_all(all[i], ec);
  }
}

TrainerState load_trainer_state(const std::string& checkpoint_dir) {
  const fs::path dir(checkpoint_dir);
  nlohmann::json j;
  std::string error;
  if (!read_json_file((dir / kStateFile).string(), j, error))
    throw std::runtime_error(error + " (not a complete checkpoint folder)");
  TrainerState state = from_json(j, (dir / kStateFile).string());
  const std::string rng_path = (dir / kRngFile).string();
  if (fs::exists(rng_path)) {
    torch::Tensor rng;
    try {
      torch::load(rng, rng_path);
      auto gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(rng);
    } catch (const c10::Error& e) {
      throw std::runtime_error(rng_path + ": not a random-generator state torch can read (" +
                               e.what_without_backtrace() + "): the checkpoint is damaged");
    }
  }
  return state;
}

}  // namespace studio::trainer
