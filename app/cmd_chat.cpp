// studio-train chat: talk to a model folder (a run's final model or one of its checkpoints), in the
// terminal, for one --prompt, or through a JSON-lines protocol (--json) that the studio's Chat tab
// speaks. Generation itself is trainer/generate.cpp; this file resolves the template, the stop
// tokens and the device, and runs the conversation.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "studio/model_facts/hub_cache.h"
#include "studio/config/config_io.h"
#include "studio/base/json_file.h"
#include "studio/model_facts/model_info.h"
#include "studio/base/whole_number.h"
#include "studio/data/chat_template.h"
#include "studio/runs/chat_protocol.h"
#include "studio/trainer/generate.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model_folder.h"

namespace studio::app {
namespace {

namespace fs = std::filesystem;
namespace protocol = studio::chat;  // the lines of --json
using nlohmann::json;

struct TemplateChoice {
  std::string name;
  std::string source;  // "--template", "config.yaml" or "guessed"
  std::string note;    // where it came from, for the terminal
};

// --template, else the `template` key of the run's config.yaml (in the model folder, or beside
// a checkpoint-STEP folder), else a guess from the tokenizer's special tokens.
TemplateChoice choose_template(const std::optional<std::string>& given, const fs::path& model_dir,
                               const data::Tokenizer& tokenizer) {
  if (given) return {*given, "--template", "given with --template"};
  for (const fs::path& dir : {model_dir, model_dir.parent_path()}) {
    const fs::path cfg = dir / "config.yaml";
    std::error_code ec;
    if (!fs::is_regular_file(cfg, ec)) continue;
    const LoadResult loaded = load_config_file(cfg.string());
    if (!loaded.config.template_name.empty())
      return {loaded.config.template_name, "config.yaml", "from " + cfg.string()};
  }
  const auto has = [&](const char* token) { return tokenizer.token_to_id(token).has_value(); };
  std::string name = "default";
  if (has("<|im_start|>") && has("<|im_end|>")) name = "qwen";
  else if (has("<|start_header_id|>") && has("<|eot_id|>")) name = "llama3";
  else if (has("[INST]") && has("[/INST]")) name = "mistral";
  return {name, "guessed",
          "guessed from the tokenizer's special tokens (no config.yaml beside the model); pass "
          "--template NAME to choose"};
}

// The ids that end an answer: the template's eos (its first stop word where it replaces the
// tokenizer's), its other stop words that are single tokens, the tokenizer's eos, and the eos ids
// of config.json and generation_config.json. Extra stop words (--stop) that are one token join
// the ids; longer ones are matched in the text.
trainer::StopCriteria stop_criteria(const data::TemplateEncoder& encoder, const ModelInfo& info,
                                    const fs::path& model_dir,
                                    const std::vector<std::string>& extra_words) {
  std::set<int32_t> ids{encoder.eos_id()};
  trainer::StopCriteria stop;
  const data::Tokenizer& tok = encoder.tokenizer();
  if (const auto eos = tok.eos_id()) ids.insert(*eos);
  for (int64_t id : info.eos_token_ids) ids.insert(static_cast<int32_t>(id));
  json gen;
  std::string error;
  if (fs::exists(model_dir / "generation_config.json") &&
      read_json_file((model_dir / "generation_config.json").string(), gen, error) &&
      gen.is_object() && gen.contains("eos_token_id")) {
    // Ids that are no token id (not whole, or past int32) are left out, not cut to one.
    auto add = [&ids](const json& x) {
      int32_t id = 0;
      if (json_whole(x, id).empty()) ids.insert(id);
    };
    const json& e = gen["eos_token_id"];
    if (e.is_array())
      for (const json& x : e) add(x);
    else
      add(e);
  }
  std::vector<std::string> words = encoder.chat_template().stop_words;
  words.insert(words.end(), extra_words.begin(), extra_words.end());
  for (const std::string& w : words) {
    if (const auto id = tok.token_to_id(w)) ids.insert(*id);
    else if (!w.empty()) stop.words.push_back(w);
  }
  for (int32_t id : ids)
    if (id >= 0 && id < info.vocab_size) stop.ids.push_back(id);
  return stop;
}

std::optional<double> number_option(cli::Args& args, const std::string& name, std::string& error) {
  const auto text = args.value(name);
  if (!text) return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(*text, &used);
    if (used == text->size()) return v;
  } catch (const std::exception&) {
  }
  error = name + ": '" + *text + "' is not a number";
  return std::nullopt;
}

// The sampling options of the command line over LLaMA-Factory-like defaults, except that
// the default is greedy (temperature 0) so that two checkpoints answer comparably.
bool read_sampling(cli::Args& args, trainer::SamplingOptions& o, std::string& error) {
  if (auto v = number_option(args, "--max-new-tokens", error)) o.max_new_tokens = int64_t(*v);
  if (auto v = number_option(args, "--temperature", error)) o.temperature = *v;
  if (auto v = number_option(args, "--top-p", error)) o.top_p = *v;
  if (auto v = number_option(args, "--top-k", error)) o.top_k = int64_t(*v);
  if (auto v = number_option(args, "--repetition-penalty", error)) o.repetition_penalty = *v;
  if (auto v = number_option(args, "--seed", error)) o.seed = uint64_t(std::max(0.0, *v));
  if (!error.empty()) return false;
  error = trainer::sampling_options_error(o);
  return error.empty();
}

struct Device {
  torch::Device device = torch::kCPU;
  torch::Dtype dtype = torch::kFloat;
};

bool choose_device(const std::optional<std::string>& device_text,
                   const std::optional<std::string>& dtype_text, const ModelInfo& info,
                   Device& out, std::string& error) {
  const std::string d = device_text.value_or("auto");
  if (d == "auto") {
    out.device = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
  } else {
    try {
      out.device = torch::Device(d);
    } catch (const std::exception&) {
      return error = "--device: '" + d + "' is not a device (cpu, cuda, cuda:N or auto)", false;
    }
    if (out.device.is_cuda() && !torch::cuda::is_available())
      return error = "--device " + d + ": no CUDA device is visible to this process", false;
    if (out.device.is_cuda() && out.device.has_index() &&
        out.device.index() >= static_cast<int>(torch::cuda::device_count()))
      return error = "--device " + d + ": this machine has " +
                     std::to_string(torch::cuda::device_count()) + " CUDA devices",
             false;
  }
  const std::string t = dtype_text.value_or("auto");
  if (t == "auto") {  // the checkpoint's own dtype on a GPU; fp32 on the CPU
    out.dtype = torch::kFloat;
    if (out.device.is_cuda())
      if (auto dt = trainer::dtype_from_torch_dtype_name(info.torch_dtype)) out.dtype = *dt;
  } else if (auto dt = trainer::dtype_from_torch_dtype_name(t)) {
    out.dtype = *dt;
  } else {
    return error = "--dtype: '" + t + "' is not one of auto, float32, bfloat16, float16", false;
  }
  return true;
}

// One conversation with one model; messages alternate user, assistant.
class ChatModel {
 public:
  ChatModel(trainer::CausalLM model, data::TemplateEncoder encoder, trainer::StopCriteria stop,
            bool enable_thinking)
      : model_(std::move(model)), encoder_(std::move(encoder)), stop_(std::move(stop)),
        enable_thinking_(enable_thinking) {}

