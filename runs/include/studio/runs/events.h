#pragma once
// The metrics event schema of a run (docs/events.md). The engine appends one JSON object per line
// to OUTPUT_DIR/events.jsonl and keeps OUTPUT_DIR/status.json current; the studio reads both
// live, from a local file or from SFTP byte ranges, and must resume where it stopped after a
// restart. Everything here is plain C++ (no Qt, no Torch) so both sides share one definition.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace studio {

inline constexpr const char* kEventsFileName = "events.jsonl";
inline constexpr const char* kStatusFileName = "status.json";

// LLaMA-Factory's (and 360-LLaMA-Factory's) log of a run, OUTPUT_DIR/trainer_log.jsonl: read
// as the step and eval events it holds (parse_trainer_log_line).
inline constexpr const char* kTrainerLogFileName = "trainer_log.jsonl";
// Hugging Face Trainer's state (LLaMA-Factory, TRL and any transformers run):
// OUTPUT_DIR/checkpoint-N/trainer_state.json at each save and OUTPUT_DIR/trainer_state.json at
// the end. Its `log_history` holds every logged step and eval (parse_trainer_state). Our own
// checkpoints have a file of that name too, without log_history; they are never read as one.
inline constexpr const char* kTrainerStateFileName = "trainer_state.json";

// OUTPUT_DIR/events.jsonl and OUTPUT_DIR/status.json.
std::string events_path(const std::string& output_dir);
std::string status_path(const std::string& output_dir);

// What the lines of a stream are: events.jsonl's, LLaMA-Factory's trainer_log.jsonl, or (a
// whole JSON document rather than lines) Hugging Face's trainer_state.json.
enum class LineFormat { Events, TrainerLog, TrainerState };
// By the file's name: trainer_log.jsonl is LLaMA-Factory's, trainer_state.json Hugging Face's,
// any other name ours.
LineFormat line_format_of(const std::string& path);
// The file a run folder's events are read from: events.jsonl; else trainer_log.jsonl where only
// LLaMA-Factory wrote; else the newest Hugging Face trainer_state.json (a transformers or TRL
// run, or a LLaMA-Factory run whose log is gone); else events.jsonl (nothing written yet).
std::string run_events_file(const std::string& dir);
// The newest Hugging Face trainer_state.json of a run folder: DIR/trainer_state.json or
// DIR/checkpoint-N/trainer_state.json, whichever was modified last (the largest N on a tie);
// only files with a `log_history` count. "" when there is none.
std::string newest_trainer_state(const std::string& dir);
// The run folder an events file belongs to: the file's folder, or the folder above for
// checkpoint-N/trainer_state.json.
std::string run_folder_of(const std::string& events_file);

// Wall-clock seconds since the Unix epoch, with sub-second precision: the `time` field.
double unix_time_now();
// Bytes to MiB (2^20 bytes), the unit of every memory field.
double bytes_to_mib(std::uint64_t bytes);

// Thrown by the from_json functions below when a field has the wrong type; the message names
// the field, e.g. "field 'gpus[1].rank': expected an integer, got string".
class EventFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class EventKind { Start, Step, Eval, Checkpoint, Log, End, Restart, Unknown };

// "start", "step", ...; "unknown" for Unknown.
const char* event_kind_name(EventKind kind);
// Unknown for any name that is not one of the known kinds.
EventKind event_kind_from_name(std::string_view name);

