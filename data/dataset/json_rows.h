#pragma once
// Streaming the rows of a data file: a JSON array or JSON lines, decided by the first character
// (after a UTF-8 BOM and whitespace), not by the file extension. Only one row is held at a time:
// JSON lines are read line by line, JSON arrays through nlohmann's SAX interface.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace studio::data::detail {

struct RawRow {
  nlohmann::json value;
  int64_t line = 0;   // 1-based line where the row starts
  int64_t index = 0;  // 1-based row number in the file
};

// Called per row in file order; returns false to stop reading (max_samples).
using RowSink = std::function<bool(RawRow&&)>;
// Called for a JSON line that does not parse, with its line and nlohmann's message; it throws
// to stop, or returns to skip the line. Malformed JSON arrays always throw: their structure is
// lost from the first error on.
using MalformedSink = std::function<void(int64_t line, int64_t column, const std::string& what)>;

// Throws DatasetError ("FILE:LINE:COL: ...") for a file that cannot be read or is neither form.
// Returns the number of rows delivered.
int64_t read_rows(const std::string& path, const RowSink& on_row, const MalformedSink& on_malformed);

}  // namespace studio::data::detail
