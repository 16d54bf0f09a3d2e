#include "part_loader.h"

#include <algorithm>

#include "converter.h"
#include "json_rows.h"
#include "parallel.h"

namespace studio::data::detail {
namespace {

constexpr bool is_pairwise(const TokenizedSample*) { return false; }
constexpr bool is_pairwise(const PairSample*) { return true; }

void encode(const TemplateEncoder& enc, const Conversation& c, const EncodeOptions& opt,
            TokenizedSample& out, int64_t& full_length) {
  EncodedSft e = enc.encode_supervised(c, opt);
  out = std::move(e.sample);
  full_length = e.full_length;
}

void encode(const TemplateEncoder& enc, const Conversation& c, const EncodeOptions& opt,
            PairSample& out, int64_t& full_length) {
  EncodedPair e = enc.encode_pairwise(c, opt);
  out = std::move(e.pair);
  full_length = e.full_length;
}

void count(const TokenizedSample& s, DataStats& stats) {
  stats.tokens += static_cast<int64_t>(s.input_ids.size());
  for (int64_t l : s.labels) stats.learned_tokens += l != kIgnoreIndex;
}

void count(const PairSample& p, DataStats& stats) {
  count(p.chosen, stats);
  count(p.rejected, stats);
}

template <class Sample>
struct Slot {
  std::vector<Sample> samples;       // one per row; a v1 conversation gives one per learned answer
  std::vector<int64_t> full_lengths;
  bool ok = false;
  std::string error;  // the row's shape is wrong
  std::string skip;   // LF would drop the row
  int64_t cut_away = 0;  // v1 samples whose answer lay beyond cutoff_len (v1 drops them)
};

bool learns_something(const TokenizedSample& s) {
  return std::any_of(s.labels.begin(), s.labels.end(), [](int64_t l) { return l != kIgnoreIndex; });
}

// A converted row as samples: one (LLaMA-Factory's processors); or for a v1 conversation one per
// learned answer, rendered as v1 does.
void encode_row(const TemplateEncoder& enc, const DatasetAttr& attr, const Converted& c,
                const EncodeOptions& opt, Slot<TokenizedSample>& slot) {
  if (!attr.v1) {
    slot.samples.emplace_back();
    slot.full_lengths.emplace_back();
    return encode(enc, *c.conversation, opt, slot.samples.back(), slot.full_lengths.back());
  }
  for (const Conversation& one : v1_samples(c)) {
    EncodedSft e = enc.encode_last_answer(one, opt);
    if (!learns_something(e.sample)) {
      ++slot.cut_away;
      continue;
    }
    slot.samples.push_back(std::move(e.sample));
    slot.full_lengths.push_back(e.full_length);
  }
}

void encode_row(const TemplateEncoder& enc, const DatasetAttr&, const Converted& c,
                const EncodeOptions& opt, Slot<PairSample>& slot) {
  slot.samples.emplace_back();
  slot.full_lengths.emplace_back();
  encode(enc, *c.conversation, opt, slot.samples.back(), slot.full_lengths.back());
}

// Stage pt: the row's text as one sample, every token learned.
void encode_text_row(const TextEncoding& t, const DatasetAttr& attr, const nlohmann::json& row,
                     Slot<TokenizedSample>& slot) {
  ConvertedText c = convert_text_row(attr, row);
  if (!c.text) {
    slot.skip = std::move(c.skip_reason);
    return;
  }
  const std::vector<int32_t> ids = t.tokenizer->encode(t.prefix + *c.text + t.suffix, false);
  const std::size_t kept =
      t.truncate_to ? std::min(ids.size(), static_cast<std::size_t>(*t.truncate_to)) : ids.size();
  TokenizedSample s;
  s.input_ids.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept));
  s.labels = s.input_ids;
  slot.samples.push_back(std::move(s));
  slot.full_lengths.push_back(static_cast<int64_t>(ids.size()));
  slot.ok = true;
}

template <class Sample>
class PartBuilder {
 public:
  explicit PartBuilder(const PartSettings& s) : s_(s), reader_(s, part_.stats) {
    part_.stats.lengths = LengthHistogram::for_cutoff(s.encode.cutoff_len);
  }

  void read_all() {
    reader_.read_all([&](std::vector<PendingRow>& batch) { flush(batch); });
  }

  Part<Sample> take_part() { return std::move(part_); }

