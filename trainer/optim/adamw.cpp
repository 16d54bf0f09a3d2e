#include "studio/trainer/optim/adamw.h"

namespace studio::trainer {

bool decays(const std::string& name) {
  const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  const bool norm = name.find("norm") != std::string::npos;
  return !bias && !norm;
}

}  // namespace studio::trainer
