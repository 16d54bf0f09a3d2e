// The sequence-parallel token split: zigzag over the ring ranks, contiguous over the Ulysses
// ranks of each ring piece (see layout.h).
#include "studio/trainer/sp/layout.h"

#include <stdexcept>
#include <string>

namespace studio::trainer::sp {
namespace {

std::string describe(const SpLayout& l) {
  return std::string(to_string(l.mode)) + " (sp " + std::to_string(l.sp) + ", ulysses " +
         std::to_string(l.ulysses) + " x ring " + std::to_string(l.ring) + ")";
}

void check_length(int64_t len, const SpLayout& l, const char* where) {
  const int64_t m = sp_pad_multiple(l);
  if (len % m != 0)
    throw std::invalid_argument(std::string(where) + ": sequence length " + std::to_string(len) +
                                " is not a multiple of " + std::to_string(m) + " as " +
                                describe(l) + " needs; pad the batch with sp_pad_multiple()");
}

}  // namespace

SpLayout make_sp_layout(SpMode mode, int64_t sp, int64_t rank, int64_t ulysses_degree,
                        int64_t ring_degree) {
  if (sp < 1)
    throw std::invalid_argument("sequence parallelism: size " + std::to_string(sp) +
                                " must be at least 1");
  if (rank < 0 || rank >= sp)
    throw std::invalid_argument("sequence parallelism: rank " + std::to_string(rank) +
                                " is outside the group of " + std::to_string(sp));
  switch (mode) {
    case SpMode::ZigzagRing:
      return {mode, sp, rank, 1, sp};
    case SpMode::Ulysses:
      return {mode, sp, rank, sp, 1};
    case SpMode::Usp:
      break;
  }
  if (ulysses_degree < 1 || ring_degree < 1 || ulysses_degree * ring_degree != sp)
    throw std::invalid_argument("sequence parallelism (usp): sequence_parallel_ulysses_degree " +
                                std::to_string(ulysses_degree) +
                                " x sequence_parallel_ring_degree " + std::to_string(ring_degree) +
                                " must equal sequence_parallel_size " + std::to_string(sp));
  return {mode, sp, rank, ulysses_degree, ring_degree};
}

int64_t sp_pad_multiple(const SpLayout& l) {
  if (l.sp == 1) return 1;
  return l.ring == 1 ? l.ulysses : 2 * l.ring * l.ulysses;
}

torch::Tensor split_sequence(const torch::Tensor& x, int64_t dim, const SpLayout& l) {
  dim = c10::maybe_wrap_dim(dim, x.dim());
  const int64_t len = x.size(dim);
  check_length(len, l, "split_sequence");
  if (l.sp == 1) return x.contiguous();
  torch::Tensor piece = x;
  if (l.ring > 1) {  // zigzag: ring rank r holds chunks r and 2g-1-r of 2g
    const int64_t r = l.rank / l.ulysses, c = len / (2 * l.ring);
    piece = torch::cat({x.narrow(dim, r * c, c), x.narrow(dim, (2 * l.ring - 1 - r) * c, c)}, dim);
  }
  const int64_t part = piece.size(dim) / l.ulysses;
  return piece.narrow(dim, (l.rank % l.ulysses) * part, part).contiguous();
}

torch::Tensor sp_token_positions(int64_t seq_len, const SpLayout& l) {
  return split_sequence(torch::arange(seq_len, torch::kLong), 0, l);
}

torch::Tensor gather_sequence(const std::vector<torch::Tensor>& slices, int64_t dim,
                              const SpLayout& l) {
  if (static_cast<int64_t>(slices.size()) != l.sp)
    throw std::invalid_argument("gather_sequence: " + std::to_string(slices.size()) +
                                " slices for a group of " + std::to_string(l.sp));
  const torch::Tensor& first = slices.front();
  dim = c10::maybe_wrap_dim(dim, first.dim());
  std::vector<int64_t> shape = first.sizes().vec();
  shape[static_cast<size_t>(dim)] *= l.sp;
  torch::Tensor out = torch::empty(shape, first.options());
  SpLayout at = l;
  for (at.rank = 0; at.rank < l.sp; ++at.rank) {
    const torch::Tensor& s = slices[static_cast<size_t>(at.rank)];
    if (s.sizes() != first.sizes())
      throw std::invalid_argument("gather_sequence: slice " + std::to_string(at.rank) +
                                  " is shaped differently from slice 0");
    out.index_copy_(dim, sp_token_positions(shape[static_cast<size_t>(dim)], at).to(out.device()),
                    s);
  }
  return out;
}

Batch split_batch(const Batch& global, const SpLayout& l, const std::vector<int64_t>& row_lengths) {
  if (global.input_ids.dim() != 2)
    throw std::invalid_argument("split_batch: input_ids must be [B, S]");
  const int64_t rows = global.input_ids.size(0), len = global.input_ids.size(1);
  check_length(len, l, "split_batch");
  Batch b;
  b.input_ids = split_sequence(global.input_ids, 1, l);
  b.targets = split_sequence(global.targets, 1, l);
  b.position_ids = split_sequence(global.position_ids, 1, l);
  if (global.segment_ids.defined()) b.segment_ids = split_sequence(global.segment_ids, 1, l);
  if (global.token_mask.defined()) b.token_mask = split_sequence(global.token_mask, 1, l);
  b.valid_tokens = (b.targets != kIgnoreIndex).sum().item<int64_t>();
  if (row_lengths.empty()) {
    // Equal local lengths: rank s takes the s-th of sp near-equal parts of the count.
    b.tokens = global.tokens * (l.rank + 1) / l.sp - global.tokens * l.rank / l.sp;
    return b;
  }
  if (static_cast<int64_t>(row_lengths.size()) != rows)
    throw std::invalid_argument("split_batch: " + std::to_string(row_lengths.size()) +
                                " row lengths for " + std::to_string(rows) + " rows");
  const torch::Tensor lengths = torch::tensor(row_lengths, torch::kLong).unsqueeze(1);
  b.tokens = (sp_token_positions(len, l).unsqueeze(0) < lengths).sum().item<int64_t>();
  return b;
}

}  // namespace studio::trainer::sp