// Reading rules shared by all structs: a field that is absent keeps the struct's default (NaN
// for measured doubles, so plots can leave a gap), JSON null reads as NaN for doubles (that is
// how NaN and infinity are written), and unknown fields are ignored. A field of the wrong type
// costs that field only when reading lines (parse_event_line: converted where the intent is
// unambiguous, else dropped, and reported in Event::issues); the from_json functions below are
// strict and throw EventFormatError instead. Writing emits every field.
inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// A field that was not written as the format says, and what the reader made of it.
// Converted, when the intent is unambiguous: a number written as a string ("1.5", "NaN",
// "-Infinity"), an integer written as a string ("12"), a device written as "cuda:3" (3) or
// "cpu" (-1), a number or boolean where text belongs. Dropped otherwise: the field keeps its
// default and the rest of the event is kept.
struct FieldIssue {
  std::string field;    // where, e.g. "gpus[0].device"
  std::string problem;  // e.g. "expected an integer, got string \"cuda:0\""
  std::string read_as;  // the value it was converted to; "" when dropped
  bool converted() const { return !read_as.empty(); }
  // "field 'gpus[0].device': expected an integer, got string "cuda:0": read as 0" (or
  // ": dropped").
  std::string describe() const;
};

struct ModelSummary {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  std::int64_t parameters = 0;
  // The parameters the run trains (LoRA: the adapters and additional_target's weights; freeze:
  // the picked layers; full: all). 0: not known (events written before it was recorded).
  std::int64_t trainable_parameters = 0;
  int layers = 0;
  int hidden_size = 0;
  int heads = 0;
  int kv_heads = 0;
  int vocab_size = 0;
};

struct StartEvent {
  double time = kNoValue;
  nlohmann::json config = nlohmann::json::object();  // the run config as the engine resolved it
  int world_size = 1;
  int sequence_parallel_size = 1;
  std::string sequence_parallel_mode;  // e.g. "ulysses", "ring"
  std::string stage;                   // e.g. "sft", "dpo"
  ModelSummary model;
  std::int64_t total_steps = 0;  // optimizer steps of the whole run (0: not known)
  // MFU: the device rank 0 trains on ("cpu" on CPU runs), and its dense peak in TFLOP/s for
  // the run's dtype (studio/model_facts/model_flops.h); NaN when the peak is not known.
  std::string device_name;
  double peak_tflops = kNoValue;
};

// Memory of one rank's device, in MiB. A CPU run reports its ranks' host memory the same way
// (device -1): allocated and peak from the CPU allocator's count, reserved = RSS.
struct GpuMemory {
  int rank = 0;
  int device = 0;
  double allocated_mib = kNoValue;
  double reserved_mib = kNoValue;
  double peak_mib = kNoValue;
  double total_mib = kNoValue;
  // The rank's model states (weights, masters, gradients, AdamW states, DPO reference) as
  // measured at the first step, on the device; and what sharding offloaded to host memory.
  // Written only when known.
  double model_states_mib = kNoValue;
  double offloaded_mib = kNoValue;
  // NVML, on GPU runs where the driver's library is present; written only when known.
  double util_percent = kNoValue;   // GPU busy share of NVML's last sample period
  double power_w = kNoValue;        // board power draw
  double power_limit_w = kNoValue;  // enforced power limit
};

// Where one rank's step time went (docs/events.md, "Where the time goes"), in seconds per
// optimizer step: the mean over the steps since the previous step event. The five parts add up
// to the rank's step, from the start of the step to its loss being known (what follows, the
// step event, evaluations and checkpoints, is not in it). Communication is the time the rank's
// stream was held up by it (exposed, not overlapped with compute), a late peer included.
struct RankTime {
  int rank = 0;
  double compute_s = kNoValue;    // forward, backward and the optimizer: the step's rest
  double sp_comm_s = kNoValue;    // sequence parallelism: ring K/V hops, all-to-alls, SP sums
  double grad_comm_s = kNoValue;  // gradient reduction, ZeRO's gathers, the gradient norm
  double data_s = kNoValue;       // building the micro-batches and copying them to the device
  double wait_s = kNoValue;       // held at the step's small sums (stop flags, loss, batch size)
  // The five added: the rank's step time.
  double total_s() const { return compute_s + sp_comm_s + grad_comm_s + data_s + wait_s; }
};

