#pragma once
// What tst_preference_loss and tst_preference_loss_trl share: pairs as tensors, the settings a row
// trains with, LLaMA-Factory's loss formulas in plain doubles, and the pairs used throughout.
#include <torch/torch.h>

#include <QList>
#include <QMetaType>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "studio/trainer/dpo/preference_loss.h"

Q_DECLARE_METATYPE(studio::PrefLoss)

namespace pref_cases {

using studio::PrefLoss;
using namespace studio::trainer::dpo;


using Values = QList<double>;

inline torch::Tensor f64(const Values& v, bool grad = false) {
  return torch::tensor(std::vector<double>(v.begin(), v.end()), torch::kDouble)
      .set_requires_grad(grad);
}

inline torch::Tensor lengths(const Values& v) { return f64(v).to(torch::kLong); }

// The policy and the reference score the same tokens, so they share the lengths.
inline PairLogps pairs(const Values& chosen, const Values& rejected, const Values& chosen_len,
                const Values& rejected_len, bool grad = false) {
  return {f64(chosen, grad), f64(rejected, grad), lengths(chosen_len), lengths(rejected_len)};
}

inline double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
inline double per_token(double sum, double len) { return sum / std::max(len, 1.0); }

struct Pair {
  double pc, pr, rc, rr, lc, lr;
};

struct Setting {
  PrefLoss kind;
  double beta, ls, ftx;
  double gamma = 0.5;  // simpo_gamma
};

inline bool per_token_kind(PrefLoss k) { return k == PrefLoss::Ipo || k == PrefLoss::Orpo || k == PrefLoss::Simpo; }

// What a loss compares: the policy's log-probs c, r (per-token means for ipo, orpo and simpo,
// sums otherwise) and the DPO logits (c - r) - (rc - rr) (ipo: on the reference's means too).
struct Compared {
  double c, r, logits;
};

inline Compared compared(const Setting& s, const Pair& p) {
  const bool means = per_token_kind(s.kind);
  const double c = means ? per_token(p.pc, p.lc) : p.pc, r = means ? per_token(p.pr, p.lr) : p.pr;
  const bool ipo = s.kind == PrefLoss::Ipo;
  const double rc = ipo ? per_token(p.rc, p.lc) : p.rc, rr = ipo ? per_token(p.rr, p.lr) : p.rr;
  return {c, r, (c - r) - (rc - rr)};
}

// ORPO's odds ratio on means c, r, a mean of exactly 0 moved just below 0 first (see
// preference_loss.h).
inline double orpo_mean(double x) { return std::min(x, -std::numeric_limits<double>::min()); }
inline double log1mexp(double x) { return std::log(-std::expm1(orpo_mean(x))); }
inline double orpo_log_odds(double c, double r) { return (c - r) - (log1mexp(c) - log1mexp(r)); }
inline bool orpo_empty(const Pair& p) { return p.lc <= 0 || p.lr <= 0; }

// The per-pair formulas of LLaMA-Factory's DPO trainer (TRL < 0.9's kto_pair), written out once
// more in doubles, for the N pairs of one call (kto_pair's KL terms couple them), ftx included.
inline std::vector<double> expected_losses(const Setting& s, const std::vector<Pair>& ps) {
  double kl_c = 0, kl_r = 0;  // kto_pair
  for (const Pair& p : ps) {
    kl_c += (p.pc - p.rc) / double(ps.size());
    kl_r += (p.pr - p.rr) / double(ps.size());
  }
  kl_c = std::max(kl_c, 0.0);
  kl_r = std::max(kl_r, 0.0);
  std::vector<double> out;
  for (const Pair& p : ps) {
    const auto [c, r, l] = compared(s, p);
    double loss = 0;
    switch (s.kind) {
      case PrefLoss::Sigmoid:
        loss = -(1 - s.ls) * log_sigmoid(s.beta * l) - s.ls * log_sigmoid(-s.beta * l);
        break;
      case PrefLoss::Hinge:
        loss = std::max(0.0, 1 - s.beta * l);
        break;
      case PrefLoss::Ipo:
        loss = std::pow(l - 1 / (2 * s.beta), 2);
        break;
      case PrefLoss::Orpo:
        loss = -c + s.beta * (orpo_empty(p) ? 0 : -log_sigmoid(orpo_log_odds(c, r)));
        break;
      case PrefLoss::Simpo:
        loss = -log_sigmoid(s.beta * ((c - r) - s.gamma / s.beta));
        break;
      case PrefLoss::KtoPair:
        loss = ((1 - sigmoid(s.beta * ((p.pc - p.rc) - kl_r))) +
                (1 - sigmoid(s.beta * (kl_c - (p.pr - p.rr))))) / 2;
        break;
    }
    out.push_back(loss - (s.ftx > 1e-6 ? s.ftx * per_token(p.pc, p.lc) : 0));
  }
  return out;
}

// d sum(losses) / d (policy chosen sum), d sum(losses) / d (policy rejected sum), per pair.
inline std::vector<std::pair<double, double>> expected_gradients(const Setting& s, const std::vector<Pair>& ps) {
  const double n = double(ps.size());
  double mean_c = 0, mean_r = 0;  // kto_pair: the KL terms' arguments
  for (const Pair& p : ps) {
    mean_c += (p.pc - p.rc) / n;
    mean_r += (p.pr - p.rr) / n;
  }
  const double kl_c = std::max(mean_c, 0.0), kl_r = std::max(mean_r, 0.0);
  auto dsig = [](double x) { return sigmoid(x) * sigmoid(-x); };
  double via_kl_c = 0, via_kl_r = 0;  // kto_pair: d sum / d KL_c and d sum / d KL_r
  for (const Pair& p : ps) {
    via_kl_c += -s.beta * dsig(s.beta * (kl_c - (p.pr - p.rr))) / 2;
    via_kl_r += s.beta * dsig(s.beta * ((p.pc - p.rc) - kl_r)) / 2;
  }
  std::vector<std::pair<double, double>> out;
  for (const Pair& p : ps) {
    const auto [c, r, l] = compared(s, p);
    double dc = 0, dr = 0;  // w.r.t. what the loss compares (c, r)
    switch (s.kind) {
      case PrefLoss::Sigmoid:
        dc = -(1 - s.ls) * s.beta * sigmoid(-s.beta * l) + s.ls * s.beta * sigmoid(s.beta * l);
        dr = -dc;
        break;
      case PrefLoss::Hinge:
        dc = s.beta * l < 1 ? -s.beta : 0;
        dr = -dc;
        break;
      case PrefLoss::Ipo:
        dc = 2 * (l - 1 / (2 * s.beta));
        dr = -dc;
        break;
      case PrefLoss::Orpo: {
        dc = -1;
        if (orpo_empty(p)) break;
        const double sg = s.beta * sigmoid(-orpo_log_odds(c, r));  // -d loss / d log_odds
        // d log_odds / dc = 1 / (1 - exp(c)), d log_odds / dr = -1 / (1 - exp(r)); 0 for a mean
        // moved below 0 (the clamp passes no gradient).
        if (c == orpo_mean(c)) dc -= sg / -std::expm1(c);
        if (r == orpo_mean(r)) dr = sg / -std::expm1(r);
        break;
      }
      case PrefLoss::Simpo:
        dc = -s.beta * sigmoid(-s.beta * ((c - r) - s.gamma / s.beta));
        dr = -dc;
        break;
      case PrefLoss::KtoPair:
        dc = -s.beta * dsig(s.beta * ((p.pc - p.rc) - kl_r)) / 2 + (mean_c >= 0 ? via_kl_c / n : 0);
        dr = s.beta * dsig(s.beta * (kl_c - (p.pr - p.rr))) / 2 + (mean_r >= 0 ? via_kl_r / n : 0);
        break;
    }
    if (per_token_kind(s.kind)) {
      dc /= std::max(p.lc, 1.0);
      dr /= std::max(p.lr, 1.0);
    }
    out.push_back({dc - (s.ftx > 1e-6 ? s.ftx / std::max(p.lc, 1.0) : 0), dr});
  }
  return out;
}

inline std::vector<Pair> zip(const Values& pc, const Values& pr, const Values& rc, const Values& rr,
                      const Values& lc, const Values& lr) {
  std::vector<Pair> out;
  for (int i = 0; i < pc.size(); ++i) out.push_back({pc[i], pr[i], rc[i], rr[i], lc[i], lr[i]});
  return out;
}

inline PrefLossOptions options(const Setting& s) {
  PrefLossOptions o;
  o.loss = s.kind;
  o.beta = s.beta;
  o.label_smoothing = s.ls;
  o.ftx = s.ftx;
  o.simpo_gamma = s.gamma;
  return o;
}

inline bool close(double got, double want, double rel) {
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

// Three pairs used throughout: logits 2, -7.5 and 1.25 (unnormalised).
const Values kPc{-10.0, -30.5, -7.25}, kPr{-14.0, -20.0, -7.0};
const Values kRc{-11.0, -25.0, -8.0}, kRr{-13.0, -22.0, -6.5};
const Values kLc{4, 10, 1}, kLr{8, 5, 3};

}  // namespace pref_cases
