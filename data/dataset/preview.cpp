#include "studio/data/preview.h"

#include <iomanip>
#include <limits>
#include <sstream>

#include "loader.h"

namespace studio::data {
namespace {

using detail::LoadedParts;

PreviewSequence decode_spans(const TokenizedSample& s, const Tokenizer& tok) {
  PreviewSequence seq;
  seq.tokens = static_cast<int64_t>(s.input_ids.size());
  std::size_t i = 0;
  while (i < s.input_ids.size()) {
    const bool learned = s.labels[i] != kIgnoreIndex;
    std::vector<int32_t> ids;
    for (; i < s.input_ids.size() && (s.labels[i] != kIgnoreIndex) == learned; ++i)
      ids.push_back(static_cast<int32_t>(s.input_ids[i]));
    if (learned) seq.learned_tokens += static_cast<int64_t>(ids.size());
    seq.spans.push_back({tok.decode(ids, false), learned});
  }
  return seq;
}

void fill(PreviewSample& p, const TokenizedSample& s, const Tokenizer& tok) {
  p.sequence = decode_spans(s, tok);
}

void fill(PreviewSample& p, const PairSample& s, const Tokenizer& tok) {
  p.chosen = decode_spans(s.chosen, tok);
  p.rejected = decode_spans(s.rejected, tok);
}

template <class Sample>
void collect(PreviewReport& r, const RunConfig& cfg, const Tokenizer& tok, int n,
             const DatasetOptions& opt) {
  LoadedParts<Sample> parts = detail::load_parts<Sample>(cfg, tok, opt);
  r.stats.lengths = LengthHistogram::for_cutoff(cfg.cutoff_len);
  for (const auto& np : parts.train) {
    r.stats.merge(np.part.stats);
    r.train_samples += static_cast<int64_t>(np.part.samples.size());
    for (std::size_t i = 0; i < np.part.samples.size() && static_cast<int>(r.samples.size()) < n; ++i) {
      PreviewSample p;
      p.dataset = np.name;
      p.row = np.part.origins[i].row;
      p.full_length = np.part.origins[i].full_length;
      p.truncated = p.full_length > cfg.cutoff_len;
      fill(p, np.part.samples[i], tok);
      r.samples.push_back(std::move(p));
    }
  }
  for (const auto& np : parts.eval) {
    r.stats.merge(np.part.stats);
    r.eval_samples += static_cast<int64_t>(np.part.samples.size());
  }
}

void print_sequence(std::ostringstream& out, const PreviewSequence& seq, const PreviewStyle& style) {
  for (const PreviewSpan& span : seq.spans)
    out << (span.learned ? span.text : style.masked_open + span.text + style.masked_close);
  out << "\n";
}

std::string bin_label(const LengthHistogram& h, std::size_t i) {
  const int64_t lo = i == 0 ? 0 : h.upper[i - 1] + 1;
  if (h.upper[i] == std::numeric_limits<int64_t>::max()) return std::to_string(lo) + "+";
  return std::to_string(lo) + "-" + std::to_string(h.upper[i]);
}

void print_histogram(std::ostringstream& out, const DataStats& stats) {
  const LengthHistogram& h = stats.lengths;
  int64_t most = 1;
  for (int64_t c : h.counts) most = std::max(most, c);
  out << "Lengths before truncation (cutoff_len " << h.cutoff_len << "):\n";
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const int width = static_cast<int>((h.counts[i] * 40 + most - 1) / most);
    out << "  " << std::setw(22) << std::left << bin_label(h, i) << std::right << std::setw(9)
        << h.counts[i] << " " << std::string(static_cast<std::size_t>(width), '#')
        << (i > 0 && h.upper[i - 1] >= h.cutoff_len && h.counts[i] > 0 ? "  (truncated)" : "") << "\n";
  }
}

}  // namespace

PreviewReport preview(const RunConfig& cfg, const Tokenizer& tokenizer, int n,
                      const DatasetOptions& options) {
  PreviewReport r;
  r.template_name = cfg.template_name;
  r.stage = cfg.stage;
  r.cutoff_len = cfg.cutoff_len;
  if (cfg.stage == Stage::Dpo) collect<PairSample>(r, cfg, tokenizer, n, options);
  else collect<TokenizedSample>(r, cfg, tokenizer, n, options);
  return r;
}

std::string format_preview_text(const PreviewReport& r, const PreviewStyle& style) {
  std::ostringstream out;
  out << "template " << r.template_name << ", stage " << to_string(r.stage) << ", cutoff_len "
      << r.cutoff_len << "\n";
  out << "Text in " << style.masked_open << " " << style.masked_close
      << " is masked (not learned).\n";
  for (const PreviewSample& s : r.samples) {
    out << "\n--- " << s.dataset << " row " << s.row << ": ";
    if (r.stage == Stage::Dpo) {
      out << s.chosen.tokens << " / " << s.rejected.tokens << " tokens (chosen / rejected)";
    } else {
      out << s.sequence.tokens << " tokens, " << s.sequence.learned_tokens << " learned";
    }
    if (s.truncated) out << ", truncated from " << s.full_length;
    out << "\n";
    if (r.stage == Stage::Dpo) {
      out << "chosen:\n";
      print_sequence(out, s.chosen, style);
      out << "rejected:\n";
      print_sequence(out, s.rejected, style);
    } else {
      print_sequence(out, s.sequence, style);
    }
  }
  const DataStats& st = r.stats;
  out << "\n" << r.train_samples << " training samples";
  if (r.eval_samples > 0) out << ", " << r.eval_samples << " eval samples";
  out << "; " << st.tokens << " tokens, " << st.learned_tokens << " learned; " << st.truncated
      << " truncated to cutoff_len " << r.cutoff_len << "\n";
  if (st.skipped_invalid + st.skipped_bad_rows > 0)
    out << "skipped: " << st.skipped_invalid << " invalid conversations, " << st.skipped_bad_rows
        << " bad rows\n";
  print_histogram(out, st);
  for (const std::string& w : st.warnings) out << "warning: " << w << "\n";
  return out.str();
}

}  // namespace studio::data
