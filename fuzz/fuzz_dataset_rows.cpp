// Dataset files: arbitrary bytes read as a data file (JSON lines or a JSON array) and each row
// converted as alpaca and sharegpt (OpenAI tags too), for SFT and DPO. Invariants: no crash, only
// DatasetError (from the reader) and RowError (from a row).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "../data/dataset/converter.h"
#include "../data/dataset/json_rows.h"

namespace {

using namespace studio::data;

std::vector<DatasetAttr> shapes() {
  DatasetAttr alpaca;
  alpaca.name = "alpaca";
  alpaca.history = "history";
  alpaca.system = "system";
  DatasetAttr alpaca_dpo = alpaca;
  alpaca_dpo.ranking = true;
  DatasetAttr sharegpt;
  sharegpt.name = "sharegpt";
  sharegpt.formatting = Formatting::Sharegpt;
  sharegpt.system = "system";
  sharegpt.tools = "tools";
  DatasetAttr openai = sharegpt;
  openai.messages = "messages";
  openai.use_openai_tags();
  openai.tags_given = true;
  DatasetAttr sharegpt_dpo = sharegpt;
  sharegpt_dpo.ranking = true;
  return {alpaca, alpaca_dpo, sharegpt, openai, sharegpt_dpo};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<DatasetAttr> attrs = shapes();
  // The reader takes a path: an anonymous in-memory file.
  const int fd = memfd_create("fuzz-rows", 0);
  if (fd < 0) std::abort();
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    detail::read_rows(
        path,
        [&](detail::RawRow&& row) {
          for (const DatasetAttr& attr : attrs) {
            try {
              (void)detail::convert_row(attr, row.value, attr.ranking);
            } catch (const detail::RowError&) {
            }
          }
          return true;
        },
        [](std::int64_t, std::int64_t, const std::string&) {});
  } catch (const DatasetError&) {
  }
  ::close(fd);
  return 0;
}
