// The chat templates, as LLaMA-Factory registers them (src/llamafactory/data/template.py; the
// strings of 0.9.5, which tst_chat_template_lf compares token by token). Every string here is
// listed in docs/templates.md; a test renders each one.
#include <vector>

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

// LF's Llama2Template family: the system text goes in front of the first user message.
ChatTemplate llama2() {
  ChatTemplate t;
  t.name = "llama2";
  t.user = {bos(), text("[INST] {{content}} [/INST]")};  // a bos before every query
  t.system = {text("<<SYS>>\n{{content}}\n<</SYS>>\n\n")};
  t.system_in_first_user = true;
  return t;
}

// Ministral: no space inside [INST]...[/INST], the system text fused into the first query.
ChatTemplate ministral() {
  ChatTemplate t;
  t.name = "ministral";
  t.user = {text("[INST]{{content}}[/INST]")};
  t.system = {text("{{content}}\n\n")};
  t.observation = {text("[TOOL_RESULTS]{\"content\": {{content}}}[/TOOL_RESULTS]")};
  t.prefix = {bos()};
  t.system_in_first_user = true;
  return t;
}

// Mistral Small: as ministral, but with a system block of its own (a plain Template in LF).
ChatTemplate mistral_small() {
  ChatTemplate t = ministral();
  t.name = "mistral_small";
  t.system = {text("[SYSTEM_PROMPT]{{content}}[/SYSTEM_PROMPT]")};
  t.system_in_first_user = false;
  return t;
}

// Gemma 1/2/3: Llama2Template with the system text in front of the first query. gemma and gemma3
// end answers with <end_of_turn> as the eos; gemma2 is efficient_eos with the tokenizer's eos.
ChatTemplate gemma(std::string name) {
  ChatTemplate t;
  t.name = std::move(name);
  t.user = {text("<start_of_turn>user\n{{content}}<end_of_turn>\n<start_of_turn>model\n")};
  t.assistant = {text("{{content}}<end_of_turn>\n")};
  t.system = {text("{{content}}\n\n")};
  t.observation = {text("<start_of_turn>tool\n{{content}}<end_of_turn>\n<start_of_turn>model\n")};
  t.prefix = {bos()};
  t.stop_words = {"<end_of_turn>"};
  t.replace_eos = true;
  t.system_in_first_user = true;
  return t;
}

ChatTemplate phi() {
  ChatTemplate t;
  t.name = "phi";
  t.user = {text("<|user|>\n{{content}}<|end|>\n<|assistant|>\n")};
  t.assistant = {text("{{content}}<|end|>\n")};
  t.system = {text("<|system|>\n{{content}}<|end|>\n")};
  t.stop_words = {"<|end|>"};
  t.replace_eos = true;
  return t;
}

ChatTemplate phi4() {
  ChatTemplate t;
  t.name = "phi4";
  t.user = {text("<|im_start|>user<|im_sep|>{{content}}<|im_end|><|im_start|>assistant<|im_sep|>")};
  t.assistant = {text("{{content}}<|im_end|>")};
  t.system = {text("<|im_start|>system<|im_sep|>{{content}}<|im_end|>")};
  t.stop_words = {"<|im_end|>"};
  t.replace_eos = true;
  return t;
}

// GLM-4: a text prefix (not the tokenizer's bos), the answer starts with its newline, and
// efficient_eos with the tokenizer's eos.
ChatTemplate glm4() {
  ChatTemplate t;
  t.name = "glm4";
  t.user = {text("<|user|>\n{{content}}<|assistant|>")};
  t.assistant = {text("\n{{content}}")};
  t.system = {text("<|system|>\n{{content}}")};
  t.observation = {text("<|observation|>\n{{content}}<|assistant|>")};
  t.prefix = {text("[gMASK]<sop>")};
  t.stop_words = {"<|user|>", "<|observation|>"};
  t.efficient_eos = true;
  return t;
}

// DeepSeek V3 and R1 (R1 adds LF's ReasoningTemplate); answers end with the tokenizer's eos.
ChatTemplate deepseek(std::string name) {
  ChatTemplate t;
  t.name = std::move(name);
  t.user = {text("<｜User｜>{{content}}<｜Assistant｜>")};  // U+FF5C, not |
  t.prefix = {bos()};
  return t;
}

ChatTemplate vicuna() {
  ChatTemplate t;
  t.name = "vicuna";
  t.user = {text("USER: {{content}} ASSISTANT:")};
  t.default_system =
      "A chat between a curious user and an artificial intelligence assistant. The assistant "
      "gives helpful, detailed, and polite answers to the user's questions.";
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

// In the order the error message lists them: the first eight, then the rest as docs/templates.md.
std::vector<ChatTemplate> build_templates() {
  ChatTemplate qwen = chatml("qwen");
  qwen.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  ChatTemplate qwen3 = chatml("qwen3");
  qwen3.reasoning = true;
  ChatTemplate qwen3_5 = chatml("qwen3_5");  // differs from qwen3 in tool calls only
  qwen3_5.reasoning = true;
  ChatTemplate qwen3_nothink = chatml("qwen3_nothink");
  // LF's copies for Qwen3.5/3.6 folders: tool calls aside, the renderings of qwen3_nothink and
  // qwen3 (thoughts).
  ChatTemplate qwen3_5_nothink = chatml("qwen3_5_nothink");
  ChatTemplate qwen3_6 = chatml("qwen3_6");
  qwen3_6.reasoning = true;

  ChatTemplate plain_chatml = chatml("chatml");  // LF's "chatml": its own tool role
  plain_chatml.observation = {
      text("<|im_start|>tool\n{{content}}<|im_end|>\n<|im_start|>assistant\n")};
  plain_chatml.stop_words = {"<|im_end|>", "<|im_start|>"};
  ChatTemplate yi = chatml("yi");  // <|im_end|> is text here: answers carry no eos element
  yi.observation = {};
  yi.replace_eos = false;

  ChatTemplate gemma2 = gemma("gemma2");
  gemma2.stop_words = {"<eos>", "<end_of_turn>"};
  gemma2.replace_eos = false;
  gemma2.efficient_eos = true;

  ChatTemplate deepseekr1 = deepseek("deepseekr1");
  deepseekr1.reasoning = true;

  std::vector<ChatTemplate> all;
  for (ChatTemplate t :
       {qwen, qwen3, qwen3_nothink, llama3(), mistral(), default_template(), alpaca(), empty(),
        llama2(), plain_chatml, gemma("gemma"), gemma2, gemma("gemma3"), phi(), phi4(), glm4(),
        deepseek("deepseek3"), deepseekr1, qwen3_5, mistral_small(), ministral(), vicuna(), yi,
        qwen3_5_nothink, qwen3_6})
    all.push_back(with_defaults(std::move(t)));
  return all;
}

const std::vector<ChatTemplate>& templates() {
  static const std::vector<ChatTemplate> all = build_templates();
  return all;
}

}  // namespace

const std::vector<std::string>& template_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ChatTemplate& t : templates()) out.push_back(t.name);
    return out;
  }();
  return names;
}

const ChatTemplate& find_template(std::string_view name) {
  for (const ChatTemplate& t : templates())
    if (t.name == name) return t;
  std::string allowed;
  for (const auto& n : template_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw TemplateError("unknown template '" + std::string(name) + "' (allowed: " + allowed + ")");
}

}  // namespace studio::data
