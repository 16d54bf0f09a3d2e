// The run-config YAML loader, the validator and the exporter on arbitrary bytes. Invariants: no
// crash, no exception but the ones the API documents, and a config that loads exports to YAML
// that loads again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "studio/config/config_io.h"
#include "studio/config/validate.h"

namespace {

// The validator reads the files a config names. Only paths inside the (empty) working folder are
// kept, so that a fuzzed `deepspeed: /dev/zero` tests nothing but the machine.
void confine(std::string& path) {
  if (!path.empty() && (path[0] == '/' || path[0] == '~' || path.find("..") != std::string::npos))
    path = "confined";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  studio::LoadResult loaded = studio::load_config_string(yaml, "fuzz.yaml");
  if (!loaded.ok()) return 0;
  studio::RunConfig& cfg = loaded.config;
  confine(cfg.model_name_or_path);
  confine(cfg.dataset_dir);
  confine(cfg.output_dir);
  if (cfg.ref_model) confine(*cfg.ref_model);
  if (cfg.deepspeed) confine(*cfg.deepspeed);
  studio::ValidateOptions opt;
  opt.nproc_per_node = 8;
  opt.base_dir = "/nonexistent-studio-fuzz";
  (void)studio::validate_config(cfg, opt);

  // What the studio exports must load again, in both styles.
  for (const auto style : {studio::YamlStyle::Minimal, studio::YamlStyle::Full}) {
    const std::string again = studio::to_yaml(cfg, style);
    const studio::LoadResult reloaded = studio::load_config_string(again, "exported.yaml");
    if (!reloaded.ok()) {
      std::fprintf(stderr, "exported YAML does not load:\n%s\n--- problems:\n", again.c_str());
      for (const auto& d : reloaded.diagnostics) std::fprintf(stderr, "%s\n", d.format().c_str());
      std::abort();
    }
  }
  return 0;
}
