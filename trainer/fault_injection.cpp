#include "studio/trainer/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <string>

namespace studio::trainer {

bool fault_requested(const char* point, std::int64_t step, int rank) {
  const char* spec = std::getenv("STUDIO_INJECT_FAULT");
  if (spec == nullptr || *spec == '\0') return false;
  std::string s = spec;
  int want_rank = -1;
  if (const auto hash = s.find('#'); hash != std::string::npos) {
    want_rank = std::atoi(s.c_str() + hash + 1);
    s.erase(hash);
  }
  std::int64_t want_step = -1;
  if (const auto at = s.find('@'); at != std::string::npos) {
    want_step = std::atoll(s.c_str() + at + 1);
    s.erase(at);
  }
  return s == point && (want_step < 0 || want_step == step) && (want_rank < 0 || want_rank == rank);
}

void fault_point(const char* point, std::int64_t step, int rank) {
  if (!fault_requested(point, step, rank)) return;
  ::kill(0, SIGKILL);  // the whole run, as a power cut or an OOM killer taking the job would
  std::abort();        // not reached
}

}  // namespace studio::trainer