// Preference stages only (dpo, rm, kto); written flat into the step (and eval) object as
// "rewards/chosen", "logps/chosen", ...
struct DpoMetrics {
  double rewards_chosen = kNoValue;
  double rewards_rejected = kNoValue;
  double rewards_accuracies = kNoValue;
  double rewards_margins = kNoValue;
  double logps_chosen = kNoValue;
  double logps_rejected = kNoValue;
  // Stage kto: the KL estimate of the step's micro-batches (the policy's and the reference's
  // log-probs of the mismatched responses), clamped at 0 as the loss uses it.
  double kl = kNoValue;
  // pref_loss: orpo, as LLaMA-Factory logs them: the mean of -(the chosen log-prob per token)
  // and the mean of (each pair's loss - that) / pref_beta (its odds-ratio term, plus the
  // pref_ftx term / pref_beta when pref_ftx is on).
  double sft_loss = kNoValue;
  double odds_ratio_loss = kNoValue;
};

// A step's values that a diverged run makes non-finite, as bits of StepEvent::not_finite.
enum class StepValue : std::uint32_t {
  Loss = 1u << 0,
  Lr = 1u << 1,
  GradNorm = 1u << 2,
  TokensPerSec = 1u << 3,
  ModelTflops = 1u << 4,
  Mfu = 1u << 5,
  AuxLoss = 1u << 6,
  RewardsChosen = 1u << 7,
  RewardsRejected = 1u << 8,
  RewardsAccuracies = 1u << 9,
  RewardsMargins = 1u << 10,
  LogpsChosen = 1u << 11,
  LogpsRejected = 1u << 12,
  Kl = 1u << 13,
  SftLoss = 1u << 14,
  OddsRatioLoss = 1u << 15,
};

struct StepEvent {
  std::int64_t step = 0;  // required when reading: the de-duplication key
  double epoch = kNoValue;
  double loss = kNoValue;
  double lr = kNoValue;
  double grad_norm = kNoValue;
  std::int64_t tokens = 0;  // tokens of this step, all ranks
  double tokens_per_sec = kNoValue;
  double elapsed = kNoValue;  // seconds since the run (or its resume) started
  double time = kNoValue;
  // Steps of the whole run when the line says (LLaMA-Factory's total_steps; ours say it in the
  // start event); 0 otherwise.
  std::int64_t total_steps = 0;
  std::vector<GpuMemory> gpus;
  // Where each rank's time went (RankTime), in rank order; written by studio-train at the steps
  // that carry gpus, omitted when empty.
  std::vector<RankTime> rank_times;
  // Model FLOPs of the window's tokens (studio/model_facts/model_flops.h) per second and rank, in
  // TFLOP/s, and that as a share of start.peak_tflops (NaN when the peak is not known).
  double model_tflops = kNoValue;
  double mfu = kNoValue;
  double rss_mib = kNoValue;       // resident memory of the reporting process (CPU runs)
  double peak_rss_mib = kNoValue;  // its high-water mark
  // MoE models with the auxiliary loss on: its mean over the window's micro-batches (the loss
  // above includes router_aux_loss_coef x this, as transformers' does).
  double aux_loss = kNoValue;
  std::optional<DpoMetrics> dpo;  // read as present when any of its fields is
  // The values written as NaN, Infinity or -Infinity (Python writes a diverged step's loss or
  // gradient norm so), as StepValue bits: such a value is a diverged step's, to be shown as
  // one. A value that is NaN without its bit was not reported at all. The writer writes a value
  // with its bit (or an infinite one) as Python would, and one without as null.
  std::uint32_t not_finite = 0;
  bool written_not_finite(StepValue v) const {
    return (not_finite & static_cast<std::uint32_t>(v)) != 0;
  }
  void set_not_finite(StepValue v) { not_finite |= static_cast<std::uint32_t>(v); }
};

struct EvalEvent {
  std::int64_t step = 0;  // required when reading
  double loss = kNoValue;
  // Preference stages: the metrics over the evaluation examples (rm and dpo: the accuracy of
  // the chosen over the rejected).
  std::optional<DpoMetrics> dpo;
};

struct CheckpointEvent {
  std::int64_t step = 0;  // required when reading
  std::string path;
};

struct LogEvent {
  std::string level;  // "debug", "info", "warning", "error"
  int rank = 0;
  std::string message;
};

