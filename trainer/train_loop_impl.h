#pragma once
// Trainer::Impl (train_loop.h): a run's state and its parts, shared by the files that define them.
//   train_setup.cpp   the resume point, the models (adapters, QLoRA, the frozen reference), their
//                     sharding and the run's plan (data order, schedule, the resumed state)
//   train_loop.cpp    the step and the loop, the figures of each step event (memory, rank times)
//   train_saving.cpp  the final model and the checkpoints, written now or in the background
#include "studio/trainer/train_loop.h"

#include <unistd.h>
#include <array>
#include <atomic>
#include <cstdint>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "adapter_setup.h"
#include "objective.h"
#include "parallel_layout.h"
#include "studio/trainer/batching/sampler.h"
#include "studio/trainer/checkpoint.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/metrics/run_reporter.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model/lora.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/optim/lr_schedule.h"
#include "studio/trainer/optim/zero.h"
#include "studio/trainer/sp/layout.h"

namespace studio::trainer {

struct Trainer::Impl {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  static constexpr double kMiB = 1024.0 * 1024.0;
  // The dtype of the forward and backward: bf16 or fp32 (fp16 and pure_bf16 are refused).
  static torch::Dtype compute_dtype(const RunConfig& cfg);

  TrainInputs in;
  const RunConfig& cfg;
  Parallel par;
  // The models, their sharding and the forwards the objective runs (objective.h); the names
  // below are its members.
  StepModels m{cfg, in, par};
  torch::Device& device = m.device;
  CausalLM& model = m.model;
  CausalLM& ref_model = m.ref_model;  // a reference with a forward per step (DPO, ASFT)
  std::unique_ptr<ShardedState>& zero = m.zero;
  std::unique_ptr<ShardedState>& ref_zero = m.ref_zero;
  double& aux_weight = m.aux_weight;
  ZeroOptions zero_options;
  std::unique_ptr<EpochPlanner> planner;
  LrSchedule schedule;
  TrainerState state;
  RunReporter reporter;
  std::string resume_dir;
  std::string last_saved_dir;  // the newest checkpoint this run can go back to ("" when none)
  // The checkpoint being written in the background (at most one): its files are written by
  // `written` on every rank; once every rank's is done, rank 0 commits it (finish_save).
  struct PendingSave {
    int64_t step = 0;
    std::string staging;
    TrainerState state;
    std::future<std::string> written;   // "" or this rank's error
    double staged_s = 0;                // the step's wait: gathers and copies to host memory
    double copies_mib = 0;              // the host memory the copies hold (measured)
    std::shared_ptr<double> written_s;  // the background write's time (set when written)
  };
  std::optional<PendingSave> pending_save;
  std::string batching_note;  // dynamic batching: what it made of the first epoch (logged at start)
  // MoE models: the auxiliary loss's coefficient (0: off; studio::moe_aux_coefficient).
  double aux_coef = 0;
  // What the stage optimises (objective.h).
  std::unique_ptr<Objective> objective;
  // finetuning_type lora: the adapter the policy trains and where its weights come from.
  std::optional<AdapterPlan> adapters;
  // What building the models found worth saying (trained parameters, adapters, QLoRA), logged
  // once the run's event file is open.
  std::vector<std::string> start_notes;
  std::vector<std::string> start_warnings;    // the same, as warnings
  const pid_t parent_at_start = ::getppid();  // studio-train's launcher, when STUDIO_LAUNCHED

  explicit Impl(TrainInputs inputs)
      : in(std::move(inputs)),
        cfg(in.config),
        reporter(in.config.output_dir,
                 /*enabled=*/in.comm == nullptr || in.comm->rank() == 0, in.terminal) {
    par.comm = in.comm;
    par.layout = sp_layout(cfg, in.comm);
    objective = make_objective(m, reporter);
    // Neat packing isolates samples; so do the objectives that pack sequences themselves.
    // Stage pt's blocks are cut from concatenated texts: one segment each, nothing to isolate.
    par.neat_packing =
        (cfg.neat_packing && cfg.stage != Stage::Pt) || objective->isolates_packed_sequences();
  }

  static sp::SpLayout sp_layout(const RunConfig& cfg, dist::Communicator* comm) {
    if (!comm) return sp::make_sp_layout(cfg.sequence_parallel_mode, 1, 0);
    return sp::make_sp_layout(cfg.sequence_parallel_mode, comm->sp(), comm->sp_rank(),
                              comm->ulysses_group().size(), comm->ring_group().size());
  }

