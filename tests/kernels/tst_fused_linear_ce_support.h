#pragma once
// Shared by the fused linear + cross-entropy tests (CPU reference and CUDA): an independent,
// unchunked extended-precision evaluation, first-order error bounds for a chunked evaluation in
// lower precision, random inputs, and an element-wise comparison.
//
// Error model. A dot product or sum of n terms in a precision with machine epsilon eps has an
// error within g(n) = (8 + sqrt(n)) * eps relative to the sum of the magnitudes of its terms:
// for rounding errors that behave like independent random variables the error is about
// eps * sqrt(n) / 6, so g(n) is several standard deviations above the typical error (Higham,
// Accuracy and Stability of Numerical Algorithms, ch. 4), while real bugs (a wrong index, a
// missed chunk, a missing scale) cost orders of magnitude more. Propagated per token t:
//   logits:    |dz_tv|  <= e_t = g(H) * max_v sum_h |x_th w_vh|
//   lse:       |dlse_t| <= e_t + g(V) + eps * |lse_t|        (lse is 1-Lipschitz in max-norm)
//   log p:     |dlp_t|  <= e_t + |dlse_t| + eps * |lp_t|
//   dlogits:   |dd_tv|  <= s * p_tv * (|dlp bound| + eps * (1 + |z_tv - lse_t|))
//                          + dlogit_unit * |d_tv|             (rounding when stored as bf16)
//   grad_x:    sum_v |dd_tv| |w_vh| + g(V) sum_v |d_tv w_vh| + out_unit * |grad_x_th|
//   grad_W:    sum_t |dd_tv| |x_th| + g(T) sum_t |d_tv x_th|
//   loss sum:  sum_t |dlp_t| + g(T) sum_t |lp_t|
// With eps = FLT_EPSILON this bounds the fp32 reference and the fp32-accumulating kernel; with
// DBL_EPSILON the double reference.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "studio/kernels/fused_linear_ce.h"

namespace linear_ce_test {

using Vec = std::vector<double>;
using studio::kernels::LinearCeShape;

inline std::uint16_t to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return 0x7fc0;
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Uniform in [-scale, scale], exactly representable as float (and as bf16 when asked), so every
// evaluation sees the same inputs.
inline Vec random_values(std::size_t n, double scale, unsigned seed, bool bf16 = false) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec v(n);
  for (auto& e : v) {
    const auto f = static_cast<float>(dist(gen));
    e = bf16 ? from_bf16(to_bf16(f)) : f;
  }
  return v;
}

// Targets in [0, vocab); pattern 0: none ignored, 1: every third ignored, 2: all ignored.
inline std::vector<std::int64_t> make_targets(std::int64_t tokens, std::int64_t vocab, int pattern,
                                              std::int64_t ignore, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, vocab - 1);
  std::vector<std::int64_t> t(static_cast<std::size_t>(tokens));
  for (std::int64_t i = 0; i < tokens; ++i) {
    const bool ignored = pattern == 2 || (pattern == 1 && i % 3 == 1);
    t[static_cast<std::size_t>(i)] = ignored ? ignore : dist(gen);
  }
  return t;
}

// The whole [T x V] problem at once in long double, log-softmax without the max shift (the
// logits here are small, and long double's range is vast): independent of the chunked code.
struct Exact {
  double loss_sum = 0;
  std::int64_t count = 0;
  Vec logprobs, grad_x, grad_w;
  Vec logits, lse, dlogits;  // [T x V], [T], [T x V]: inputs to the tolerance model
};

