// Saving (train_loop_impl.h): the final model, and checkpoints written at once or, while training
// goes on, in the background.
#include "train_loop_impl.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "studio/trainer/fault_injection.h"
#include "studio/trainer/peft_adapter.h"
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/tensors/host_allocator.h"

namespace fs = std::filesystem;

namespace studio::trainer {

NamedTensors Trainer::Impl::master_metas() const {
  NamedTensors metas;
  for (size_t i = 0; i < zero->names().size(); ++i)
    metas.emplace_back(
        zero->names()[i],
        torch::empty(zero->shape(i),
                     torch::TensorOptions().dtype(torch::kFloat).device(torch::kMeta)));
  return metas;
}

void Trainer::Impl::save_model(const std::string& dir, HfSaveOptions opt) {
  std::string error;
  // An offloaded update's failure surfaces here, on every rank at once.
  try {
    zero->finish_updates();
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "saving " + dir);
  if (adapters) return save_adapter(dir);
  const NamedTensors metas = master_metas();
  const auto order = hf_save_order(metas, opt);
  size_t fetched = 0;
  if (par.rank() == 0) {
    opt.fetch = [&](size_t i) {
      ++fetched;
      return zero->gather_full(i);
    };
    try {
      save_hf_model(dir, metas, opt);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // Every rank runs every gather (rank 0 those its writer did not reach), whatever failed.
  if (zero->shards() > 1)
    for (size_t k = fetched; k < order.size(); ++k) {
      try {
        zero->gather_full(order[k]);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
  agree(error, "saving " + dir);
}

void Trainer::Impl::save_adapter(const std::string& dir) {
  std::string error;
  NamedTensors tensors = gather_adapter(error);
  if (par.rank() == 0 && error.empty()) {
    try {
      save_peft_adapter(dir, tensors, adapters->adapter, in.model_dir);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  agree(error, "saving " + dir);
}

NamedTensors Trainer::Impl::gather_adapter(std::string& error) {
  const auto shapes = adapter_file_shapes(*model, adapters->adapter);
  NamedTensors tensors;
  for (size_t i = 0; i < zero->names().size(); ++i) {
    if (!shapes.count(zero->names()[i])) continue;
    try {
      torch::Tensor t = zero->gather_full(i);  // host memory of its own
      if (par.rank() == 0) tensors.emplace_back(zero->names()[i], std::move(t));
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  return tensors;
}

void Trainer::Impl::save(int64_t step, bool finish) {
  finish_save();
  const std::string staging = checkpoint_staging_dir(cfg.output_dir, step);
  std::string error;
  auto on_rank0 = [&](const std::function<void()>& f) {
    if (par.rank() != 0) return;
    try {
      f();
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  on_rank0([&] {
    prepare_checkpoint(staging);
    write_rng_state(staging);
  });
  agree(error, "checkpoint " + std::to_string(step));
  fault_point("save.staged", step, par.rank());
  const bool in_background = every_rank_can_stage(step);
  try {
    if (in_background) {
      start_background_save(step, staging);
      if (finish) finish_save();
      return;
    }
    save_model(staging, checkpoint_save_options());
    fault_point("save.model", step, par.rank());
    std::vector<std::string> files;
    if (par.rank() == 0) files = own_files(staging, "");
    if (!cfg.save_only_model) {
      try {
        zero->save_optimizer(staging);
        const std::string name = optimizer_file_name_of_rank();
        if (!name.empty()) files.push_back(name);
      } catch (const std::exception& e) {
        error = e.what();
      }
      agree(error, "checkpoint " + std::to_string(step) + " optimizer states");
      fault_point("save.optimizer", step, par.rank());
    }
    try {
      write_digests(staging, par.rank(), files);
    } catch (const std::exception& e) {
      error = e.what();
    }
    agree(error, "checkpoint " + std::to_string(step));
    commit(step, staging, state);
  } catch (const std::exception& e) {
    if (par.rank() == 0) abandon_checkpoint(staging);
    throw std::runtime_error("cannot write checkpoint " +
                             (fs::path(cfg.output_dir) / checkpoint_name(step)).string() + ": " +
                             e.what());
  }
}

HfSaveOptions Trainer::Impl::checkpoint_save_options() const {
  HfSaveOptions opt;
  opt.dtype = torch::kFloat;  // the masters, for an exact resume
  opt.source_dir = in.model_dir;
  return opt;
}

std::string Trainer::Impl::optimizer_file_name_of_rank() const {
  return cfg.save_only_model ? std::string() : zero->optimizer_file_name_here();
}

std::vector<std::string> Trainer::Impl::own_files(const std::string& staging,
                                                  const std::string& own_optimizer) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(staging)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind(".digests-", 0) == 0) continue;
    if (name.rfind("optimizer-", 0) == 0 && name != own_optimizer) continue;
    out.push_back(name);
  }
  return out;
}

void Trainer::Impl::commit(int64_t step, const std::string& staging, const TrainerState& saved) {
  std::string error, path;
  if (par.rank() == 0) {
    try {
      path = commit_checkpoint(cfg.output_dir, staging, saved);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  agree(error, "checkpoint " + std::to_string(step));
  fault_point("save.committed", step, par.rank());
  last_saved_dir = (fs::path(cfg.output_dir) / checkpoint_name(step)).string();
  if (par.rank() == 0) {
    if (cfg.save_total_limit) rotate_checkpoints(cfg.output_dir, *cfg.save_total_limit);
    reporter.checkpoint(step, path);
  }
}

bool Trainer::Impl::every_rank_can_stage(int64_t step) {
  // STUDIO_CHECKPOINT_WRITES=foreground: every save as before (tests of other things that want
  // each checkpoint committed at its step; file systems that must not be written during a
  // step). Every rank has the same environment.
  if (const char* mode = std::getenv("STUDIO_CHECKPOINT_WRITES");
      mode != nullptr && std::string(mode) == "foreground")
    return false;
  double bytes = 0;
  if (par.rank() == 0) {
    const auto shapes = adapters ? adapter_file_shapes(*model, adapters->adapter)
                                 : std::map<std::string, std::vector<int64_t>>{};
    for (size_t i = 0; i < zero->names().size(); ++i) {
      if (adapters && !shapes.count(zero->names()[i])) continue;
      double n = 1;
      for (int64_t d : zero->shape(i)) n *= static_cast<double>(d);
      bytes += 4 * n;
    }
  }
  if (!cfg.save_only_model) bytes += static_cast<double>(zero->optimizer_bytes());
  const double available = available_host_bytes();
  const double cannot = available > 0 && 2 * bytes <= available ? 0.0 : 1.0;
  if (par.sum(par.world_group(), {cannot}, "checkpoint staging")[0] == 0) return true;
  if (!staging_note_given) {
    staging_note_given = true;
    reporter.log("warning",
                 "checkpoint " + std::to_string(step) +
                     " is written with the step waiting: a rank lacks the host memory to hold "
                     "its part (twice " +
                     std::to_string(static_cast<int64_t>(bytes / (1 << 20))) + " MiB on rank " +
                     std::to_string(par.rank()) + ", MemAvailable " +
                     std::to_string(static_cast<int64_t>(available / (1 << 20))) +
                     " MiB) while the next steps run");
  }
  return false;
}

double Trainer::Impl::available_host_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

void Trainer::Impl::start_background_save(int64_t step, const std::string& staging) {
  const auto began = std::chrono::steady_clock::now();
  const auto held_before = host_allocator_stats().allocated;
  std::string error;
  try {
    zero->finish_updates();  // an offloaded update's failure surfaces here, on every rank
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "checkpoint " + std::to_string(step));
  std::function<void(const std::string&)> write_model;  // rank 0
  if (adapters) {
    NamedTensors tensors = gather_adapter(error);
    write_model = [tensors = std::move(tensors), adapter = adapters->adapter,
                   source = in.model_dir](const std::string& dir) {
      save_peft_adapter(dir, tensors, adapter, source);
    };
  } else {
    NamedTensors metas = master_metas();  // moved into the write below
    HfSaveOptions opt = checkpoint_save_options();
    const auto order = hf_save_order(metas, opt);
    auto host = std::make_shared<std::vector<torch::Tensor>>(metas.size());
    for (size_t i : order) {
      if (par.rank() != 0 && zero->shards() == 1) break;  // nothing to gather
      try {
        torch::Tensor t = zero->gather_full(i);  // host memory of its own
        if (par.rank() == 0) (*host)[i] = std::move(t);
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    write_model = [metas = std::move(metas), opt, host](const std::string& dir) mutable {
      opt.fetch = [host](size_t i) { return std::move((*host)[i]); };
      save_hf_model(dir, metas, opt);
    };
  }
  ShardedState::OptimizerFile optimizer;
  if (!cfg.save_only_model) {
    try {
      optimizer = zero->optimizer_snapshot();
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  agree(error, "checkpoint " + std::to_string(step));
  PendingSave p;
  p.step = step;
  p.staging = staging;
  p.state = state;
  p.staged_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  p.copies_mib =
      (static_cast<double>(host_allocator_stats().allocated) - static_cast<double>(held_before)) /
      kMiB;
  p.written_s = std::make_shared<double>(0.0);
  const int rank = par.rank();
  p.written = std::async(
      std::launch::async,
      [step, rank, staging, write_model = std::move(write_model), optimizer = std::move(optimizer),
       written_s = p.written_s]() -> std::string {
        const auto start = std::chrono::steady_clock::now();
        try {
          if (fault_requested("save.slow", step, rank))
            std::this_thread::sleep_for(std::chrono::seconds(3));
          std::vector<std::string> files;
          if (rank == 0) {
            write_model(staging);
            files = own_files(staging, optimizer.name);
          }
          fault_point("save.model", step, rank);
          if (!optimizer.name.empty()) {
            write_safetensors((fs::path(staging) / optimizer.name).string(), optimizer.tensors,
                              optimizer.metadata);
            files.push_back(optimizer.name);
          }
          fault_point("save.optimizer", step, rank);
          // rank 0's own optimizer file is listed by own_files only once it exists
          std::sort(files.begin(), files.end());
          files.erase(std::unique(files.begin(), files.end()), files.end());
          write_digests(staging, rank, files);
          *written_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      });
  pending_save = std::move(p);
}

void Trainer::Impl::finish_save() {
  if (!pending_save) return;
  PendingSave p = std::move(*pending_save);
  pending_save.reset();
  const std::string error = p.written.get();
  try {
    agree(error, "checkpoint " + std::to_string(p.step));
    char line[256];
    std::snprintf(line, sizeof line,
                  "checkpoint %lld: the step waited %.3f s for the copies to host memory "
                  "(%.3f MiB on rank 0); rank 0 wrote its files in %.3f s while training went on",
                  static_cast<long long>(p.step), p.staged_s, p.copies_mib, *p.written_s);
    commit(p.step, p.staging, p.state);
    reporter.log("info", line);
  } catch (const std::exception& e) {
    if (par.rank() == 0) abandon_checkpoint(p.staging);
    throw std::runtime_error("cannot write checkpoint " +
                             (fs::path(cfg.output_dir) / checkpoint_name(p.step)).string() + ": " +
                             e.what());
  }
}

std::string Trainer::Impl::salvage_pending_save() noexcept {
  if (!pending_save) return {};
  PendingSave p = std::move(*pending_save);
  pending_save.reset();
  try {
    if (const std::string failed = p.written.get(); !failed.empty()) {
      if (par.rank() == 0) abandon_checkpoint(p.staging);
      return "cannot write checkpoint " +
             (fs::path(cfg.output_dir) / checkpoint_name(p.step)).string() + ": " + failed;
    }
    if (par.rank() != 0) return {};
    auto all_written = [&] {
      for (int r = 0; r < par.world(); ++r)
        if (!fs::exists(fs::path(p.staging) / (".digests-" + std::to_string(r) + ".json")))
          return false;
      return true;
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!all_written() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!all_written()) {
      reporter.log("warning", "checkpoint " + std::to_string(p.step) +
                                  " was not complete when the run failed (a rank had not "
                                  "written its files): removed");
      abandon_checkpoint(p.staging);
      return {};
    }
    const std::string path = commit_checkpoint(cfg.output_dir, p.staging, p.state);
    last_saved_dir = path;
    reporter.checkpoint(p.step, path);
    reporter.log("info", "checkpoint " + std::to_string(p.step) +
                             ", written in the background, was committed after the failure");
  } catch (const std::exception& e) {
    reporter.log("warning", "checkpoint " + std::to_string(p.step) +
                                " could not be committed after the failure: " + e.what());
  }
  return {};
}

double Trainer::Impl::save_written() const {
  return !pending_save || pending_save->written.wait_for(std::chrono::seconds(0)) ==
                              std::future_status::ready
             ? 1.0
             : 0.0;
}

void Trainer::Impl::save_final_model() {
  HfSaveOptions opt;
  opt.source_dir = in.model_dir;
  save_model(cfg.output_dir, opt);
}

}  // namespace studio::trainer
