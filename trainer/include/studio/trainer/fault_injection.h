#pragma once
// Faults injected at named points of a real run, for the robustness tests (tests/trainer
// tst_faults) and for anyone who wants to see what the engine does then. Off unless the
// STUDIO_INJECT_FAULT environment variable names a point:
//
//   STUDIO_INJECT_FAULT=POINT[@STEP][#RANK][%ATTEMPT][,POINT...]
//
// POINT is one of the points below; @STEP fires only at that optimizer step (or the checkpoint of
// that step), #RANK only on that rank, %ATTEMPT only in that attempt of a restarted run
// (TORCHELASTIC_RESTART_COUNT: 0 before any restart, as torchrun numbers them). Several faults,
// comma-separated, each fire where they match. What happens at a point:
//   save.staged, save.model, save.optimizer, save.committed  SIGKILL to the whole process group
//       (the run: start it in its own session): after the staging folder exists, after the model
//       files are written, after the optimizer files, after the rename into checkpoint-N
//   save.slow  the background write of checkpoint-N (every file of this rank) takes 3 s longer,
//       as on a slow or busy file system: the steps after it go on meanwhile
//   loss.nan  the step's loss (and so its gradients) become NaN on this rank
//   stop      in the middle of the step, a stop request as Ctrl-C or the studio's Stop would
//       make it: SIGTERM to this rank and, under studio-train's launcher, to the launcher (which
//       passes it on to every worker)
//   oom       the forward of the step's first micro-batch throws torch's out-of-memory error
//       (c10::OutOfMemoryError, as the CUDA allocator does), on this rank
//   crash     this rank alone dies (SIGKILL to itself) at the start of the step, as a process the
//       OOM killer or an ECC error takes; its peers are stopped by the launcher
//   slow      the step takes 1 s longer on this rank (a sleep at its start): a run slow enough
//       for a test to act in the middle of it
//   stall     this rank stops itself (SIGSTOP) at the start of the step: stalled, not dead, as
//       under a debugger or a frozen node; its peers time out after ddp_timeout and the watchdog
//       names it (trainer/parallel/watchdog.h)
//   sweep.slow  studio-train sweep waits 300 s before it starts point STEP (the point's index,
//       from 0), as a queue verifying a large checkpoint before a resumed point does: no point
//       runs meanwhile, and a stop ends the wait at once
//   sweep.write.slow  studio-train sweep writes each point's folder 1 s later (@STEP: only that
//       point's), as on a slow or busy file system: what the studio sees while a sweep's folder
//       is being written
#include <cstdint>

namespace studio::trainer {

// True when STUDIO_INJECT_FAULT names `point` for this step and rank.
bool fault_requested(const char* point, std::int64_t step, int rank);
// At a kill point: kills the process group when requested; returns otherwise.
void fault_point(const char* point, std::int64_t step, int rank);

}  // namespace studio::trainer
