#pragma once
// A training example after its dataset format (alpaca, sharegpt, OpenAI messages) has been read:
// what LLaMA-Factory's converters produce (_prompt, _response, _system, _tools) and what a chat
// template turns into tokens.
#include <string>
#include <string_view>
#include <vector>

namespace studio::data {

enum class Role { User, Assistant, System, Function, Observation };

std::string_view to_string(Role role);

struct Message {
  Role role = Role::User;
  std::string content;
};

struct Conversation {
  // Alternating user (or observation) and assistant (or function) messages, ending with the
  // user message the response answers: an odd count.
  std::vector<Message> prompt;
  // One assistant message for SFT; two (chosen, then rejected) for preference data.
  std::vector<Message> response;
  std::string system;  // empty: the template's default system prompt, if it has one
};

}  // namespace studio::data
