#pragma once
// Atomic file replacement: write to a temporary file beside the target, flush it to disk, then
// rename it over the target. Readers see the old file or the new one, never a half-written file.
#include <string>
#include <string_view>

namespace studio {

// Writes `content` to `path` atomically. Returns an empty string on success, otherwise a message
// naming the path and the system error; the target is left untouched on failure.
std::string write_file_atomic(const std::string& path, std::string_view content);

// The mode a new file gets from open(..., 0666): 0666 without the process's umask bits, so that
// files written through a temporary (mkstemp makes them 0600) end up as any other file would,
// and private under `umask 077` (a remote run). The umask is read from /proc/self/status, not
// set and restored, which would race with other threads creating files.
unsigned default_file_mode();

// Reads a whole file. Returns false and fills `error` (naming the path) when it cannot be read.
bool read_file(const std::string& path, std::string& out, std::string& error);

}  // namespace studio
