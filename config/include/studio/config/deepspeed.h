#pragma once
// A DeepSpeed JSON (the `deepspeed:` key) as studio-train reads it: the ZeRO stage and offloads
// it asks for, and the values validate compares with the YAML. The engine includes this header
// alone; validate.h checks the rest.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/run_config.h"

namespace studio {

// What a DeepSpeed JSON asks of a run. studio-train honours the ZeRO stage and the offload
// devices itself. Values that Hugging Face's Trainer requires to agree with its own arguments
// (batch sizes, accumulation, clipping, precision, AdamW hyper-parameters) are kept in `fixed`
// when they are not "auto", for validate to compare; fields that only tune DeepSpeed are listed
// in `tuning`, other fields that change nothing here in `notes` with the reason.
struct DeepSpeedRequest {
  int zero_stage = 0;
  bool offload_optimizer = false;
  bool offload_param = false;
  bool pin_memory = true;                   // offload_*.pin_memory (both default true)
  std::map<std::string, double> fixed;      // dotted JSON path -> value (booleans 0/1)
  std::vector<std::string> tuning;          // fields that only tune DeepSpeed's own engine
  std::vector<std::string> notes;           // "scheduler: not used; ..." per other field
};
std::optional<DeepSpeedRequest> read_deepspeed_json(const std::string& path, std::string& error);

// The ZeRO request as the engine applies it: zero_stage if given, else the JSON's stage; an
// offload asked by either; offload_param implies offload_optimizer (the weight pieces are the
// fp32 masters). Offloads below their stage are left as asked (validate refuses them).
struct ZeroRequest {
  int stage = 0;
  bool offload_optimizer = false;
  bool offload_param = false;
  bool pin_memory = true;
};
ZeroRequest zero_request(const RunConfig& cfg, const std::optional<DeepSpeedRequest>& ds);
// What the engine cannot run in a ZeRO request ("" when nothing): a stage outside 0-3, an
// offload below its stage. validate() reports it at the key; training refuses it.
std::string zero_request_problem(const ZeroRequest& z);

}  // namespace studio
