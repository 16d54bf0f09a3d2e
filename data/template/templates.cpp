// The chat templates, as LLaMA-Factory registers them (src/llamafactory/data/template.py,
// v0.9.2 and later). Every string here is listed in docs/templates.md; a test renders each one.
#include <algorithm>
#include <map>

#include "studio/data/chat_template.h"

namespace studio::data {
namespace {

SlotElement text(std::string s) { return {SlotElement::Kind::Text, std::move(s)}; }
SlotElement bos() { return {SlotElement::Kind::Bos, {}}; }
SlotElement eos() { return {SlotElement::Kind::Eos, {}}; }

// LF's register_template fills unset formatters: user and system default to "{{content}}", the
// observation to the user's format, the assistant to "{{content}}" + eos (no eos with
// efficient_eos). Tool calls (LF's function formatters) are not rendered by this engine.
ChatTemplate with_defaults(ChatTemplate t) {
  if (t.user.empty()) t.user = {text("{{content}}")};
  if (t.system.empty()) t.system = {text("{{content}}")};
  if (t.observation.empty()) t.observation = t.user;
  if (t.assistant.empty()) {
    t.assistant = {text("{{content}}")};
    if (!t.efficient_eos) t.assistant.push_back(eos());
  }
  return t;
}

// Qwen2/2.5/3 ChatML; qwen, qwen3 and qwen3_nothink differ only in the default system prompt
// and the thought handling.
ChatTemplate chatml(std::string name) {
  ChatTemplate t;
  t.name = std::move(name);
  t.user = {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")};
  t.assistant = {text("{{content}}<|im_end|>\n")};
  t.system = {text("<|im_start|>system\n{{content}}<|im_end|>\n")};
  t.observation = {text(
      "<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n")};
  t.stop_words = {"<|im_end|>"};
  t.replace_eos = true;
  return t;
}

ChatTemplate llama3() {
  ChatTemplate t;
  t.name = "llama3";
  t.user = {text("<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n")};
  t.assistant = {text("{{content}}<|eot_id|>")};
  t.system = {text("<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>")};
  t.observation = {text("<|start_header_id|>ipython<|end_header_id|>\n\n{{content}}<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n")};
  t.prefix = {bos()};
  t.stop_words = {"<|eot_id|>", "<|eom_id|>"};
  t.replace_eos = true;
  return t;
}

// Mistral tokenizer v3 ("mistral" in LF): Llama2Template, the system prompt goes inside the
// first [INST] block.
ChatTemplate mistral() {
  ChatTemplate t;
  t.name = "mistral";
  t.user = {text("[INST] {{content}}[/INST]")};
  t.assistant = {text(" {{content}}"), eos()};
  t.system = {text("{{content}}\n\n")};
  t.observation = {text("[TOOL_RESULTS] {\"content\": {{content}}}[/TOOL_RESULTS]")};
  t.prefix = {bos()};
  t.system_in_first_user = true;
  return t;
}

ChatTemplate default_template() {
  ChatTemplate t;
  t.name = "default";
  t.user = {text("Human: {{content}}"), eos(), text("\nAssistant:")};
  t.assistant = {text("{{content}}"), eos(), text("\n")};
  t.system = {text("System: {{content}}"), eos(), text("\n")};
  return t;
}

ChatTemplate alpaca() {
  ChatTemplate t;
  t.name = "alpaca";
  t.user = {text("### Instruction:\n{{content}}\n\n### Response:\n")};
  t.assistant = {text("{{content}}"), eos(), text("\n\n")};
  t.default_system =
      "Below is an instruction that describes a task. Write a response that appropriately "
      "completes the request.\n\n";
  return t;
}

ChatTemplate empty() {
  ChatTemplate t;
  t.name = "empty";
  t.assistant = {text("{{content}}")};  // LF's "empty" learns no eos
  return t;
}

std::map<std::string, ChatTemplate, std::less<>> build_registry() {
  ChatTemplate qwen = chatml("qwen");
  qwen.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  ChatTemplate qwen3 = chatml("qwen3");
  qwen3.reasoning = true;
  ChatTemplate qwen3_nothink = chatml("qwen3_nothink");

  std::map<std::string, ChatTemplate, std::less<>> all;
  for (ChatTemplate t : {qwen, qwen3, qwen3_nothink, llama3(), mistral(), default_template(),
                         alpaca(), empty()}) {
    std::string name = t.name;
    all.emplace(std::move(name), with_defaults(std::move(t)));
  }
  return all;
}

const std::map<std::string, ChatTemplate, std::less<>>& registry() {
  static const auto all = build_registry();
  return all;
}

}  // namespace

const std::vector<std::string>& template_names() {
  static const std::vector<std::string> names = {"qwen",    "qwen3",   "qwen3_nothink", "llama3",
                                                 "mistral", "default", "alpaca",        "empty"};
  return names;
}

const ChatTemplate& find_template(std::string_view name) {
  const auto& all = registry();
  auto it = all.find(name);
  if (it != all.end()) return it->second;
  std::string allowed;
  for (const auto& n : template_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw TemplateError("unknown template '" + std::string(name) + "' (allowed: " + allowed + ")");
}

}  // namespace studio::data
