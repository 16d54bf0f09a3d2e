#include "studio/trainer/fault_injection.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

namespace studio::trainer {

namespace {

// One POINT[@STEP][#RANK][%ATTEMPT] of the list.
bool one_requested(std::string s, const char* point, std::int64_t step, int rank, int attempt) {
  int want_attempt = -1;
  if (const auto pct = s.find('%'); pct != std::string::npos) {
    want_attempt = std::atoi(s.c_str() + pct + 1);
    s.erase(pct);
  }
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
  return s == point && (want_step < 0 || want_step == step) && (want_rank < 0 || want_rank == rank) &&
         (want_attempt < 0 || want_attempt == attempt);
}

}  // namespace

bool fault_requested(const char* point, std::int64_t step, int rank) {
  const char* spec = std::getenv("STUDIO_INJECT_FAULT");
  if (spec == nullptr || *spec == '\0') return false;
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const int attempt = restarts ? std::atoi(restarts) : 0;
  const std::string all = spec;
  for (std::size_t begin = 0; begin <= all.size();) {
    const std::size_t comma = std::min(all.find(',', begin), all.size());
    if (one_requested(all.substr(begin, comma - begin), point, step, rank, attempt)) return true;
    begin = comma + 1;
  }
  return false;
}

void fault_point(const char* point, std::int64_t step, int rank) {
  if (!fault_requested(point, step, rank)) return;
  ::kill(0, SIGKILL);  // the whole run, as a power cut or an OOM killer taking the job would
  std::abort();        // not reached
}

}  // namespace studio::trainer
