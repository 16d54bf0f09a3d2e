// Ulysses all-to-alls as autograd Functions, and the grouped-query K/V head plan around them.
#include "studio/trainer/sp/ulysses.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace studio::trainer::sp {
namespace {

// [B, H, S/u, D] -> [B, H/u, S, D] for each tensor of `xs` (each its own H, a multiple of u), in
// one all-to-all: slice i of its input is head group i (for rank i) of each tensor in turn; slice
// i of its output is rank i's sequence chunk of our head group of each. One collective for q, k
// and v rather than three: on Gloo each one costs a round of scheduling across the ranks, on NCCL
// a launch and a synchronisation.
std::vector<torch::Tensor> scatter_heads(const std::vector<torch::Tensor>& xs, dist::Group& group) {
  const int64_t u = group.size(), b = xs[0].size(0), len = xs[0].size(2), d = xs[0].size(3);
  int64_t heads = 0;
  for (const torch::Tensor& x : xs) heads += x.size(1) / u;
  torch::Tensor in = torch::empty({u, b, heads, len, d}, xs[0].options());
  int64_t at = 0;
  for (const torch::Tensor& x : xs) {
    const int64_t h = x.size(1) / u;
    in.narrow(2, at, h).copy_(x.reshape({b, u, h, len, d}).transpose(0, 1));
    at += h;
  }
  torch::Tensor out = torch::empty_like(in);
  group.all_to_all(out, in, "ulysses: scatter heads");
  std::vector<torch::Tensor> result;
  at = 0;
  for (const torch::Tensor& x : xs) {
    const int64_t h = x.size(1) / u;
    result.push_back(out.narrow(2, at, h).permute({1, 2, 0, 3, 4}).reshape({b, h, u * len, d}));
    at += h;
  }
  return result;
}

// The inverse, [B, H/u, S, D] -> [B, H, S/u, D] for each tensor of `xs`, in one all-to-all:
// slice i of the input is sequence chunk i (for rank i) of each tensor in turn; slice i of the
// output is rank i's head group of our chunk of each.
std::vector<torch::Tensor> gather_heads(const std::vector<torch::Tensor>& xs, dist::Group& group) {
  const int64_t u = group.size(), b = xs[0].size(0), len = xs[0].size(2), d = xs[0].size(3);
  int64_t heads = 0;
  for (const torch::Tensor& x : xs) heads += x.size(1);
  torch::Tensor in = torch::empty({u, b, heads, len / u, d}, xs[0].options());
  int64_t at = 0;
  for (const torch::Tensor& x : xs) {
    const int64_t h = x.size(1);
    in.narrow(2, at, h).copy_(x.reshape({b, h, u, len / u, d}).permute({2, 0, 1, 3, 4}));
    at += h;
  }
  torch::Tensor out = torch::empty_like(in);
  group.all_to_all(out, in, "ulysses: gather heads");
  std::vector<torch::Tensor> result;
  at = 0;
  for (const torch::Tensor& x : xs) {
    const int64_t h = x.size(1);
    result.push_back(out.narrow(2, at, h).transpose(0, 1).reshape({b, u * h, len / u, d}));
    at += h;
  }
  return result;
}

dist::Group* group_of(torch::autograd::AutogradContext* ctx) {
  return reinterpret_cast<dist::Group*>(
      static_cast<std::intptr_t>(ctx->saved_data["group"].toInt()));
}

void keep_group(torch::autograd::AutogradContext* ctx, dist::Group* group) {
  // The group outlives the graph (the Communicator lives for the whole run).
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(group));
}

// One all-to-all; its backward is the reverse one.
struct UlyssesAllToAll : torch::autograd::Function<UlyssesAllToAll> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               bool to_heads, dist::Group* group) {
    ctx->saved_data["to_heads"] = to_heads;
    keep_group(ctx, group);
    return (to_heads ? scatter_heads({x}, *group) : gather_heads({x}, *group))[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    dist::Group* group = group_of(ctx);
    const bool to_heads = ctx->saved_data["to_heads"].toBool();
    return {(to_heads ? gather_heads({grads[0]}, *group) : scatter_heads({grads[0]}, *group))[0],
            torch::Tensor(), torch::Tensor()};
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

torch::Tensor ulysses_scatter_heads(const torch::Tensor& x, dist::Group& group) {
  check_rank4(x, "the input");
  TORCH_CHECK(x.size(1) % group.size() == 0, "ulysses: ", x.size(1),
              " heads cannot be scattered over ", group.size(), " ranks");
  if (group.size() == 1) return x;
  return UlyssesAllToAll::apply(x, true, &group);
}

torch::Tensor ulysses_gather_heads(const torch::Tensor& x, dist::Group& group) {
  check_rank4(x, "the input");
  TORCH_CHECK(x.size(2) % group.size() == 0, "ulysses: a sequence of ", x.size(2),
              " tokens cannot be scattered over ", group.size(), " ranks");
  if (group.size() == 1) return x;
  return UlyssesAllToAll::apply(x, false, &group);
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