  const trainer::StopCriteria& stop() const { return stop_; }

  // Throws std::invalid_argument for a conversation that cannot be answered.
  std::vector<int32_t> prompt_ids(std::vector<data::Message> messages,
                                  const std::string& system) const {
    if (messages.empty() || messages.back().role != data::Role::User)
      throw std::invalid_argument("the conversation must end with a user message");
    messages.push_back({data::Role::Assistant, ""});
    data::EncodeOptions opt;
    opt.enable_thinking = enable_thinking_;
    const auto turns = encoder_.encode_turns(messages, system, opt, /*one_turn=*/true);
    std::vector<int32_t> ids = turns.front().prompt;
    const int64_t context = model_->info().max_position_embeddings;
    if (context > 0 && static_cast<int64_t>(ids.size()) >= context)
      throw std::invalid_argument("the conversation is " + std::to_string(ids.size()) +
                                  " tokens, the model's context (max_position_embeddings) is " +
                                  std::to_string(context) + ": start a new conversation");
    return ids;
  }

  trainer::Generation answer(const std::vector<int32_t>& prompt,
                             const trainer::SamplingOptions& options,
                             const std::function<void(const std::string&)>& on_text,
                             const std::atomic<bool>* cancel) {
    return trainer::generate(model_, encoder_.tokenizer(), prompt, options, stop_, on_text,
                             cancel);
  }

