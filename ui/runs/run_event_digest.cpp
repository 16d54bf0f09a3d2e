#include "studio/ui/runs/run_event_digest.h"

#include <filesystem>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace studio::ui {
namespace {

// Reads up to `size` bytes at `offset`; returns what was read (short at the end of the file).
std::string readAt(int fd, std::uint64_t offset, std::size_t size) {
  std::string buf(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, buf.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  buf.resize(got);
  return buf;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

constexpr std::size_t kChunk = 64 << 10;

}  // namespace

RunEventDigest::RunEventDigest(std::string eventsPath) : path_(std::move(eventsPath)) {}
RunEventDigest::~RunEventDigest() = default;
RunEventDigest::RunEventDigest(RunEventDigest&&) noexcept = default;
RunEventDigest& RunEventDigest::operator=(RunEventDigest&&) noexcept = default;

void RunEventDigest::update() {
  if (studio::line_format_of(path_) == studio::LineFormat::TrainerState) {
    updateTrainerState();
    return;
  }
  struct stat st {};
  if (!exists_ && ::stat(path_.c_str(), &st) != 0 && errno == ENOENT) {
    // Not there (yet): the folder's events may be in another file by now (a LLaMA-Factory run
    // writes trainer_log.jsonl once training starts).
    const std::string now = studio::run_events_file(studio::run_folder_of(path_));
    if (now != path_) {
      path_ = now;
      reader_.reset();
      if (studio::line_format_of(path_) == studio::LineFormat::TrainerState) {
        updateTrainerState();
        return;
      }
    }
  }
  if (::stat(path_.c_str(), &st) != 0) {
    error_ = errno == ENOENT ? std::string() : "cannot stat " + path_ + ": " + std::strerror(errno);
    if (exists_) {  // the file went away: what it said is gone too
      clearFacts();
      reader_.reset();
      exists_ = false;
    }
    return;
  }
  exists_ = true;
  error_.clear();
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const auto device = static_cast<std::uint64_t>(st.st_dev);
  const auto inode = static_cast<std::uint64_t>(st.st_ino);
  if (!reader_ || device != device_ || inode != inode_ || size < reader_->parser().fed()) {
    device_ = device;
    inode_ = inode;
    startOver(size);
  } else if (size - reader_->offset() > kJumpBytes) {
    seekTail(size);
  }
  poll();
}

void RunEventDigest::updateTrainerState() {
  // Hugging Face's state is what is left when nothing else is: a log of ours or LLaMA-Factory's
  // appearing later takes over.
  // (Two stats: the reader below finds the newest trainer_state.json itself.)
  const std::string folder = studio::run_folder_of(path_);
  std::string now;
  for (const char* name : {studio::kEventsFileName, studio::kTrainerLogFileName}) {
    struct stat log {};
    if (now.empty() && ::stat((folder + "/" + name).c_str(), &log) == 0) now = folder + "/" + name;
  }
  if (!now.empty()) {
    path_ = now;
    reader_.reset();
    clearFacts();
    exists_ = false;
    update();
    return;
  }
  if (!reader_) reader_ = std::make_unique<studio::EventFileReader>(path_);
  poll();
  path_ = reader_->path();
  struct stat st {};
  const bool there = ::stat(path_.c_str(), &st) == 0;
  if (!there && exists_) {  // every version is gone (the folder was deleted): so is what it said
    clearFacts();
    reader_.reset();
  }
  exists_ = there;
  if (!there && error_.empty() && errno != ENOENT)
    error_ = "cannot stat " + path_ + ": " + std::strerror(errno);
}

studio::ReadProblems RunEventDigest::problems() const {
  studio::ReadProblems all = headProblems_;
  if (reader_) all.add(reader_->problems());
  return all;
}

void RunEventDigest::clearFacts() {
  headProblems_ = studio::ReadProblems{};
  start_.reset();
  firstStartTime_ = studio::kNoValue;
  lastStep_ = 0;
  totalSteps_ = 0;
  lastLoss_ = lastTime_ = studio::kNoValue;
  end_.reset();
}

void RunEventDigest::startOver(std::uint64_t size) {
  clearFacts();
  reader_ = std::make_unique<studio::EventFileReader>(path_);
  reader_->set_cursor({0, 0, device_, inode_});
  if (size <= kHeadBytes + kTailBytes) return;  // small enough to read whole
  readHead(size);
  seekTail(size);
}

void RunEventDigest::readHead(std::uint64_t size) {
  Fd f{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return;
  studio::EventStreamParser parser(studio::EventStreamParser::kDefaultMaxLineBytes,
                                  studio::line_format_of(path_));
  std::vector<studio::Event> events;
  for (std::uint64_t pos = 0; pos < std::min(size, kHeadBytes) && !start_; pos += kChunk) {
    const std::string bytes = readAt(f.fd, pos, kChunk);
    if (bytes.empty()) break;
    bytesRead_ += bytes.size();
    events.clear();
    parser.feed(bytes, events);
    for (const auto& e : events) ingest(e);
  }
  headProblems_ = parser.problems();
}

void RunEventDigest::seekTail(std::uint64_t size) {
  Fd f{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return;
  // The cursor must sit at a line start: find the first newline before the last kTailBytes.
  std::uint64_t lineStart = size - kTailBytes;
  for (std::uint64_t pos = lineStart - 1; pos < size; pos += kChunk) {
    const std::string bytes = readAt(f.fd, pos, kChunk);
    bytesRead_ += bytes.size();
    const auto nl = bytes.find('\n');
    // A tail without any newline is inside one over-long line: starting in its middle costs
    // one bad line, which the parser skips.
    lineStart = nl == std::string::npos ? pos + bytes.size() : pos + nl + 1;
    if (nl != std::string::npos || bytes.empty()) break;
  }
  reader_->set_cursor({lineStart, 0, device_, inode_});
}

void RunEventDigest::poll() {
  const std::uint64_t before = reader_->parser().fed();
  studio::EventPollResult r = reader_->poll();
  if (r.restarted) {
    // Replaced between our stat and the read: what was gathered belongs to the old file.
    clearFacts();
    bytesRead_ += reader_->parser().fed();
  } else {
    bytesRead_ += reader_->parser().fed() - before;
  }
  error_ = r.error.empty() && studio::line_format_of(path_) == studio::LineFormat::TrainerState
               ? std::string()
               : r.error.empty() ? error_ : r.error;
  for (const auto& e : r.events) ingest(e);
}

void RunEventDigest::ingest(const studio::Event& event) {
  if (const auto* start = event.get<studio::StartEvent>()) {
    if (std::isnan(firstStartTime_) || start->time < firstStartTime_) firstStartTime_ = start->time;
    start_ = *start;
    end_.reset();  // a resume: the run is going again
  } else if (const auto* step = event.get<studio::StepEvent>()) {
    lastStep_ = step->step;
    lastLoss_ = step->loss;
    if (step->total_steps > 0) totalSteps_ = step->total_steps;
    lastTime_ = step->time;
    end_.reset();  // steps after an end belong to a resume whose start lay in the unread middle
  } else if (const auto* end = event.get<studio::EndEvent>()) {
    end_ = *end;
  }
}

}  // namespace studio::ui