  // Runs `step`, a part of resuming from resume_dir: its error names the checkpoint and says how
  // to go back to the one before it.
  template <class F>
  void resuming(F&& step) {
    if (resume_dir.empty()) return step();
    try {
      step();
    } catch (const dist::CollectiveError&) {
      throw;  // a peer's failure: the launcher reports the first one
    } catch (const std::exception& e) {
      std::string earlier;  // the newest checkpoint of output_dir older than the one resumed
      for (const std::string& dir : list_checkpoints(cfg.output_dir))
        if (checkpoint_step(dir) < checkpoint_step(resume_dir)) earlier = dir;
      throw std::runtime_error("cannot resume from " + resume_dir + ": " + e.what() +
                               (earlier.empty()
                                    ? std::string("; there is no earlier checkpoint: set "
                                                  "overwrite_output_dir: true to start over")
                                    : "; to go back to the checkpoint before it, set "
                                      "resume_from_checkpoint: " +
                                          earlier));
    }
  }

  // --- Set-up (train_setup.cpp) ---

  // resume_dir: resume_from_checkpoint (its files checked against its manifest), else, without
  // overwrite_output_dir, the last good checkpoint of output_dir (the ones passed over warned of).
  void find_resume_point();

  // The adapter's settings in this run's forwards: LLaMA-Factory's DPO and KTO trainers turn
  // every dropout off (disable_dropout), lora_dropout included.
  LoraSettings lora_settings() const;

  // finetuning_type lora: the base weights of model_name_or_path with the adapters to merge
  // merged (a policy's, and a separate reference's).
  WeightGetter base_weights(CausalLM& m, std::string* head_note);

  // QLoRA: the base's linear weights of `m` quantized to 4 bits here, one at a time.
  void quantize_base(CausalLM& m, const WeightGetter& weights, bool policy);

  // A base bitsandbytes saved in 4 bits: its stored bytes are the 4-bit weights.
  void load_disk_4bit(CausalLM& m, bool policy);

  // The model of `weights_dir` on this rank's device. At ZeRO stage 3 its parameters get no bytes
  // (the ShardedState fills them a layer at a time from the folder); their shapes are checked.
  // `weights` gets the folder's weights by name (the masters' source); a policy of stage rm gets
  // a value head, read from the folder or initialised from cfg.seed.
  CausalLM make_model(const std::string& weights_dir, bool policy, WeightGetter& weights);

  // The attention kernel, and this rank's GPU when there is one (else the CPU).
  void select_device();

  // The policy (from resume_dir when resuming), its sharded states and, when the objective needs
  // one, its reference.
  void build_model();

  // finetuning_type lora / freeze: which of the policy's parameters train (the others get no
  // gradient and no optimizer state), said in LLaMA-Factory's words.
  void select_trained();

  // The objective's frozen reference: `ref_model`, else the initial policy (never a resumed
  // checkpoint). Kept for the steps, or dropped once the objective has what it needs of it.
  void build_reference();

  // The data order, the schedule and the steps; when resuming, the saved state and optimizer.
  void plan_run();

  // --- The step and the loop (train_loop.cpp) ---

  // Where the step is, for an out-of-memory error: set by train_step.
  std::string phase = "the step's setup";

  // Out of memory in a step: which rank, step and phase, torch's own words, and what the memory
  // estimate says of this run and suggests.
  std::string out_of_memory(const std::string& torch_message, int64_t step);

  // One optimizer step over the plan's micro-batches: forward, backward, clipping and update,
  // with the step's sums over the grid (every rank runs the same collectives).
  StepStats train_step(const StepPlan& plan);

  // Where a step that is not finite went wrong: the first rank (in rank order) with a
  // micro-batch whose loss was not finite, and which one; or that every loss was finite and the
  // gradients overflowed. Every rank calls it (a collective): all see the same global loss.
  std::string nonfinite_where(const StepStats& st);

  // Every rank learns whether any failed (a collective): all stop together, none waits for a
  // collective that a failed rank never reaches.
  void agree(const std::string& error, const std::string& what);

  // --- Saving (train_saving.cpp) ---

  // The fp32 masters' names and shapes, on the meta device: what the saved model holds.
  NamedTensors master_metas() const;

  // The model as Hugging Face files in `dir`, from the fp32 masters gathered one tensor at a time
  // for the shard being written (rank 0 writes; every rank takes part in each gather, in
  // hf_save_order's order, also after a failure on rank 0).
  void save_model(const std::string& dir, HfSaveOptions opt);

  // finetuning_type lora: the adapter (and the additional_target weights) as PEFT writes them,
  // from the fp32 masters gathered one tensor at a time (every rank takes part in each gather,
  // in names() order, also after a failure on rank 0); rank 0 writes the files. The pending
  // updates are done (save_model).
  void save_adapter(const std::string& dir);

