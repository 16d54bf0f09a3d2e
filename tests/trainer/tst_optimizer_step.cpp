// The optimizer half of a training step, held to PyTorch's own: the engine's AdamW, the fused
// multi-tensor kernel (at::_fused_adamw_, on the CPU here: the CUDA path's formula is the same),
// with the clipping coefficient applied inside it, against torch::optim::AdamW on gradients
// scaled beforehand; and a whole ShardedState step (gradients taken from autograd, accumulated
// over micro-batches, clipped with the multi-tensor norm and scale, AdamW by decay group) against
// clip_grad_norm_ and torch::optim::AdamW on a twin model, in fp32 and in bf16 with fp32 masters.
#include <QtTest/QtTest>

#include <cmath>

#include "studio/model_facts/model_info.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/optim/adamw.h"
#include "studio/trainer/optim/zero.h"

using namespace studio::trainer;

namespace {

double max_relative(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kDouble), y = b.to(torch::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

studio::ModelInfo demo_model() {
  std::string error;
  auto info = studio::read_model_info(STUDIO_SOURCE_DIR "/resources/demo/model/config.json", error);
  if (!info) qFatal("%s", error.c_str());
  return *info;
}

// Token batch `k`: [2, 24] ids, next-token targets, positions.
struct Tokens {
  torch::Tensor ids, targets, positions;
};
Tokens tokens(int k, int64_t vocab) {
  torch::manual_seed(100 + k);
  Tokens t;
  t.ids = torch::randint(0, vocab, {2, 24}, torch::kLong);
  t.targets = torch::full({2, 24}, -100, torch::kLong);
  t.targets.narrow(1, 0, 23).copy_(t.ids.narrow(1, 1, 23));
  t.targets[0][3] = -100;  // a masked prompt token
  t.positions = torch::arange(24, torch::kLong).unsqueeze(0).expand({2, 24}).contiguous();
  return t;
}

}  // namespace

class TestOptimizerStep : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void updateMatchesTorch_data() {
    QTest::addColumn<QList<qint64>>("sizes");
    QTest::addColumn<double>("decay");
    QTest::addColumn<double>("coef");  // the clipping coefficient (0: none)
    QTest::newRow("one element, decayed") << QList<qint64>{1} << 0.01 << 0.0;
    QTest::newRow("odd sizes, decayed") << QList<qint64>{7, 1000, 33 * 17} << 0.1 << 0.0;
    QTest::newRow("vector tails, no decay") << QList<qint64>{15, 17, 4099} << 0.0 << 0.0;
    QTest::newRow("clipped inside the update") << QList<qint64>{15, 1000, 4099} << 0.01 << 0.37;
  }
  void updateMatchesTorch() {
    QFETCH(QList<qint64>, sizes);
    QFETCH(double, decay);
    QFETCH(double, coef);
    const AdamWSettings s{0.9, 0.999, 1e-8, decay};
    const torch::Tensor c = coef > 0 ? torch::full({}, coef, torch::kFloat) : torch::Tensor();
    const double lr = 3e-3;
    torch::manual_seed(3);
    std::vector<torch::Tensor> p_ours, m_ours, v_ours, p_ref;
    for (qint64 n : sizes) {
      auto p = torch::randn({n});
      p_ours.push_back(p.clone());
      p_ref.push_back(p.clone().requires_grad_());
      for (auto* v : {&m_ours, &v_ours}) v->push_back(torch::zeros({n}));
    }
    torch::optim::AdamW ref(std::vector<torch::Tensor>(p_ref.begin(), p_ref.end()),
                            torch::optim::AdamWOptions(lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(decay));
    for (int64_t step = 1; step <= 4; ++step) {
      std::vector<torch::Tensor> g;
      for (qint64 n : sizes) g.push_back(torch::randn({n}) * (step == 2 ? 100.0 : 0.01));
      // The reference is given the gradients already scaled, as clip_grad_norm_ leaves them
      // (set first: the fused kernel writes the scaled gradients back, as AMP's unscaling does).
      for (size_t i = 0; i < g.size(); ++i)
        p_ref[i].mutable_grad() = coef > 0 ? g[i] * coef : g[i].clone();
      adamw_update_many(p_ours, m_ours, v_ours, g, lr, s, decay, step, c);
      ref.step();
      if (coef > 0)  // the gradients are left scaled, as the declaration says
        for (size_t i = 0; i < g.size(); ++i)
          QVERIFY(max_relative(g[i], p_ref[i].grad()) < 1e-6);
    }
    for (size_t i = 0; i < p_ours.size(); ++i) {
      // fp32 arithmetic in a different order (torch::optim::AdamW's sequence of tensor ops):
      // a few ulps of the values after 4 steps.
      QVERIFY2(max_relative(p_ours[i], p_ref[i].detach()) < 1e-6,
               qPrintable(QString::number(max_relative(p_ours[i], p_ref[i].detach()))));
      const auto& st = static_cast<const torch::optim::AdamWParamState&>(
          *ref.state().at(p_ref[i].unsafeGetTensorImpl()));
      QVERIFY2(max_relative(m_ours[i], st.exp_avg()) < 1e-6, "exp_avg");
      QVERIFY2(max_relative(v_ours[i], st.exp_avg_sq()) < 1e-6, "exp_avg_sq");
    }
  }

  // gather_full hands out host memory of its own, which a checkpoint is written from while
  // training goes on: a step taken after the gather leaves what it returned as it was, and it
  // shares no memory with the weights (in fp32 at stage 0 the masters are the weights).
  void gatherFullIsItsOwn_data() {
    QTest::addColumn<bool>("bf16");
    QTest::newRow("fp32 (the masters are the weights)") << false;
    QTest::newRow("bf16 weights, fp32 masters") << true;
  }
  void gatherFullIsItsOwn() {
    QFETCH(bool, bf16);
    const auto info = demo_model();
    ModelOptions mo;
    mo.dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    mo.warn = [](const std::string&) {};
    CausalLM model(info, mo);
    model->init_weights(5);
    ShardedState states(model, torch::kCPU, nullptr, ZeroOptions{},
                        AdamWSettings{0.9, 0.999, 1e-6, 0.01});
    std::vector<torch::Tensor> got, before;
    for (size_t i = 0; i < states.names().size(); ++i) {
      got.push_back(states.gather_full(i));
      before.push_back(got.back().clone());
      QCOMPARE(got.back().scalar_type(), torch::kFloat);
    }
    const auto live = model->hf_state();
    for (size_t i = 0; i < got.size(); ++i)
      for (const auto& [name, p] : live)
        if (name == states.names()[i])
          QVERIFY2(!got[i].is_alias_of(p), name.c_str());

    const Tokens t = tokens(0, info.vocab_size);
    states.begin_micro_batch(true);
    (lm_cross_entropy_sum(model->hidden_states(t.ids, t.positions), model->lm_head_weight(),
                          t.targets) / 45.0).backward();
    states.end_backward();
    states.clip_gradients(1.0);
    states.step(1e-2);
    states.finish_updates();
    bool moved = false;
    for (size_t i = 0; i < got.size(); ++i) {
      QVERIFY2(torch::equal(got[i], before[i]), states.names()[i].c_str());
      moved = moved || !torch::equal(states.gather_full(i), before[i]);
    }
    QVERIFY(moved);  // the step did change the weights, or the check above proves nothing
  }

  void stepMatchesTorch_data() {
    QTest::addColumn<bool>("bf16");
    QTest::addColumn<int>("micro_batches");
    QTest::addColumn<double>("max_norm");
    QTest::newRow("fp32, one micro-batch, clipped") << false << 1 << 0.5;
    QTest::newRow("fp32, two micro-batches accumulated, clipped") << false << 2 << 0.5;
    QTest::newRow("fp32, not clipped (infinite norm)") << false << 1 << double(INFINITY);
    QTest::newRow("bf16 weights, fp32 masters, two micro-batches") << true << 2 << 0.5;
  }
  // Three steps of ShardedState (stage 0, one process) against the same steps written with
  // PyTorch's own pieces on a twin model: gradients summed over the micro-batches in fp32,
  // clip_grad_norm_ (its norm returned), torch::optim::AdamW with the Trainer's two groups.
  void stepMatchesTorch() {
    QFETCH(bool, bf16);
    QFETCH(int, micro_batches);
    QFETCH(double, max_norm);
    const auto info = demo_model();
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    ModelOptions mo;
    mo.dtype = dtype;
    mo.warn = [](const std::string&) {};
    CausalLM model(info, mo), twin(info, mo);
    model->init_weights(5);
    twin->init_weights(5);
    // eps 1e-6 (as tst_zero): with 1e-8 an entry whose gradient is ~0 moves by about +-lr with
    // a sign set by rounding, on either side.
    const double lr = 3e-3, decay = 0.01, eps = 1e-6;
    const AdamWSettings s{0.9, 0.999, eps, decay};
    ShardedState states(model, torch::kCPU, nullptr, ZeroOptions{}, s);

    // The reference: fp32 masters of the twin's weights (its weights themselves in fp32).
    std::vector<std::string> names;
    std::vector<torch::Tensor> weights, masters;
    std::vector<torch::Tensor> with_decay, without_decay;
    for (auto& [name, p] : twin->hf_state()) {
      names.push_back(name);
      weights.push_back(p);
      auto m = bf16 ? p.detach().to(torch::kFloat).clone().requires_grad_() : p;
      masters.push_back(m);
      (decays(name) ? with_decay : without_decay).push_back(m);
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(with_decay, std::make_unique<torch::optim::AdamWOptions>(
                                        torch::optim::AdamWOptions(lr).eps(eps).weight_decay(decay)));
    groups.emplace_back(without_decay, std::make_unique<torch::optim::AdamWOptions>(
                                           torch::optim::AdamWOptions(lr).eps(eps).weight_decay(0.0)));
    torch::optim::AdamW ref(std::move(groups));

    for (int step = 0; step < 3; ++step) {
      std::vector<torch::Tensor> acc(weights.size());
      for (int micro = 0; micro < micro_batches; ++micro) {
        const Tokens t = tokens(step * micro_batches + micro, info.vocab_size);
        const double norm = 1.0 / (45.0 * micro_batches);
        states.begin_micro_batch(micro + 1 == micro_batches);
        (lm_cross_entropy_sum(model->hidden_states(t.ids, t.positions), model->lm_head_weight(),
                              t.targets) * norm).backward();
        states.end_backward();
        (lm_cross_entropy_sum(twin->hidden_states(t.ids, t.positions), twin->lm_head_weight(),
                              t.targets) * norm).backward();
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < weights.size(); ++i) {
          auto g = weights[i].grad().to(torch::kFloat);
          acc[i] = acc[i].defined() ? acc[i] + g : g;
          weights[i].mutable_grad() = torch::Tensor();
        }
      }
      for (size_t i = 0; i < masters.size(); ++i) masters[i].mutable_grad() = acc[i];
      const double got = states.clip_gradients(max_norm).item<double>();
      const double want = torch::nn::utils::clip_grad_norm_(masters, max_norm);
      // From the second step on the two models' weights differ by rounding (below), and in
      // bf16 that can move a weight by one bf16 ulp and its gradients with it.
      const double norm_tol = step == 0 ? 1e-5 : (bf16 ? 1e-3 : 1e-5);
      QVERIFY2(std::fabs(got - want) <= norm_tol * want,
               qPrintable(QString("step %1: norm %2 vs clip_grad_norm_ %3").arg(step).arg(got).arg(want)));
      states.step(lr);
      ref.step();
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < weights.size(); ++i) {
        masters[i].mutable_grad() = torch::Tensor();  // zero_grad(set_to_none)
        if (bf16) weights[i].copy_(masters[i]);
      }
      // After the first step: the same formula in fp32, a few ulps apart (2^-23 ~ 1.2e-7 each).
      // After the third: the tied embedding's rows of tokens not in the batch get only the
      // softmax tail's gradients (~1e-6, as large as eps), where AdamW's normalisation turns
      // rounding differences of the gradient into larger ones of the update: 2e-5 relative.
      // bf16, after the first step only: the weights are the masters rounded, and a master a
      // few fp32 ulps apart can round to the neighbouring bf16 value (2^-8 relative); from then
      // on a bf16 gradient's rounding decides the sign of the near-zero ones' updates (+-lr).
      if (bf16 && step > 0) continue;
      const double tol = bf16 ? 1.0 / 128 : (step == 0 ? 5e-7 : 2e-5);
      const auto engine = model->hf_state();
      for (size_t i = 0; i < weights.size(); ++i) {
        // k_proj's bias has no gradient in exact arithmetic (it adds the same q.b to every score
        // of a query, which softmax ignores): its updates are +-lr steps of rounding noise.
        if (step > 0 && names[i].find("k_proj.bias") != std::string::npos) continue;
        const double err = max_relative(engine[i].second, weights[i]);
        QVERIFY2(err <= tol, qPrintable(QString("step %1, %2: %3").arg(step).arg(names[i].c_str()).arg(err)));
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestOptimizerStep)
#include "tst_optimizer_step.moc"
