// The events.jsonl stream parser and the status.json reader on arbitrary bytes, fed in two pieces
// split where the first byte says. Invariants: no crash, no exception, the same events whatever
// the split, and every event read without repairs is one the writer accepts as it is.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "studio/config/events.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);

  studio::EventStreamParser whole;
  const std::vector<studio::Event> once = whole.feed(bytes);
  studio::EventStreamParser split;
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
    if (e.raw != twice[i].raw || e.line != twice[i].line) std::abort();
    (void)e.step();
    if (!e.issues.empty()) continue;
    const std::string refused = writer->write(e.raw);
    if (!refused.empty()) {
      std::fprintf(stderr, "line %llu read without repairs, but the writer says: %s\n",
                   static_cast<unsigned long long>(e.line), refused.c_str());
      std::abort();
    }
  }

  studio::RunStatus status;
  std::string error;
  std::vector<studio::FieldIssue> issues;
  if (studio::RunStatus::parse(std::string(bytes), status, error, &issues))
    (void)nlohmann::json(status).dump();
  return 0;
}
