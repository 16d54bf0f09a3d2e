#include "studio/data/preview.h"

#include <iomanip>
#include <limits>
#include <sstream>

#include "feedback.h"
#include "loader.h"
#include "pretrain.h"

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

void fill(PreviewSample& p, const FeedbackSample& s, const Tokenizer& tok) {
  p.sequence = decode_spans(s.target, tok);
  p.kl = decode_spans(s.kl, tok);
  p.desirable = s.desirable;
}

template <class Sample>
void collect(PreviewReport& r, const RunConfig& cfg, const Tokenizer& tok, int n,
             const LoadedParts<Sample>& parts) {
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

// Stage pt: the first sequences (blocks when packing), each from the row its first token is of.
void collect_pt(PreviewReport& r, const RunConfig& cfg, const Tokenizer& tok, int n,
                const DatasetOptions& opt) {
  const detail::PtSequences seq = detail::load_pt_sequences(cfg, tok, opt);
  r.block_len = cfg.pt_packs() ? detail::pt_block_len(cfg) : 0;
  r.stats = seq.stats;
  r.train_samples = static_cast<int64_t>(seq.train.size());
  r.eval_samples = static_cast<int64_t>(seq.eval.size());
  for (std::size_t i = 0; i < seq.train.size() && static_cast<int>(r.samples.size()) < n; ++i) {
    const detail::PtOrigin& o = seq.train_origins[i];
    PreviewSample p;
    p.dataset = seq.datasets[o.dataset];
    p.row = o.row;
    p.full_length = o.full_length;
    p.truncated = o.full_length > cfg.cutoff_len;
    fill(p, seq.train[i], tok);
    r.samples.push_back(std::move(p));
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

// Packed pt texts are cut across blocks, not truncated: no bin is marked.
void print_histogram(std::ostringstream& out, const DataStats& stats, bool packed) {
  const LengthHistogram& h = stats.lengths;
  int64_t most = 1;
  for (int64_t c : h.counts) most = std::max(most, c);
  if (packed)
    out << "Text lengths (cutoff_len " << h.cutoff_len << "; packed, none truncated):\n";
  else
    out << "Lengths before truncation (cutoff_len " << h.cutoff_len << "):\n";
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const int width = static_cast<int>((h.counts[i] * 40 + most - 1) / most);
    out << "  " << std::setw(22) << std::left << bin_label(h, i) << std::right << std::setw(9)
        << h.counts[i] << " " << std::string(static_cast<std::size_t>(width), '#')
        << (!packed && i > 0 && h.upper[i - 1] >= h.cutoff_len && h.counts[i] > 0 ? "  (truncated)"
                                                                                  : "")
        << "\n";
  }
}

}  // namespace

PreviewReport preview(const RunConfig& cfg, const Tokenizer& tokenizer, int n,
                      const DatasetOptions& options) {
  PreviewReport r;
  r.template_name = cfg.template_name;
  r.stage = cfg.stage;
  r.cutoff_len = cfg.cutoff_len;
  switch (cfg.stage) {
    case Stage::Dpo:
    case Stage::Rm:
      collect(r, cfg, tokenizer, n, detail::load_parts<PairSample>(cfg, tokenizer, options));
      break;
    case Stage::Pt: collect_pt(r, cfg, tokenizer, n, options); break;
    case Stage::Sft:
      collect(r, cfg, tokenizer, n, detail::load_parts<TokenizedSample>(cfg, tokenizer, options));
      break;
    case Stage::Kto:
      collect(r, cfg, tokenizer, n, detail::load_feedback_parts(cfg, tokenizer, options));
      break;
  }
  return r;
}

std::string format_preview_text(const PreviewReport& r, const PreviewStyle& style) {
  std::ostringstream out;
  out << (r.template_name.empty() ? "no template" : "template " + r.template_name) << ", stage "
      << to_string(r.stage) << ", cutoff_len " << r.cutoff_len << "\n";
  if (r.stage == Stage::Pt)
    out << "Every token is learned"
        << (r.block_len > 0 ? "; the texts are concatenated and cut into blocks of " +
                                  std::to_string(r.block_len) + " tokens.\n"
                            : std::string(".\n"));
  else if (r.stage == Stage::Rm)
    out << "Stage rm learns no tokens: each chosen and rejected sequence is scored at its last "
           "token, and the chosen one must score higher.\n";
  else if (r.stage == Stage::Kto)
    out << "Text in " << style.masked_open << " " << style.masked_close
        << " is masked (not learned). Each example's target is its prompt with its own response; "
           "its KL sequence, the same prompt with the response of the row before it in "
           "LLaMA-Factory's preprocessing batch, is only scored.\n";
  else
    out << "Text in " << style.masked_open << " " << style.masked_close
        << " is masked (not learned).\n";
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    const PreviewSample& s = r.samples[i];
    if (r.block_len > 0)
      out << "\n--- block " << i + 1 << " (from " << s.dataset << " row " << s.row << "): ";
    else
      out << "\n--- " << s.dataset << " row " << s.row << ": ";
    if (r.stage == Stage::Dpo || r.stage == Stage::Rm) {
      out << s.chosen.tokens << " / " << s.rejected.tokens << " tokens (chosen / rejected)";
    } else if (r.stage == Stage::Kto) {
      out << (s.desirable ? "desirable" : "undesirable") << ", " << s.sequence.tokens
          << " tokens, " << s.sequence.learned_tokens << " learned; KL " << s.kl.tokens
          << " tokens";
    } else {
      out << s.sequence.tokens << " tokens, " << s.sequence.learned_tokens << " learned";
    }
    if (s.truncated) out << ", truncated from " << s.full_length;
    out << "\n";
    if (r.stage == Stage::Dpo || r.stage == Stage::Rm) {
      out << "chosen:\n";
      print_sequence(out, s.chosen, style);
      out << "rejected:\n";
      print_sequence(out, s.rejected, style);
    } else if (r.stage == Stage::Kto) {
      out << "target (" << (s.desirable ? "desirable" : "undesirable") << "):\n";
      print_sequence(out, s.sequence, style);
      out << "KL:\n";
      print_sequence(out, s.kl, style);
    } else {
      print_sequence(out, s.sequence, style);
    }
  }
  const DataStats& st = r.stats;
  const char* unit = r.block_len > 0 ? " blocks" : " samples";
  out << "\n" << r.train_samples << " training" << unit;
  if (r.eval_samples > 0) out << ", " << r.eval_samples << " eval" << unit;
  out << "; " << st.tokens << " tokens, " << st.learned_tokens << " learned; " << st.truncated
      << " truncated to cutoff_len " << r.cutoff_len << "\n";
  if (r.stage == Stage::Kto) {
    out << st.desirable << " desirable, " << st.samples - st.desirable << " undesirable\n";
    const std::string one_kind = detail::one_kind_warning("whole", st.samples, st.desirable);
    if (!one_kind.empty()) out << "warning: " << one_kind << "\n";
  }
  if (st.skipped_invalid + st.skipped_bad_rows > 0)
    out << "skipped: " << st.skipped_invalid << " invalid conversations, " << st.skipped_bad_rows
        << " bad rows\n";
  print_histogram(out, st, r.block_len > 0);
  for (const std::string& w : st.warnings) out << "warning: " << w << "\n";
  return out.str();
}

}  // namespace studio::data
