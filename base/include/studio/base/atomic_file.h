#pragma once
// Atomic file replacement: write to a temporary file beside the target, flush it to disk, then
// rename it over the target. Readers see the old file or the new one, never a half-written file.
#include <cstddef>
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
// Any kind of file: one the user names may be a pipe (`<(...)`) meant to be read to its end.
bool read_file(const std::string& path, std::string& out, std::string& error);

// Opens `path` for reading only when it is a regular file (symbolic links followed): a FIFO, a
// device such as /dev/zero or a folder is refused without blocking and without being read.
// Returns the descriptor (the caller closes it), or -1 with `error` naming the path and what was
// found there ("a FIFO (named pipe), not a regular file"); errno is ENOENT when nothing is there.
int open_regular_file(const std::string& path, std::string& error);

// The caps of read_small_file for the metadata the program finds by itself in folders.
inline constexpr std::size_t kRunMetadataMaxBytes = std::size_t{1} << 20;    // status.json, ...
inline constexpr std::size_t kJsonMetadataMaxBytes = std::size_t{64} << 20;  // config.json, index

// Reads a whole small file that the program found rather than the user named (a hub ref, a
// model's config.json, a run's status.json): only a regular file (symbolic links followed), and
// only when it holds at most `max_bytes`. A link to /dev/zero, a FIFO or a folder is refused
// without reading (the open cannot block), and a file larger than the cap without holding it, so
// a damaged or hostile folder costs an error, not a hang or the machine's memory. `error` names
// the path and what was found there ("PATH: a FIFO (named pipe), not a regular file", "PATH:
// 12345678 bytes, more than the 4096 a file of its kind may hold").
bool read_small_file(const std::string& path, std::size_t max_bytes, std::string& out,
                     std::string& error);

}  // namespace studio