 private:
  trainer::CausalLM model_;
  data::TemplateEncoder encoder_;
  trainer::StopCriteria stop_;
  bool enable_thinking_;
};

// A request of the JSON protocol over the command line's choices.
struct Request {
  std::vector<data::Message> messages;
  std::string system;
  trainer::SamplingOptions options;
};

// Throws std::invalid_argument for sampling choices out of range.
Request to_request(const protocol::Request& in, const trainer::SamplingOptions& defaults,
                   const std::string& default_system) {
  Request r;
  for (const protocol::Message& m : in.messages)  // roles checked by the reader
    r.messages.push_back({m.role == "user" ? data::Role::User : data::Role::Assistant, m.content});
  r.system = in.system.value_or(default_system);
  r.options = defaults;
  trainer::SamplingOptions& o = r.options;
  o.max_new_tokens = in.max_new_tokens.value_or(o.max_new_tokens);
  o.temperature = in.temperature.value_or(o.temperature);
  o.top_p = in.top_p.value_or(o.top_p);
  o.top_k = in.top_k.value_or(o.top_k);
  o.repetition_penalty = in.repetition_penalty.value_or(o.repetition_penalty);
  o.seed = in.seed.value_or(o.seed);
  if (const std::string why = trainer::sampling_options_error(o); !why.empty())
    throw std::invalid_argument(why);
  return r;
}

protocol::Answer answer_of(const trainer::Generation& g, const std::vector<int32_t>& prompt) {
  protocol::Answer a;
  a.text = g.text;
  a.ids.assign(g.ids.begin(), g.ids.end());
  a.prompt_ids.assign(prompt.begin(), prompt.end());
  a.prompt_tokens = g.prompt_tokens;
  a.new_tokens = static_cast<int64_t>(g.ids.size());
  a.stop = trainer::stop_reason_name(g.stop);
  a.seconds = g.seconds;
  a.prefill_seconds = g.prefill_seconds;
  // decoding speed: the first token comes out of the prefill
  const double decode = g.seconds - g.prefill_seconds;
  const auto n = static_cast<double>(g.ids.size());
  a.tokens_per_sec = n > 1 && decode > 0 ? (n - 1) / decode : 0.0;
  return a;
}

// --json without --prompt: requests from stdin, read on a thread of their own so that
// {"cancel": true} reaches the answer being generated.
int serve_json(ChatModel& chat, const trainer::SamplingOptions& defaults,
               const std::string& system) {
  // A request line read, waiting for its turn; a cancel that came before its turn marks it.
  struct Waiting {
    protocol::RequestLine line;
    bool cancelled = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::optional<Waiting>> queue;  // nullopt: end of input
  std::atomic<bool> cancel{false}, busy{false};
  std::mutex out_mu;
  const auto send = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(out_mu);
    std::cout << line << std::flush;
  };
  std::thread reader([&] {
    std::string text;
    int64_t number = 0;
    while (std::getline(std::cin, text)) {
      protocol::RequestLine line = protocol::read_request_line(text, ++number);
      if (line.kind == protocol::RequestLine::Kind::Blank) continue;
      if (line.kind == protocol::RequestLine::Kind::NotJson) {
        send(protocol::error_line(line.error));
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (line.kind == protocol::RequestLine::Kind::Cancel) {
        // The answer being generated, else the next one waiting (sent before the model was
        // ready, or before the request was picked up); nothing when nothing waits.
        if (busy.load()) {
          cancel.store(true);
        } else {
          for (auto& waiting : queue)
            if (waiting) {
              waiting->cancelled = true;
              break;
            }
        }
        continue;
      }
      queue.push_back(Waiting{std::move(line)});
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    queue.emplace_back(std::nullopt);
    cv.notify_one();
  });
  while (true) {
    std::optional<Waiting> next;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !queue.empty(); });
      next = std::move(queue.front());
      queue.pop_front();
      // Under the reader's lock: a cancel from now on reaches this answer.
      cancel.store(next && next->cancelled);
      busy.store(next.has_value());
    }
    if (!next) break;
    try {
      if (next->line.kind == protocol::RequestLine::Kind::Invalid)
        throw std::invalid_argument(next->line.error);
      const Request req = to_request(next->line.request, defaults, system);
      const std::vector<int32_t> prompt = chat.prompt_ids(req.messages, req.system);
      const trainer::Generation g = chat.answer(
          prompt, req.options, [&](const std::string& piece) { send(protocol::token_line(piece)); },
          &cancel);
      busy.store(false);
      send(protocol::done_line(answer_of(g, prompt)));
    } catch (const std::exception& e) {
      busy.store(false);
      send(protocol::error_line(e.what()));
    }
  }
  reader.join();
  return kExitOk;
}

