#pragma once
// After a multi-process run failed or was stopped, OUTPUT_DIR must say so even when rank 0
// could not: a rank that crashed, or a rank 0 killed mid-step, leaves events.jsonl without an
// `end` and status.json saying `running`. The launcher (trainer/launch), which outlives its
// workers, completes them. Rank 0's own account, when it wrote one, is never duplicated or
// overwritten.
#include <string>

namespace studio {

// How a run's processes ended, as the launcher saw them.
struct RunOutcome {
  // 0 when every process exited 0; else the first failing one's code (128 + signal when a
  // signal killed it), or the launcher's stop code after a stop request.
  int exit_code = 0;
  // The stop request ended the run and no process failed first: the run is `stopped`, not
  // `failed`.
  bool stopped = false;
  std::string reason;  // "rank 2 exited with code 1", "stopped: ...": the end event's reason
};

// For an outcome that failed or stopped (nothing is done for exit code 0 unless stopped), in
// `output_dir`:
//  - when events.jsonl has no `end` after its last `start`: appends
//    {"event":"end","state":"failed"|"stopped","reason":outcome.reason,"exit_code":...}
//    (ending a torn last line first, so the new line parses) and rewrites status.json
//    atomically with that state and reason, this process's pid and host, and the step the
//    old status.json had;
//  - when rank 0 already wrote its `end`: appends nothing; status.json is rewritten from that
//    end event only when it still says `running` or cannot be read (rank 0 died between the
//    two writes), and left alone otherwise.
// The `end` is looked for in the last MiB of events.jsonl, where it sits when present.
// Creates output_dir when missing. Returns "" or an error naming the file.
std::string record_run_outcome(const std::string& output_dir, const RunOutcome& outcome);

}  // namespace studio