struct EndEvent {
  std::string state;  // "finished", "failed" or "stopped"; kept as text so new states parse
  std::string reason;
};

// The launcher started the whole world again after a failure (studio-train train
// --max-restarts): written by node 0's launcher between the failed attempt's events and the
// new attempt's start event.
struct RestartEvent {
  double time = kNoValue;
  int attempt = 1;           // 1 for the first restart
  int max_restarts = 0;      // the run's --max-restarts (MAX_RESTARTS)
  int failed_rank = -1;      // the global rank that failed first; -1 when not known
  std::string reason;        // the failure, as the launcher reports it
  // The checkpoint the new attempt resumes from ("" when none was written yet: it starts over)
  // and its optimizer step (0 without one).
  std::string resume_from;
  std::int64_t step = 0;
};

// to_json writes the complete line object, "event" included; from_json ignores "event".
// Found by nlohmann's ADL, so `nlohmann::json j = step;` and `j.get<StepEvent>()` work.
void to_json(nlohmann::json& j, const ModelSummary& v);
void from_json(const nlohmann::json& j, ModelSummary& v);
void to_json(nlohmann::json& j, const GpuMemory& v);
void from_json(const nlohmann::json& j, GpuMemory& v);
void to_json(nlohmann::json& j, const RankTime& v);
void from_json(const nlohmann::json& j, RankTime& v);
void to_json(nlohmann::json& j, const StartEvent& v);
void from_json(const nlohmann::json& j, StartEvent& v);
void to_json(nlohmann::json& j, const StepEvent& v);
void from_json(const nlohmann::json& j, StepEvent& v);
void to_json(nlohmann::json& j, const EvalEvent& v);
void from_json(const nlohmann::json& j, EvalEvent& v);
void to_json(nlohmann::json& j, const CheckpointEvent& v);
void from_json(const nlohmann::json& j, CheckpointEvent& v);
void to_json(nlohmann::json& j, const LogEvent& v);
void from_json(const nlohmann::json& j, LogEvent& v);
void to_json(nlohmann::json& j, const EndEvent& v);
void from_json(const nlohmann::json& j, EndEvent& v);
void to_json(nlohmann::json& j, const RestartEvent& v);
void from_json(const nlohmann::json& j, RestartEvent& v);

// monostate holds an event of Unknown kind: only `raw` describes it.
using EventPayload = std::variant<std::monostate, StartEvent, StepEvent, EvalEvent, CheckpointEvent,
                                  LogEvent, EndEvent, RestartEvent>;

// One line of events.jsonl as read: the typed payload plus the whole object, so fields added
// by newer engines stay reachable.
struct Event {
  EventKind kind = EventKind::Unknown;
  EventPayload payload;
  nlohmann::json raw;
  std::uint64_t line = 0;    // 1-based line number in the stream
  std::uint64_t offset = 0;  // byte offset of the line's first byte
  // Fields that were converted or dropped while reading; empty for a line as the format says.
  std::vector<FieldIssue> issues;
  // Set by a reader on a step event that adds to a step already read rather than replacing it:
  // the fields its own line lacked (LLaMA-Factory's log has no grad_norm; Hugging Face's
  // trainer_state.json has). Only its finite fields count. Never set by the parsers.
  bool amends = false;

  // The "event" field as written; for Unknown kinds this is the only name there is.
  std::string name() const;
  // The step of step, eval and checkpoint events. A resumed run re-emits steps after its last
  // checkpoint, so a reader keeping series should replace points with the same step.
  std::optional<std::int64_t> step() const;
  template <class T>
  const T* get() const {
    return std::get_if<T>(&payload);
  }
};

// Parses one line (without its newline). Returns false with a reason when it is not an event:
// invalid JSON, not an object, no string "event", or a step/eval/checkpoint event without a
// readable `step` (the key its points are kept by). Any other field of an unexpected type is
// converted or dropped and listed in out.issues; the rest of the line is kept. Unknown kinds are
// events. Sets out.raw, kind, payload and issues; line and offset are left alone.
bool parse_event_line(std::string_view line, Event& out, std::string& error);

