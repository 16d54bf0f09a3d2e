#include "studio/config/config_dialect.h"

namespace studio {

const std::vector<const ConfigDialect*>& config_dialects() {
  static const std::vector<const ConfigDialect*> all = {&llamafactory_v1_dialect()};
  return all;
}

const ConfigDialect* dialect_of_file(const YAML::Node& root) {
  for (const ConfigDialect* d : config_dialects())
    if (d->detect(root)) return d;
  return nullptr;
}

const ConfigDialect* dialect_of(const RunConfig& cfg) {
  for (const ConfigDialect* d : config_dialects())
    if (d->form == cfg.source.form) return d;
  return nullptr;
}

}  // namespace studio