  // The adapter's tensors (as adapter_file_shapes lists them) gathered one at a time in names()
  // order, every rank taking part in each gather whatever failed; rank 0 keeps them (in host
  // memory of their own, gather_full's). The first failure goes to `error`.
  NamedTensors gather_adapter(std::string& error);

  // A checkpoint in three phases (checkpoint.h). Rank 0 stages the folder; then, when every
  // rank has the host memory for it, the model (rank 0) and each rank's optimizer states are
  // copied to host memory and written in the background while training goes on, and rank 0
  // commits the folder at the first step at which every rank's write is done (at most one
  // save in flight; `finish` or the next save waits for it). Otherwise every rank writes its
  // files now, streaming the model a tensor at a time, and rank 0 commits at once.
  void save(int64_t step, bool finish = false);

  // How a checkpoint's model is written: the fp32 masters (an exact resume), beside the files
  // of model_name_or_path.
  HfSaveOptions checkpoint_save_options() const;

  // This rank's optimizer file name ("" when it writes none).
  std::string optimizer_file_name_of_rank() const;

  // The files of `staging` rank 0 wrote: all but the other ranks' optimizer files (being written
  // now) and the digests. `own_optimizer`: rank 0's own optimizer file, when it writes one.
  static std::vector<std::string> own_files(const std::string& staging,
                                            const std::string& own_optimizer);

  // Rank 0 commits the folder every rank has written (a collective: all learn the outcome).
  void commit(int64_t step, const std::string& staging, const TrainerState& saved);

  // Whether every rank has the host memory to hold its part of a checkpoint while it is written
  // (rank 0: the model in fp32, or the adapter; each rank: its optimizer states), with as much
  // again to spare (MemAvailable). A collective: all decide alike. The first save that cannot
  // says so.
  bool every_rank_can_stage(int64_t step);
  bool staging_note_given = false;

  // MemAvailable of /proc/meminfo in bytes (0 when unknown).
  static double available_host_bytes();

  // The snapshot (every rank takes part in each gather, in order) and the background write.
  void start_background_save(int64_t step, const std::string& staging);

  // Waits for the background save (if any) on every rank, then commits it or, when a rank's
  // write failed, removes it and stops the run with that error. A collective.
  void finish_save();

  // After a failure, when collectives can no longer be trusted: a background save whose files
  // every rank has written (each rank's digests file is its last) is still committed, by rank 0
  // alone, so that no finished step's checkpoint is lost. Waits for this rank's own write, then
  // up to 5 s for the other ranks' digests (a launcher stopping this rank waits 8). Never throws.
  // Returns why this rank's own write failed ("cannot write checkpoint DIR: why"; that
  // checkpoint is removed), or "".
  std::string salvage_pending_save() noexcept;

  // 1.0 when this rank has no background save or its write is done.
  double save_written() const;

  // The trained model (or adapter) in output_dir, as Hugging Face writes it.
  void save_final_model();

  // --- The figures of each step event (train_loop.cpp) ---

  double evaluate() { return objective->evaluate(); }

  // Model states measured once, at the first step with its gradients complete and the
  // activations gone: what the allocator holds beyond what it held before the model was built.
  double states_baseline_mib = 0;
  double model_states_mib = kNaN, offloaded_mib = kNaN;

  // What the allocator holds now: the CUDA caching allocator's, or the counting host allocator's.
  double allocated_mib_now() const;
  // model_states_mib and offloaded_mib, at the first step; logged.
  void measure_model_states();
  static std::string format_mib(double v);

  // Where this rank's time went over the steps since the last step event (RankTime): the
  // sums of compute, SP communication, gradient communication, data and waits, and the steps.
  std::array<double, 5> window_time{};
  int64_t window_timed_steps = 0;
  // One step's parts from the clock (step_clock.h) and the step's wall time; compute is the rest.
  void count_step_time(double wall_s);

  // Every rank's figures for the step event, gathered to every rank in one sum (all call it):
  // memory (returned; the CUDA caching allocator's figures, or on a CPU run the CPU
  // allocator's count and RSS, device -1) and each rank's RankTime (the window's mean per
  // step, into `times`).
  std::vector<GpuMemory> rank_stats(std::vector<RankTime>& times);

  // The device and its peak for MFU (model_flops.h), once the device is chosen.
  std::string device_name_ = "cpu";
  std::optional<double> peak_tflops_;
  void find_peak();

  // The loop of steps, with evaluation, logging and saving, until the last step or a stop.
  TrainResult run(const std::atomic<bool>* stop);
};

}  // namespace studio::trainer