// The terminal: one line per user message, the answer streamed, its numbers on stderr.
int interactive(ChatModel& chat, const trainer::SamplingOptions& options,
                const std::string& system) {
  std::vector<data::Message> history;
  std::cerr << "Type a message and press Enter; /clear starts a new conversation, /exit or "
               "Ctrl-D quits.\n";
  std::string line;
  while (true) {
    std::cout << "\nUser: " << std::flush;
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/clear") {
      history.clear();
      std::cerr << "(new conversation)\n";
      continue;
    }
    if (line.empty()) continue;
    history.push_back({data::Role::User, line});
    try {
      const std::vector<int32_t> prompt = chat.prompt_ids(history, system);
      std::cout << "Assistant: " << std::flush;
      const trainer::Generation g = chat.answer(
          prompt, options, [](const std::string& piece) { std::cout << piece << std::flush; },
          nullptr);
      std::cout << '\n';
      std::cerr << "[" << g.ids.size() << " tokens, " << answer_of(g, prompt).tokens_per_sec
                << " tokens/s, stop: " << trainer::stop_reason_name(g.stop) << "]\n";
      history.push_back({data::Role::Assistant, g.text});
    } catch (const std::exception& e) {
      history.pop_back();
      std::cerr << "studio-train chat: " << e.what() << '\n';
    }
  }
  return kExitOk;
}

}  // namespace