// One line of LLaMA-Factory's trainer_log.jsonl (LogCallback: current_steps, total_steps, loss,
// eval_loss, reward, accuracy, lr, epoch, percentage, elapsed_time "H:MM:SS", remaining_time,
// throughput, total_tokens, vram_allocated/vram_reserved in GiB) as our events: a step event when
// it has a training loss or learning rate (loss, lr, epoch, throughput as tokens_per_sec,
// elapsed_time in seconds, reward and accuracy as rewards/chosen and rewards/accuracies, the
// vram fields as rank 0's memory in MiB), an eval event when it has eval_loss, nothing for the
// run's closing summary line. The same tolerance as events: a field of an unexpected type is
// converted when unambiguous (numbers in text, a duration given in seconds) or dropped, listed in
// the first event's `issues`; false (with the reason) only for a line that is not a JSON object
// or has no readable current_steps. Fields it does not know are left alone; each event's `raw` is
// the line's object as written, with "event" added.
bool parse_trainer_log_line(std::string_view line, std::vector<Event>& out, std::string& error);

struct ReadProblems;
// A Hugging Face trainer_state.json (its whole text) as events, in log_history's order: a step
// event for each entry with a training `loss` or `learning_rate` (loss, learning_rate as lr,
// grad_norm, epoch, DPO's rewards/* and logps/*; total_steps from
// max_steps), an eval event for each with `eval_loss`, nothing for the closing summary
// (train_runtime, train_loss). Entries are tolerated as trainer_log lines are: a field of the
// wrong type is converted or dropped and counted in `problems` against the entry's 1-based
// index as its "line"; an entry that is not an object or has no readable `step` is skipped and
// counted. Returns false (with the reason, naming no file) when the text is not JSON, not an
// object, or has no log_history array.
bool parse_trainer_state(std::string_view text, std::vector<Event>& out, std::string& error,
                         ReadProblems& problems);

// What a reader of a file skipped or repaired, so that the user can be told instead of seeing
// a silent gap: whole lines skipped, and events kept with some fields converted or dropped.
struct ReadProblems {
  std::uint64_t bad_lines = 0;  // lines skipped whole
  std::uint64_t first_bad_line = 0, last_bad_line = 0;  // 1-based; 0 when none
  std::string first_bad_reason, last_bad_reason;
  std::uint64_t lines_with_issues = 0;  // events kept with fields converted or dropped
  std::uint64_t converted_fields = 0;
  std::uint64_t dropped_fields = 0;
  std::uint64_t first_issue_line = 0;  // 1-based; 0 when none
  std::string first_issue;             // FieldIssue::describe() of the first one

  bool any() const { return bad_lines != 0 || lines_with_issues != 0; }
  // Counts one event's issues (none: nothing changes).
  void count_issues(std::uint64_t line, const std::vector<FieldIssue>& issues);
  void count_bad_line(std::uint64_t line, std::string reason);
  // Adds what a later part of the same file found (the first cases stay this one's).
  void add(const ReadProblems& later);
  // One sentence for the user naming `file`; "" when nothing was skipped or repaired, e.g.
  // "events.jsonl: 400 lines had fields not as the format says (400 converted, 0 dropped;
  // first: line 2: field 'gpus[0].device': ...: read as 0); 1 line skipped (first: line 7:
  // invalid JSON: ...)".
  std::string summary(const std::string& file) const;
  bool operator==(const ReadProblems& o) const;
  bool operator!=(const ReadProblems& o) const { return !(*this == o); }
};

// Incremental parser of an events.jsonl (or, with LineFormat::TrainerLog, a trainer_log.jsonl)
// byte stream fed in arbitrary chunks (file reads, SFTP byte ranges). A partial last line is kept until its newline arrives; blank lines are skipped;
// lines that are not events are skipped and counted; a line longer than the cap is dropped
// (and counted) without being buffered.
class EventStreamParser {
 public:
  static constexpr std::size_t kDefaultMaxLineBytes = std::size_t{16} << 20;

