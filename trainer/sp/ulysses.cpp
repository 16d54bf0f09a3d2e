// Ulysses all-to-alls as autograd Functions, and the grouped-query K/V head plan around them.
#include "studio/trainer/sp/ulysses.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace studio::trainer::sp {
namespace {

// One all-to-all for several tensors: each of `parts` is [u, B, h_j, L, D], slice i going to rank
// i; they are packed side by side along the head axis, and what arrives is returned unpacked, as
// [u, B, h_j, L, D] views (slice i from rank i). One collective for q, k and v rather than three:
// on Gloo each costs a round of scheduling across the ranks, on NCCL a launch and a
// synchronisation.
std::vector<torch::Tensor> all_to_all_packed(const std::vector<torch::Tensor>& parts,
                                             dist::Group& group, const char* what) {
  std::vector<int64_t> sizes = parts[0].sizes().vec();
  sizes[2] = 0;
  for (const torch::Tensor& p : parts) sizes[2] += p.size(2);
  torch::Tensor in = torch::empty(sizes, parts[0].options());
  int64_t at = 0;
  for (const torch::Tensor& p : parts) {
    in.narrow(2, at, p.size(2)).copy_(p);
    at += p.size(2);
  }
  torch::Tensor out = torch::empty_like(in);
  group.all_to_all(out, in, what);
  std::vector<torch::Tensor> arrived;
  at = 0;
  for (const torch::Tensor& p : parts) {
    arrived.push_back(out.narrow(2, at, p.size(2)));
    at += p.size(2);
  }
  return arrived;
}

// [B, H, S/u, D] -> [B, H/u, S, D] for each of `xs` (each its own H, a multiple of u): slice i
// sent is head group i (for rank i); slice i received is rank i's sequence chunk of our heads.
std::vector<torch::Tensor> scatter_heads(const std::vector<torch::Tensor>& xs, dist::Group& group) {
  const int64_t u = group.size();
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& x : xs)
    parts.push_back(x.reshape({x.size(0), u, x.size(1) / u, x.size(2), x.size(3)}).transpose(0, 1));
  std::vector<torch::Tensor> got = all_to_all_packed(parts, group, "ulysses: scatter heads");
  for (torch::Tensor& g : got)  // [u, B, H/u, S/u, D] -> [B, H/u, S, D]
    g = g.permute({1, 2, 0, 3, 4}).reshape({g.size(1), g.size(2), u * g.size(3), g.size(4)});
  return got;
}

// The inverse, [B, H/u, S, D] -> [B, H, S/u, D] for each of `xs`: slice i sent is sequence chunk
// i (for rank i); slice i received is rank i's head group of our chunk.
std::vector<torch::Tensor> gather_heads(const std::vector<torch::Tensor>& xs, dist::Group& group) {
  const int64_t u = group.size();
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& x : xs)
    parts.push_back(
        x.reshape({x.size(0), x.size(1), u, x.size(2) / u, x.size(3)}).permute({2, 0, 1, 3, 4}));
  std::vector<torch::Tensor> got = all_to_all_packed(parts, group, "ulysses: gather heads");
  for (torch::Tensor& g : got)  // [u, B, H/u, S/u, D] -> [B, H, S/u, D]
    g = g.transpose(0, 1).reshape({g.size(1), u * g.size(2), g.size(3), g.size(4)});
  return got;
}

dist::Group* group_of(torch::autograd::AutogradContext* ctx) {
  return reinterpret_cast<dist::Group*>(
      static_cast<std::intptr_t>(ctx->saved_data["group"].toInt()));
}

void keep_group(torch::autograd::AutogradContext* ctx, dist::Group* group) {
  // The group outlives the graph (the Communicator lives for the whole run).
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(group));
}

// The attention output gathered back to the sequence split; its backward scatters the gradient.
struct UlyssesGatherHeads : torch::autograd::Function<UlyssesGatherHeads> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               dist::Group* group) {
    keep_group(ctx, group);
    return gather_heads({x}, *group)[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {scatter_heads({grads[0]}, *group_of(ctx))[0], torch::Tensor()};
  }
};

// q, k and v scattered to heads in one all-to-all; their gradients come back in one as well.
struct UlyssesScatterQkv : torch::autograd::Function<UlyssesScatterQkv> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& v, dist::Group* group) {
    keep_group(ctx, group);
    return scatter_heads({q, k, v}, *group);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // Undefined output gradients arrive as zeros (the Function materialises them).
    std::vector<torch::Tensor> back = gather_heads({grads[0], grads[1], grads[2]}, *group_of(ctx));
    return {back[0], back[1], back[2], torch::Tensor()};
  }
};

void check_rank4(const torch::Tensor& x, const char* what) {
  TORCH_CHECK(x.dim() == 4, "ulysses: ", what, " must be [B, H, S, D], got ", x.sizes());
}

// Each K/V head repeated `times` times in place (head j -> heads j*times .. j*times+times-1).
torch::Tensor repeat_heads(const torch::Tensor& x, int64_t times) {
  const auto s = x.sizes();
  return x.unsqueeze(2)
      .expand({s[0], s[1], times, s[2], s[3]})
      .reshape({s[0], s[1] * times, s[2], s[3]});
}

}  // namespace

torch::Tensor ulysses_gather_heads(const torch::Tensor& x, dist::Group& group) {
  check_rank4(x, "the input");
  TORCH_CHECK(x.size(2) % group.size() == 0, "ulysses: a sequence of ", x.size(2),
              " tokens cannot be scattered over ", group.size(), " ranks");
  if (group.size() == 1) return x;
  return UlyssesGatherHeads::apply(x, &group);
}

void check_ulysses_heads(int64_t degree, int64_t q_heads, int64_t kv_heads, const char* mode) {
  const std::string over = " over " + std::to_string(degree) + " ranks";
  if (q_heads % degree != 0)
    throw std::invalid_argument(std::string(mode) + ": " + std::to_string(q_heads) +
                                " query heads cannot be split" + over +
                                " (the degree must divide them); use sequence_parallel_mode: "
                                "zigzag-ring");
  if (kv_heads % degree != 0 && degree % kv_heads != 0)
    throw std::invalid_argument(std::string(mode) + ": " + std::to_string(kv_heads) +
                                " key/value heads cannot be split" + over +
                                " (neither divides the other); use sequence_parallel_mode: "
                                "zigzag-ring");
}

torch::Tensor ulysses_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, dist::Group& group,
                                const GatheredAttention& attend) {
  check_rank4(q, "q");
  check_rank4(k, "k");
  check_rank4(v, "v");
  const int64_t u = group.size(), kv_heads = k.size(1);
  check_ulysses_heads(u, q.size(1), kv_heads, "ulysses");
  // Fewer K/V heads than ranks: u / Hkv consecutive ranks share one K/V head, and the query
  // heads they hold are all in that head's group, since Hq/u divides Hq/Hkv.
  const int64_t repeats = kv_heads % u == 0 ? 1 : u / kv_heads;
  const torch::Tensor kr = repeats == 1 ? k : repeat_heads(k, repeats);
  const torch::Tensor vr = repeats == 1 ? v : repeat_heads(v, repeats);
  if (u == 1) return attend(q, kr, vr);
  const torch::autograd::variable_list heads = UlyssesScatterQkv::apply(q, kr, vr, &group);
  return ulysses_gather_heads(attend(heads[0], heads[1], heads[2]), group);
}

}  // namespace studio::trainer::sp
