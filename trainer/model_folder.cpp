#include "studio/trainer/model_folder.h"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

namespace {

constexpr const char* kQuantStateKey = ".quant_state.bitsandbytes__";

// A module `name`'s weight held in 4 bits by `reader`: the type of its quant_state entry, or "".
std::string bnb_4bit_type(const CheckpointReader& reader, const std::string& name) {
  for (const char* type : {"nf4", "fp4"})
    if (reader.has(name + ".weight" + kQuantStateKey + type)) return type;
  return "";
}

c10::intrusive_ptr<Quant4Weight> read_bnb_4bit(const CheckpointReader& reader,
                                               const std::string& name, const std::string& type,
                                               torch::Device device) {
  const std::string w = name + ".weight";
  const std::string state_name = w + kQuantStateKey + type;
  auto fail = [&](const std::string& what) -> CheckpointError {
    return CheckpointError(reader.dir() + ": " + reader.file_of(w) + ": the 4-bit weight '" + w +
                           "' " + what +
                           " (bitsandbytes' format as transformers' save_pretrained writes it; "
                           "is the file complete?)");
  };
  const torch::Tensor state_bytes = reader.tensor(state_name).contiguous();
  if (state_bytes.scalar_type() != torch::kByte) throw fail("has a quant_state that is not bytes");
  const std::string text(reinterpret_cast<const char*>(state_bytes.data_ptr<std::uint8_t>()),
                         static_cast<size_t>(state_bytes.numel()));
  const nlohmann::json st = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!st.is_object() || !st.contains("shape") || !st["shape"].is_array() ||
      !st.contains("blocksize") || !st["blocksize"].is_number_integer())
    throw fail("has a quant_state without its shape and blocksize: " + text.substr(0, 200));
  std::vector<int64_t> shape;
  for (const auto& d : st["shape"]) {
    if (!d.is_number_integer()) throw fail("has a quant_state shape that is not whole numbers");
    shape.push_back(d.get<int64_t>());
  }
  if (st.value("quant_type", type) != type)
    throw fail("says quant_type " + st.value("quant_type", std::string()) + " under a " + type +
               " entry");
  Quant4Options opt;
  opt.type = type == "fp4" ? kernels::Quant4Type::kFp4 : kernels::Quant4Type::kNf4;
  opt.blocksize = st["blocksize"].get<int64_t>();
  opt.double_quant = reader.has(w + ".nested_absmax");
  if (opt.double_quant && st.value("nested_blocksize", int64_t{256}) != 256)
    throw fail("has nested blocks of " + std::to_string(st.value("nested_blocksize", int64_t{0})) +
               " (bitsandbytes uses 256)");
  if (opt.double_quant && !st.contains("nested_offset")) throw fail("has no nested_offset");
  // The 4-bit code must be bitsandbytes' own (the dequantization uses the built-in one).
  if (reader.has(w + ".quant_map")) {
    const torch::Tensor map = reader.tensor(w + ".quant_map").to(torch::kFloat).reshape({-1});
    const auto& code = kernels::quant4_code(opt.type);
    bool same = map.numel() == 16;
    for (int64_t i = 0; same && i < 16; ++i) same = map[i].item<float>() == code[i];
    if (!same) throw fail("has a quant_map that is not bitsandbytes' " + type + " code");
  }
  // bnb_4bit_quant_storage other than uint8 keeps the same bytes under another dtype.
  torch::Tensor packed = reader.tensor(w).contiguous().view(torch::kByte).reshape({-1});
  const int64_t n = [&] { int64_t k = 1; for (auto d : shape) k *= d; return k; }();
  if (packed.numel() < (n + 1) / 2)
    throw fail("holds " + std::to_string(packed.numel()) + " bytes, a " +
               c10::str(c10::IntArrayRef(shape)) + " weight needs " + std::to_string((n + 1) / 2));
  packed = packed.narrow(0, 0, (n + 1) / 2);
  auto get = [&](const std::string& suffix) {
    if (!reader.has(w + suffix)) throw fail("has no '" + w + suffix + "'");
    return reader.tensor(w + suffix);
  };
  try {
    if (opt.double_quant)
      return Quant4Weight::from_parts(shape, opt, packed, {}, get(".absmax"), get(".nested_absmax"),
                                      get(".nested_quant_map"),
                                      st["nested_offset"].get<double>(), device);
    return Quant4Weight::from_parts(shape, opt, packed, get(".absmax"), {}, {}, {}, 0.0, device);
  } catch (const std::invalid_argument& e) {
    throw fail(std::string("does not fit its shape: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("has a malformed quant_state: ") + e.what());
  }
}

}  // namespace

int64_t load_bnb_4bit_weights(CausalLM& model, const std::string& dir, int64_t* bytes) {
  const auto reader = CheckpointReader::open(dir);
  if (const std::string head = bnb_4bit_type(reader, "lm_head"); !head.empty())
    throw CheckpointError(dir + ": lm_head.weight is stored in 4 bits (" + head +
                          "; llm_int8_skip_modules was given without lm_head): studio-train keeps "
                          "the LM head unquantized, as transformers does by default; quantize the "
                          "model again with lm_head in llm_int8_skip_modules (or none given)");
  int64_t count = 0;
  for (const auto& item : model->named_modules()) {
    auto* lin = item.value()->as<LinearImpl>();
    if (!lin || lin->quant) continue;
    const std::string type = bnb_4bit_type(reader, item.key());
    if (type.empty()) continue;
    auto q = read_bnb_4bit(reader, item.key(), type, lin->weight.device());
    if (q->shape() != lin->weight.sizes().vec())
      throw CheckpointError(dir + ": the 4-bit weight '" + item.key() + ".weight' is " +
                            c10::str(c10::IntArrayRef(q->shape())) + ", the config implies " +
                            c10::str(lin->weight.sizes()) + " (is config.json from another model?)");
    if (bytes) *bytes += q->bytes();
    lin->set_quantized_weight(std::move(q));
    ++count;
  }
  if (count == 0)
    throw CheckpointError(dir + ": config.json says the weights are in 4 bits (bitsandbytes) but "
                                "no weight has a quant_state entry: is the folder complete?");
  return count;
}

WeightGetter model_weights(const std::string& dir, CausalLM& model, uint64_t seed,
                           std::string* head_note) {
  auto reader = std::make_shared<CheckpointReader>(CheckpointReader::open(dir));
  std::map<std::string, std::vector<int64_t>> own, head;
  for (auto& [name, shape] : model->expected_shapes())
    (is_value_head_tensor(name) ? head : own)[name] = shape;
  // A 4-bit weight (load_bnb_4bit_weights) is the folder's `<name>.weight` and its quant_state
  // entries, read already: expected as they are.
  std::set<std::string> quantized;  // "<module>.weight" of every 4-bit linear
  for (const auto& item : model->named_modules())
    if (auto* lin = item.value()->as<LinearImpl>(); lin && lin->quant)
      quantized.insert(item.key() + ".weight");
  if (!quantized.empty())
    for (const auto& name : reader->names()) {
      // "<module>.weight" itself or one of its entries ("<module>.weight.absmax", ...).
      const auto at = name.find(".weight");
      const bool boundary = at != std::string::npos && (at + 7 == name.size() || name[at + 7] == '.');
      if (boundary && quantized.count(name.substr(0, at + 7)))
        own[name] = reader->info(name).shape;
    }
  reader->check_shapes(own);
  if (head.empty())
    return [reader](const std::string& name) { return reader->tensor(name); };

  namespace fs = std::filesystem;
  const fs::path file = fs::path(dir) / kValueHeadFile;
  std::error_code ec;
  auto values = std::make_shared<std::map<std::string, torch::Tensor>>();
  if (fs::exists(file, ec)) {
    const SafetensorsFile f = SafetensorsFile::open(file.string());
    for (const auto& [name, shape] : head) {
      if (!f.has(name))
        throw CheckpointError(file.string() + ": no tensor '" + name +
                              "' (a value head file holds v_head.summary.weight and "
                              "v_head.summary.bias); remove the file to start a new head");
      if (f.info(name).shape != shape)
        throw CheckpointError(file.string() + ": tensor '" + name + "' has shape " +
                              c10::str(f.info(name).shape) + ", the model's hidden size implies " +
                              c10::str(shape) + " (a value head of another model?)");
      (*values)[name] = f.tensor(name);
    }
    if (head_note) *head_note = "value head read from " + file.string();
  } else {
    if (fs::exists(fs::path(dir) / "value_head.bin", ec))
      throw CheckpointError((fs::path(dir) / "value_head.bin").string() +
                            ": a value head in PyTorch's pickle form, which studio-train does "
                            "not read; save it as value_head.safetensors (safetensors.torch."
                            "save_file) or remove it to start a new head");
    ValueHead fresh(model->info().hidden_size, torch::TensorOptions().dtype(torch::kFloat));
    fresh->reset(seed);
    for (const auto& item : fresh->named_parameters(/*recurse=*/true))
      (*values)["v_head." + item.key()] = item.value().detach();
    if (head_note)
      *head_note = "value head initialised (seed " + std::to_string(seed) + ", TRL's default): " +
                   dir + " has no " + kValueHeadFile;
  }
  return [reader, values](const std::string& name) {
    const auto it = values->find(name);
    return it != values->end() ? it->second : reader->tensor(name);
  };
}

void load_weights(CausalLM& model, const std::string& dir, uint64_t seed, std::string* head_note) {
  model->load_hf_state(model_weights(dir, model, seed, head_note));
}

CausalLM load_model_folder(const std::string& dir, const ModelOptions& options) {
  std::string error;
  auto info = read_model_info(dir, error);
  if (!info) throw std::runtime_error(error);
  if (info->quantized_on_disk() && !info->bnb_4bit_on_disk())
    throw std::runtime_error(dir + ": the checkpoint is quantized (" + info->quantization.method +
                             ", " + std::to_string(info->quantization.bits) +
                             "-bit), which studio-train does not read: it reads bitsandbytes' "
                             "4-bit checkpoints and unquantized ones");
  std::optional<DeferredAllocation> no_bytes;
  if (info->bnb_4bit_on_disk()) no_bytes.emplace();
  CausalLM model(*info, options);
  if (no_bytes) {
    // The 4-bit weights as stored; only the others get full-size bytes.
    no_bytes.reset();
    load_bnb_4bit_weights(model, dir);
    allocate_deferred(*model);
  }
  load_weights(model, dir);
  return model;
}

void init_model_folder(const std::string& config_json, const std::string& out_dir, uint64_t seed,
                       torch::Dtype dtype) {
  std::string error;
  auto info = read_model_info(config_json, error);
  if (!info) throw std::runtime_error(error);
  ModelOptions opt;
  opt.dtype = torch::kFloat;
  CausalLM model(*info, opt);
  model->init_weights(seed);
  HfSaveOptions save;
  save.dtype = dtype;
  const std::filesystem::path cfg(config_json);
  save.source_dir = std::filesystem::is_directory(cfg) ? cfg.string() : cfg.parent_path().string();
  save_hf_model(out_dir, model->hf_state(), save);
}

}  // namespace studio::trainer
