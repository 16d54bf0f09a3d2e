#include "studio/trainer/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/base/whole_number.h"
#include "studio/base/crc32c.h"
#include "studio/trainer/hf_checkpoint.h"

namespace fs = std::filesystem;

namespace studio::trainer {
namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kRngFile = "rng_state.pt";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kDigestsPrefix = ".digests-";

std::string hex32(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

nlohmann::json digest_of(const fs::path& file) {
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
  const std::string error = file_crc32c(file.string(), size, crc);
  if (!error.empty()) throw std::runtime_error(error);
  return {{"size", size}, {"crc32c", hex32(crc)}};
}

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

void write_rng_state(const std::string& staging) {
  const std::string path = (fs::path(staging) / kRngFile).string();
  try {
    torch::save(at::detail::getDefaultCPUGenerator().get_state(), path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot write " + path + ": " + e.what_without_backtrace());
  }
}

void write_digests(const std::string& staging, int rank, const std::vector<std::string>& files) {
  nlohmann::json j = nlohmann::json::object();
  for (const std::string& name : files) j[name] = digest_of(fs::path(staging) / name);
  const std::string path =
      (fs::path(staging) / (kDigestsPrefix + std::to_string(rank) + ".json")).string();
  const std::string err = write_file_atomic(path, j.dump() + "\n");
  if (!err.empty()) throw std::runtime_error(err);
}

std::string commit_checkpoint(const std::string& output_dir, const std::string& staging,
                              const TrainerState& state) {
  const fs::path final_dir = fs::path(output_dir) / checkpoint_name(state.global_step);
  try {
    // The ranks' digests, then whatever has none (trainer_state.json goes in last).
    nlohmann::json files = nlohmann::json::object();
    std::vector<fs::path> digests, others;
    for (const auto& e : fs::directory_iterator(staging)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(kDigestsPrefix, 0) == 0)
        digests.push_back(e.path());
      else if (e.is_regular_file())
        others.push_back(e.path());
    }
    for (const fs::path& d : digests) {
      nlohmann::json j;
      std::string error;
      if (!read_json_file(d.string(), j, error) || !j.is_object()) throw std::runtime_error(error);
      for (auto it = j.begin(); it != j.end(); ++it) files[it.key()] = it.value();
    }
    for (const fs::path& f : others)
      if (!files.contains(f.filename().string())) files[f.filename().string()] = digest_of(f);
    const std::string state_text = to_json(state).dump(2) + "\n";
    files[kStateFile] = {{"size", state_text.size()}, {"crc32c", hex32(crc32c_of(state_text))}};
    nlohmann::json manifest = {{"format", 1}, {"global_step", state.global_step},
                               {"files", files}};
    std::string err = write_file_atomic((fs::path(staging) / kManifestFile).string(),
                                        manifest.dump(1) + "\n");
    if (!err.empty()) throw std::runtime_error(err);
    // The state file goes last: its presence marks a complete checkpoint.
    err = write_file_atomic((fs::path(staging) / kStateFile).string(), state_text);
    if (!err.empty()) throw std::runtime_error(err);
    for (const fs::path& d : digests) fs::remove(d);
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

std::string verify_checkpoint(const std::string& dir, bool hashes) {
  const fs::path manifest_path = fs::path(dir) / kManifestFile;
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) return {};
  nlohmann::json j;
  std::string error;
  if (!read_json_file(manifest_path.string(), j, error)) return error;
  const auto files = j.find("files");
  if (!j.is_object() || files == j.end() || !files->is_object())
    return manifest_path.string() + ": no \"files\" object";
  for (auto it = files->begin(); it != files->end(); ++it) {
    const fs::path file = fs::path(dir) / it.key();
    const auto& want = it.value();
    if (!want.is_object() || !want.contains("size") || !want["size"].is_number_unsigned() ||
        !want.contains("crc32c") || !want["crc32c"].is_string())
      return manifest_path.string() + ": the entry of " + it.key() + " is malformed";
    const auto want_size = want["size"].get<std::uint64_t>();
    const auto size = fs::file_size(file, ec);
    if (ec) return it.key() + " is missing (manifest.json lists it)";
    if (size != want_size)
      return it.key() + ": " + std::to_string(size) + " bytes, manifest.json says " +
             std::to_string(want_size);
    if (!hashes) continue;
    std::uint64_t read_size = 0;
    std::uint32_t crc = 0;
    error = file_crc32c(file.string(), read_size, crc);
    if (!error.empty()) return error;
    if (hex32(crc) != want["crc32c"].get<std::string>())
      return it.key() + ": CRC-32C " + hex32(crc) + ", manifest.json says " +
             want["crc32c"].get<std::string>() + " (the file changed after it was written)";
  }
  return {};
}

std::optional<std::string> last_good_checkpoint(const std::string& output_dir,
                                                std::vector<std::string>* skipped) {
  const auto all = list_checkpoints(output_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string problem = verify_checkpoint(*it);
    if (problem.empty()) return *it;
    if (skipped) skipped->push_back(*it + ": " + problem);
  }
  return std::nullopt;
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
