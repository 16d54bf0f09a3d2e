#pragma once
// Why a run failed, read from its end event's reason (what studio-train, its launcher or the
// config reader wrote) so that the studio can open a failed run on its cause: the rank, the
// step and the phase it failed in, what kind of failure it was, and what to change. Plain C++:
// the studio's failure panel (ui/dashboard) and `studio runs` share it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace studio {

enum class FailureKind {
  OutOfMemory,  // "out of memory on rank R at step S, in PHASE: ..."
  NotFinite,    // "step S: the loss is nan ... (first on rank R, ...)"
  Config,       // "FILE:LINE:COL: key: message" (the config reader)
  Killed,       // "rank R was killed by signal N (NAME)"
  Exited,       // "rank R exited with code C" with nothing more said
  PeerLost,     // "rank R: op(what) in group G failed ...": a peer died or hung
  Other,        // anything else: the reason as written
};

struct FailureCause {
  FailureKind kind = FailureKind::Other;
  int rank = -1;          // the rank that failed first; -1 when not said
  std::int64_t step = -1;  // the step it failed in; -1 when not said
  std::string phase;      // "the forward of micro-batch 1 of 1", "recv(zigzag ...) in group ring0.0"
  std::string summary;    // one line: what happened
  // What to change, each a key and value or a sentence: the estimator's suggestions for an
  // out-of-memory, the engine's advice for a diverged step, the key for a config error.
  std::vector<std::string> changes;
  // Config errors: the file, its 1-based line and column, and the key.
  std::string config_file;
  int config_line = 0;
  int config_column = 0;
  std::string key;
};

// The cause in `reason` (an end event's, or status.json's). Never throws: a reason it does not
// recognise is FailureKind::Other with the reason as the summary.
FailureCause explain_failure(std::string_view reason);

// "out of memory", "diverged (not finite)", "config error", ...: the kind in words.
const char* failure_kind_name(FailureKind kind);

// The last `count` lines that `rank` wrote to a launcher's combined output (train.log): the
// launcher tags every rank but 0 with "[rank N] "; rank 0's lines are the untagged ones that
// are neither the launcher's ("[launcher] ...") nor the progress bar's. Tags are removed.
std::vector<std::string> rank_log_tail(std::string_view log, int rank, std::size_t count);

}  // namespace studio