 private:
  void flush(std::vector<PendingRow>& batch) {
    std::vector<Slot<Sample>> slots(batch.size());
    constexpr bool pairwise = is_pairwise(static_cast<const Sample*>(nullptr));
    parallel_for(batch.size(), s_.workers, [&](std::size_t i) {
      Slot<Sample>& slot = slots[i];
      try {
        if constexpr (!pairwise) {
          if (s_.text) return encode_text_row(*s_.text, *s_.attr, batch[i].row.value, slot);
        }
        Converted c = convert_row(*s_.attr, batch[i].row.value, pairwise);
        if (!c.conversation) {
          slot.skip = std::move(c.skip_reason);
          return;
        }
        encode_row(*s_.encoder, *s_.attr, c, s_.encode, slot);
        slot.ok = true;
      } catch (const RowError& e) {
        slot.error = e.what();
      }
    });
    for (std::size_t i = 0; i < slots.size(); ++i) append(batch[i], slots[i]);
  }

  void append(const PendingRow& p, Slot<Sample>& slot) {
    if (!slot.error.empty()) return reader_.bad_row(reader_.where(p) + " " + slot.error);
    if (!slot.ok) {
      ++part_.stats.skipped_invalid;
      return reader_.warn(reader_.where(p) + " skipped, as LLaMA-Factory does: " + slot.skip);
    }
    if (slot.cut_away > 0) {
      part_.stats.skipped_invalid += slot.cut_away;
      reader_.warn(reader_.where(p) + ": " + std::to_string(slot.cut_away) +
                   " answer(s) beyond cutoff_len " + std::to_string(s_.encode.cutoff_len) +
                   " left out, as LLaMA-Factory v1 does (it keeps a sample's first cutoff_len "
                   "tokens)");
    }
    DataStats& st = part_.stats;
    for (std::size_t i = 0; i < slot.samples.size(); ++i) {
      ++st.samples;
      count(slot.samples[i], st);
      st.truncated += slot.full_lengths[i] > s_.encode.cutoff_len;
      st.lengths.add(slot.full_lengths[i]);
      part_.origins.push_back({p.row.index, slot.full_lengths[i]});
      part_.samples.push_back(std::move(slot.samples[i]));
    }
  }

  const PartSettings& s_;
  Part<Sample> part_;
  RowReader reader_;
};

}  // namespace

void RowReader::read_all(const std::function<void(std::vector<PendingRow>&)>& on_batch) {
  std::vector<PendingRow> batch;
  int64_t rows = 0;
  auto limit_reached = [&] { return s_.max_samples && rows >= *s_.max_samples; };
  auto flush = [&] {
    if (!batch.empty()) on_batch(batch);
    batch.clear();
  };
  for (const std::string& file : s_.files) {
    if (limit_reached()) break;
    read_rows(
        file,
        [&](RawRow&& row) {
          row.index = ++rows;  // numbered across the dataset's files
          batch.push_back({std::move(row), file});
          if (batch.size() >= s_.batch_rows) flush();
          return !limit_reached();
        },
        [&](int64_t line, int64_t column, const std::string& what) {
          bad_row(file + ":" + std::to_string(line) +
                  (column > 0 ? ":" + std::to_string(column) : "") + ": " + what);
        });
  }
  flush();
}

void RowReader::warn(const std::string& message) {
  if (s_.on_warning) s_.on_warning(message);
  if (stats_.warnings.size() < 20) stats_.warnings.push_back(message);
}

void RowReader::bad_row(const std::string& message) {
  if (!s_.skip_bad_rows)
    throw DatasetError(message + " (fix the row, or set skip_bad_rows to leave such rows out)");
  ++stats_.skipped_bad_rows;
  warn(message + " (skipped)");
}

std::string RowReader::where(const PendingRow& p) const {
  return "dataset '" + s_.attr->name + "' (" + p.file + ":" + std::to_string(p.row.line) +
         "): row " + std::to_string(p.row.index);
}

template <class Sample>
Part<Sample> tokenize_dataset(const PartSettings& settings) {
  PartBuilder<Sample> builder(settings);
  builder.read_all();
  return builder.take_part();
}

template Part<TokenizedSample> tokenize_dataset(const PartSettings&);
template Part<PairSample> tokenize_dataset(const PartSettings&);

}  // namespace studio::data::detail
