// The DeepSpeed JSON reader (`deepspeed:` and v1's dist_config config_file) and its checks
// against the run config, on arbitrary bytes. Invariants: no crash, no exception; a JSON that
// reads asks for a ZeRO stage of 0 to 3, the very number it writes (issue 35: 4294967299 was
// read as stage 3); validating a run config that names it, in both config forms, ends.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "studio/config/config_io.h"
#include "studio/config/validate.h"

namespace {

// One folder for the run, removed at its end: the JSON under test and the configs naming it.
const std::string& folder() {
  static char name[] = "/tmp/studio-fuzz-deepspeed-XXXXXX";
  static const std::string dir = [] {
    if (!::mkdtemp(name)) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(name, ec);
    });
    return std::string(name);
  }();
  return dir;
}

void validate(const std::string& yaml, const std::string& json_path) {
  studio::LoadResult loaded = studio::load_config_string(yaml, "fuzz.yaml");
  if (!loaded.ok()) {
    std::fprintf(stderr, "the fixed config does not load:\n%s\n",
                 studio::format_all(loaded.diagnostics).c_str());
    std::abort();
  }
  studio::ValidateOptions opt;
  opt.nproc_per_node = 8;
  opt.base_dir = folder();
  (void)studio::validate_config(loaded.config, opt);
  std::string error;
  const auto ds = studio::read_deepspeed_json(json_path, error);
  (void)studio::zero_request_problem(studio::zero_request(loaded.config, ds));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = folder() + "/ds.json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::string error;
  const auto ds = studio::read_deepspeed_json(path, error);
  if (ds && (ds->zero_stage < 0 || ds->zero_stage > 3)) {
    std::fprintf(stderr, "read ZeRO stage %d\n", ds->zero_stage);
    std::abort();
  }
  // The stage read is the number written, not that number cut to an int.
  const auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (ds && j.is_object() && j.contains("zero_optimization") &&
      j["zero_optimization"].is_object() && j["zero_optimization"].contains("stage") &&
      j["zero_optimization"]["stage"] != nlohmann::json(ds->zero_stage)) {
    std::fprintf(stderr, "read ZeRO stage %d from %s\n", ds->zero_stage,
                 j["zero_optimization"]["stage"].dump().c_str());
    std::abort();
  }
  if (!ds && error.empty()) {
    std::fprintf(stderr, "refused without a message\n");
    std::abort();
  }
  // The values the JSON must agree with, set so that some inputs agree and others do not.
  validate(
      "model_name_or_path: model\ndataset: d\ntemplate: qwen\noutput_dir: out\n"
      "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nbf16: true\n"
      "offload_optimizer: true\ndeepspeed: ds.json\n",
      path);
  validate(
      "model: model\ntrain_dataset: d.yaml\noutput_dir: out\nmicro_batch_size: 4\n"
      "global_batch_size: 64\ndist_config:\n  name: deepspeed\n  config_file: ds.json\n",
      path);
  return 0;
}