  explicit EventStreamParser(std::size_t max_line_bytes = kDefaultMaxLineBytes,
                             LineFormat format = LineFormat::Events);
  LineFormat format() const { return format_; }

  // Feeds the next bytes of the stream; appends the events they complete to `out`, in order.
  void feed(std::string_view bytes, std::vector<Event>& out);
  std::vector<Event> feed(std::string_view bytes);

  // Starts over at `offset` of a stream whose first `line` lines came before it (a persisted
  // cursor, or 0/0 for a new stream): drops the partial line and clears the counters.
  void reset(std::uint64_t offset = 0, std::uint64_t line = 0);

  // Offset of the first byte not in a complete line: where reading must resume so that no
  // event is lost or repeated. Never inside a line.
  std::uint64_t consumed() const { return line_start_; }
  // Offset just past the last byte fed.
  std::uint64_t fed() const { return fed_; }
  // Complete lines before consumed(), counting blank and bad lines.
  std::uint64_t lines() const { return lines_; }
  // Bytes of the partial last line held in memory.
  std::size_t pending_bytes() const { return partial_.size(); }
  std::size_t max_line_bytes() const { return max_line_bytes_; }

  // Lines skipped and fields repaired since the last reset.
  const ReadProblems& problems() const { return problems_; }
  std::uint64_t bad_lines() const { return problems_.bad_lines; }
  // 1-based line number and reason of the last bad line; 0 and "" when there was none.
  std::uint64_t last_bad_line() const { return problems_.last_bad_line; }
  const std::string& last_bad_reason() const { return problems_.last_bad_reason; }

 private:
  void append_partial(std::string_view piece);
  void finish_line(std::string_view line, std::vector<Event>& out);

  std::size_t max_line_bytes_;
  LineFormat format_;
  std::string partial_;
  bool skipping_ = false;  // inside an over-long line: drop bytes until its newline
  std::uint64_t line_start_ = 0;
  std::uint64_t fed_ = 0;
  std::uint64_t lines_ = 0;
  ReadProblems problems_;
};

// Where an EventFileReader stands, for a UI to persist and restore across restarts.
struct EventCursor {
  std::uint64_t offset = 0;  // EventStreamParser::consumed(): always at a line start
  std::uint64_t line = 0;    // lines before offset, so line numbers stay right after resuming
  // Identity (st_dev, st_ino) of the file the offset belongs to, so a file replaced while the
  // UI was closed is noticed. inode 0 means unknown: then only shrinking below is detected.
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
};
void to_json(nlohmann::json& j, const EventCursor& v);
void from_json(const nlohmann::json& j, EventCursor& v);

struct EventPollResult {
  std::vector<Event> events;
  // The file shrank below what was read or is a different file (new inode): it was read again
  // from byte 0, so `events` starts at its first line. Series kept so far belong to the old one.
  bool restarted = false;
  std::string restart_reason;  // says which, naming the file
  // A read error other than "the file does not exist yet"; events read before it are kept.
  std::string error;
};

// Tails a local events.jsonl from a byte cursor. Not thread-safe: poll from one thread.
class EventFileReader {
 public:
  explicit EventFileReader(std::string path,
                           std::size_t max_line_bytes = EventStreamParser::kDefaultMaxLineBytes);

  // Reads from the cursor to the end of the file (or at most `max_bytes` when not 0, to keep
  // each poll short on a huge file) and returns the events completed. A missing file returns
  // nothing and no error.
  EventPollResult poll(std::size_t max_bytes = 0);

  EventCursor cursor() const;
  // Resumes at a persisted cursor; the next poll checks it against the file.
  void set_cursor(const EventCursor& cursor);
  std::uint64_t offset() const { return parser_.consumed(); }