inline Exact exact_linear_ce(const Vec& x, const Vec& w, const std::vector<std::int64_t>& tg,
                             LinearCeShape s, std::int64_t ignore, double scale) {
  const std::int64_t T = s.tokens, H = s.hidden, V = s.vocab;
  Exact e;
  e.logprobs.assign(T, 0.0);
  e.grad_x.assign(T * H, 0.0);
  e.grad_w.assign(V * H, 0.0);
  e.logits.assign(T * V, 0.0);
  e.lse.assign(T, 0.0);
  e.dlogits.assign(T * V, 0.0);
  std::vector<long double> gw(V * H, 0.0L);
  long double loss = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<long double> z(V);
    long double sum = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      long double dot = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        dot += static_cast<long double>(x[t * H + h]) * w[v * H + h];
      }
      z[v] = dot;
      e.logits[t * V + v] = static_cast<double>(dot);
      sum += std::exp(dot);
    }
    const long double lse = std::log(sum);
    e.lse[t] = static_cast<double>(lse);
    if (tg[t] == ignore) continue;
    ++e.count;
    const long double lp = z[tg[t]] - lse;
    e.logprobs[t] = static_cast<double>(lp);
    loss -= lp;
    for (std::int64_t v = 0; v < V; ++v) {
      const long double d = (std::exp(z[v]) / sum - (v == tg[t] ? 1.0L : 0.0L)) * scale;
      e.dlogits[t * V + v] = static_cast<double>(d);
      for (std::int64_t h = 0; h < H; ++h) gw[v * H + h] += d * x[t * H + h];
    }
    for (std::int64_t h = 0; h < H; ++h) {
      long double gx = 0;
      for (std::int64_t v = 0; v < V; ++v) {
        gx += static_cast<long double>(e.dlogits[t * V + v]) * w[v * H + h];
      }
      e.grad_x[t * H + h] = static_cast<double>(gx);
    }
  }
  e.loss_sum = static_cast<double>(loss);
  for (std::size_t i = 0; i < gw.size(); ++i) e.grad_w[i] = static_cast<double>(gw[i]);
  return e;
}

struct Tolerances {
  double loss_sum = 0;
  Vec logprobs, grad_x, grad_w;
};

inline double g(std::int64_t n, double eps) {
  return (8.0 + std::sqrt(static_cast<double>(n))) * eps;
}

// The bounds of the header comment. dlogit_unit / grad_x_unit: unit roundoff of the type
// dlogits and grad_x are stored in (0 when fp32 or wider: already covered by eps).
inline Tolerances linear_ce_tolerances(const Vec& x, const Vec& w,
                                       const std::vector<std::int64_t>& tg, LinearCeShape s,
                                       std::int64_t ignore, double scale, const Exact& e,
                                       double eps, double dlogit_unit, double grad_x_unit) {
  const std::int64_t T = s.tokens, H = s.hidden, V = s.vocab;
  Tolerances tol;
  tol.logprobs.assign(T, 0.0);
  tol.grad_x.assign(T * H, 0.0);
  tol.grad_w.assign(V * H, 0.0);
  Vec dd(T * V, 0.0);  // bound on the dlogits error
  double abs_lp = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    if (tg[t] == ignore) continue;  // exact zeros: no error
    double a = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      double m = 0;
      for (std::int64_t h = 0; h < H; ++h) m += std::abs(x[t * H + h] * w[v * H + h]);
      a = std::max(a, m);
    }
    const double et = g(H, eps) * a;
    const double dlse = et + g(V, eps) + eps * std::abs(e.lse[t]);
    tol.logprobs[t] = et + dlse + eps * std::abs(e.logprobs[t]);
    tol.loss_sum += tol.logprobs[t];
    abs_lp += std::abs(e.logprobs[t]);
    for (std::int64_t v = 0; v < V; ++v) {
      const double p = std::exp(e.logits[t * V + v] - e.lse[t]);
      const double d = e.dlogits[t * V + v];
      dd[t * V + v] = std::abs(scale) * p *
                          (tol.logprobs[t] + eps * (1 + std::abs(e.logits[t * V + v] - e.lse[t]))) +
                      (dlogit_unit + eps) * std::abs(d);
    }
  }
  tol.loss_sum += g(T, eps) * abs_lp;
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t v = 0; v < V; ++v) {
      const double d = std::abs(e.dlogits[t * V + v]), err = dd[t * V + v];
      if (d == 0 && err == 0) continue;
      for (std::int64_t h = 0; h < H; ++h) {
        tol.grad_x[t * H + h] += (err + g(V, eps) * d) * std::abs(w[v * H + h]);
        tol.grad_w[v * H + h] += (err + g(T, eps) * d) * std::abs(x[t * H + h]);
      }
    }
  }
  for (std::int64_t i = 0; i < T * H; ++i) tol.grad_x[i] += grad_x_unit * std::abs(e.grad_x[i]);
  return tol;
}

// |got - want| <= tol element-wise; the first violation fails the test with its index.
template <typename T>
void expect_within(const std::vector<T>& got, const Vec& want, const Vec& tol, const char* what) {
  QCOMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol[i])) {
      QFAIL(qPrintable(QStringLiteral("%1[%2]: got %3, want %4, |err| %5 > tol %6")
                           .arg(what)
                           .arg(i)
                           .arg(static_cast<double>(got[i]), 0, 'g', 12)
                           .arg(want[i], 0, 'g', 12)
                           .arg(err, 0, 'g', 3)
                           .arg(tol[i], 0, 'g', 3)));
    }
  }
}

}  // namespace linear_ce_test