int cmd_chat(const Argv& argv) {
  cli::Args args(argv,
                 {"--model", "--template", "--system", "--prompt", "--max-new-tokens",
                  "--temperature", "--top-p", "--top-k", "--repetition-penalty", "--seed",
                  "--stop", "--device", "--dtype", "--enable-thinking"},
                 {"--json"});
  if (!args.ok()) return usage_error("chat: " + args.error());
  const auto model_arg = args.value("--model");
  if (!model_arg) return usage_error("chat: needs --model DIR (a model folder or checkpoint)");
  if (!args.positional().empty())
    return usage_error("chat: unexpected argument '" + args.positional().front() + "'");
  trainer::SamplingOptions sampling;
  std::string error;
  if (!read_sampling(args, sampling, error)) return usage_error("chat: " + error);
  const std::string thinking = args.value("--enable-thinking").value_or("true");
  if (thinking != "true" && thinking != "false")
    return usage_error("chat: --enable-thinking is true or false, got '" + thinking + "'");

  // A hub id (Qwen/Qwen2-0.5B-Instruct) is its snapshot in the local Hugging Face cache.
  std::string hub_error;
  const std::string model_path =
      resolve_model_dir(*model_arg, {}, "main", {}, hub_error).value_or(*model_arg);
  const fs::path model_dir = fs::absolute(model_path).lexically_normal();
  std::string info_error;
  const std::optional<ModelInfo> info = read_model_info(model_dir.string(), info_error);
  if (!info)
    throw std::runtime_error(
        (hub_error.empty() || !looks_like_hub_id(*model_arg) ? info_error : hub_error) +
        " (--model must be a Hugging Face model folder, a checkpoint-STEP folder, or a hub id "
        "in the local Hugging Face cache)");
  Device device;
  if (!choose_device(args.value("--device"), args.value("--dtype"), *info, device, error))
    return usage_error("chat: " + error);

  const auto t0 = std::chrono::steady_clock::now();
  const data::Tokenizer tokenizer = data::Tokenizer::load(model_dir.string());
  const TemplateChoice tmpl = choose_template(args.value("--template"), model_dir, tokenizer);
  data::TemplateEncoder encoder(data::find_template(tmpl.name), tokenizer);
  trainer::StopCriteria stop = stop_criteria(encoder, *info, model_dir, args.values("--stop"));
  trainer::ModelOptions options;
  options.device = device.device;
  options.dtype = device.dtype;
  options.warn = [](const std::string& text) { std::cerr << "studio-train chat: note: " << text << '\n'; };
  trainer::CausalLM model = trainer::load_model_folder(model_dir.string(), options);
  model->eval();
  int64_t parameters = 0;
  for (const auto& [name, p] : model->hf_state()) parameters += p.numel();
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string dtype_name = trainer::torch_dtype_name(device.dtype);
  const std::string system = args.value("--system").value_or("");
  ChatModel chat(std::move(model), std::move(encoder), stop, thinking == "true");

  if (args.flag("--json")) {
    protocol::ModelInfo ready;
    ready.model = model_dir.string();
    ready.architecture = info->architecture;
    ready.parameters = parameters;
    ready.template_name = tmpl.name;
    ready.template_source = tmpl.source;
    ready.device = device.device.str();
    ready.dtype = dtype_name;
    ready.stop_ids.assign(stop.ids.begin(), stop.ids.end());
    ready.stop_words = stop.words;
    ready.load_seconds = load_seconds;
    std::cout << protocol::ready_line(ready) << std::flush;
  } else {
    std::cerr << "studio-train chat: " << model_dir.string() << " (" << info->architecture
              << ", " << parameters << " parameters) on " << device.device.str() << " in "
              << dtype_name << "; template " << tmpl.name << " (" << tmpl.note << ")\n";
  }
  const auto prompt_text = args.value("--prompt");
  if (!prompt_text)
    return args.flag("--json") ? serve_json(chat, sampling, system)
                               : interactive(chat, sampling, system);

  const std::vector<int32_t> prompt = chat.prompt_ids({{data::Role::User, *prompt_text}}, system);
  if (args.flag("--json")) {
    const trainer::Generation g = chat.answer(
        prompt, sampling,
        [](const std::string& piece) { std::cout << protocol::token_line(piece) << std::flush; },
        nullptr);
    std::cout << protocol::done_line(answer_of(g, prompt));
    return kExitOk;
  }
  const trainer::Generation g = chat.answer(
      prompt, sampling, [](const std::string& piece) { std::cout << piece << std::flush; },
      nullptr);
  std::cout << '\n';
  std::cerr << "[" << g.ids.size() << " tokens, stop: " << trainer::stop_reason_name(g.stop)
            << "]\n";
  return kExitOk;
}

}  // namespace studio::app