  // The file read: for a trainer_state.json reader, the newest one of the run folder, which
  // moves on to each new checkpoint-N/ (and is read whole, again, each time it changes: the
  // poll then says `restarted`, and its events are all of the new file's).
  const std::string& path() const { return path_; }
  const EventStreamParser& parser() const { return parser_; }
  // Lines skipped and fields repaired since the last reset (for trainer_state.json: in the
  // last version read).
  const ReadProblems& problems() const;

 private:
  EventPollResult poll_trainer_state();
  void check_identity(std::uint64_t device, std::uint64_t inode, std::uint64_t size,
                      EventPollResult& result);
  void read_to_end(int fd, std::uint64_t size, std::size_t max_bytes, EventPollResult& result);

  std::string path_;
  EventStreamParser parser_;
  std::uint64_t device_ = 0;
  std::uint64_t inode_ = 0;
  // trainer_state.json: the run folder searched, and what identified the version last read.
  std::string state_root_;
  std::int64_t state_mtime_ns_ = -1;
  std::uint64_t state_size_ = 0;
  ReadProblems state_problems_;
};

// Appends events to events.jsonl. Each line is written with one write() on an O_APPEND
// descriptor, under a mutex, so concurrent writers (threads, or processes appending to the
// same local file) never interleave inside a line and readers only ever see whole lines plus
// at most one partial last line. No user-space buffering: a line is visible once write returns.
// Errors come back as messages; nothing here exits or throws.
class EventWriter {
 public:
  EventWriter() = default;
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Opens `path` for appending, creating it (0644). Returns "" or an error naming the file.
  std::string open(const std::string& path);
  bool is_open() const;
  // Flushes to disk (fdatasync) and closes. Returns "" or an error naming the file.
  std::string close();
  // Flushes written lines to disk (fdatasync), e.g. after a checkpoint or the end event.
  std::string sync();

  std::string write(const StartEvent& e);
  std::string write(const StepEvent& e);
  std::string write(const EvalEvent& e);
  std::string write(const CheckpointEvent& e);
  std::string write(const LogEvent& e);
  std::string write(const EndEvent& e);
  std::string write(const RestartEvent& e);
  // Any object with a string "event" field, e.g. a kind this version does not know yet.
  std::string write(const nlohmann::json& event);

 private:
  std::string write_object(const nlohmann::json& event);
  std::string close_locked();

  mutable std::mutex mutex_;
  int fd_ = -1;
  std::string path_;
  bool torn_ = false;  // a failed write left a partial line: end it before the next line
};

enum class RunState { Running, Finished, Failed, Stopped };
const char* run_state_name(RunState state);
bool parse_run_state(std::string_view name, RunState& out);

// OUTPUT_DIR/status.json: what the run is doing now, replaced atomically on every change.
struct RunStatus {
  RunState state = RunState::Running;
  std::int64_t pid = 0;
  std::string host;
  std::optional<int> exit_code;      // null while running
  std::string reason;                // why it ended; "" while running
  double updated = kNoValue;         // unix time of this write
  std::optional<std::int64_t> step;  // last completed step, when known

  // Writes with write_file_atomic: readers see the old or the new file, never a mix. A NaN
  // `updated` is written as the current time. Returns "" or an error naming the file.
  std::string write(const std::string& path) const;
  // Returns false and an error naming the file when it is missing, not JSON, or has no valid
  // `state`. Other fields of an unexpected type are converted or dropped as events' fields are
  // and, when `issues` is given, listed there (cleared first).
  static bool read(const std::string& path, RunStatus& out, std::string& error,
                   std::vector<FieldIssue>* issues = nullptr);
  // The same for the file's text.
  static bool parse(const std::string& text, RunStatus& out, std::string& error,
                    std::vector<FieldIssue>* issues = nullptr);
};
void to_json(nlohmann::json& j, const RunStatus& v);
// Throws EventFormatError on a malformed object (strict: any field of the wrong type).
void from_json(const nlohmann::json& j, RunStatus& v);

// This machine's name as RunStatus::host records it (gethostname; "unknown" when that fails):
// what a stop on this machine compares with.
std::string status_host_name();

}  // namespace studio
