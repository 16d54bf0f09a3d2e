// The events.jsonl stream parser (our lines, and LLaMA-Factory's trainer_log.jsonl lines), the
// status.json reader and Hugging Face's trainer_state.json reader on arbitrary bytes, the stream
// fed in two pieces split where the first byte says.
// Invariants: no crash, no exception, the same events whatever the split, and every event of
// ours read without repairs is one the writer accepts as it is. Seeds include Python's NaN,
// Infinity and -Infinity (a diverged step), which read as numbers.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "studio/runs/events.h"
#include "studio/base/json_file.h"

namespace {

void check(std::string_view bytes, std::size_t cut, studio::LineFormat format);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  check(bytes, cut, studio::LineFormat::Events);
  check(bytes, cut, studio::LineFormat::TrainerLog);

  studio::RunStatus status;
  std::string error;
  std::vector<studio::FieldIssue> issues;
  if (studio::RunStatus::parse(std::string(bytes), status, error, &issues))
    (void)nlohmann::json(status).dump();

  // trainer_state.json: read whole; a failure says why and makes no events.
  std::vector<studio::Event> state;
  studio::ReadProblems problems;
  error.clear();
  const bool read = studio::parse_trainer_state(bytes, state, error, problems);
  if (read != error.empty() || (!read && !state.empty())) std::abort();
  for (const studio::Event& e : state)
    if (!e.step() || e.amends) std::abort();
  (void)problems.summary("trainer_state.json");
  return 0;
}

namespace {

void check(std::string_view bytes, std::size_t cut, studio::LineFormat format) {
  constexpr std::size_t kMax = studio::EventStreamParser::kDefaultMaxLineBytes;
  studio::EventStreamParser whole(kMax, format);
  const std::vector<studio::Event> once = whole.feed(bytes);
  studio::EventStreamParser split(kMax, format);
  std::vector<studio::Event> twice = split.feed(bytes.substr(0, cut));
  split.feed(bytes.substr(cut), twice);
  if (once.size() != twice.size() || whole.consumed() != split.consumed() ||
      whole.problems() != split.problems()) {
    std::fprintf(stderr, "the split at %zu changed what was read\n", cut);
    std::abort();
  }
  (void)whole.problems().summary("events.jsonl");

  static studio::EventWriter* writer = [] {
    auto* w = new studio::EventWriter;
    if (!w->open("/dev/null").empty()) std::abort();
    return w;
  }();
  for (std::size_t i = 0; i < once.size(); ++i) {
    const studio::Event& e = once[i];
    // Compared as written: a NaN (Python's word, read as the number) is not equal to itself.
    if (studio::dump_json_python(e.raw) != studio::dump_json_python(twice[i].raw) ||
        e.line != twice[i].line)
      std::abort();
    (void)e.step();
    // trainer_log.jsonl lines are LLaMA-Factory's, not ours to write again
    if (!e.issues.empty() || format != studio::LineFormat::Events) continue;
    const std::string refused = writer->write(e.raw);
    if (!refused.empty()) {
      std::fprintf(stderr, "line %llu read without repairs, but the writer says: %s\n",
                   static_cast<unsigned long long>(e.line), refused.c_str());
      std::abort();
    }
  }
}

}  // namespace
