// Sequence-parallel attention against single-process attention: the ranks of an SP group run as
// threads of this process, each with its own Communicator (real Gloo over 127.0.0.1). Every
// rank's output and q/k/v gradients must equal its slice of local_attention's on the whole
// sequence: to 1e-10 in fp64 (the algorithms are exact), to 1e-5 in fp32.
#include "studio/trainer/sp/ring_attention.h"
#include "studio/trainer/sp/sp_attention.h"

#include "../store_socket.h"

#include <torch/torch.h>

#include <QtTest>

#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace studio;
using namespace studio::trainer;
using namespace studio::trainer::sp;

Q_DECLARE_METATYPE(SpMode)

namespace {

struct Grid {
  SpMode mode;
  int64_t ulysses, ring;
  int64_t sp() const { return ulysses * ring; }
};

// Runs `body(layout, comm)` on sp threads, one rank each; returns each rank's error ("" if none).
std::vector<std::string> run_ranks(
    const Grid& g, const std::function<void(const SpLayout&, dist::Communicator&)>& body) {
  const test_store::Listening store = test_store::listening_socket();
  const int world = static_cast<int>(g.sp());
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        dist::CommOptions o;
        o.rank = r;
        o.world_size = world;
        o.master_port = store.port;
        o.store_listen_fd = r == 0 ? store.fd : -1;
        o.sp = g.sp();
        o.ulysses_degree = g.ulysses;
        o.ring_degree = g.ring;
        o.timeout = std::chrono::seconds(60);
        dist::Communicator comm(o);
        body(make_sp_layout(g.mode, g.sp(), comm.sp_rank(), g.ulysses, g.ring), comm);
        comm.world().barrier("test done");  // no rank tears down Gloo while a peer still reads
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

double max_abs_error(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

struct Grads {
  torch::Tensor out, dq, dk, dv;
};

// out = attend(q, k, v) and the gradients of <out, dout>, q/k/v leaves made here.
Grads run_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, const torch::Tensor& dout,
                    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                                      const torch::Tensor&)>& attend) {
  q = q.detach().requires_grad_();
  k = k.detach().requires_grad_();
  v = v.detach().requires_grad_();
  const torch::Tensor out = attend(q, k, v);
  out.backward(dout);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace

class TestSpAttention : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void matchesSingleProcess_data();
  void matchesSingleProcess();
  void ringOfOneIsLocalAttention();
  void ulyssesRefusesIndivisibleHeads();
};

void TestSpAttention::initTestCase() {
  torch::set_num_threads(1);  // sp threads already share a small machine
}

void TestSpAttention::matchesSingleProcess_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("ring");
  QTest::addColumn<int>("qHeads");
  QTest::addColumn<int>("kvHeads");
  QTest::addColumn<bool>("fp32");
  const auto row = [](const char* name, SpMode m, int u, int g, int hq, int hkv, bool fp32) {
    QTest::newRow(name) << m << u << g << hq << hkv << fp32;
  };
  row("zigzag sp2 gqa", SpMode::ZigzagRing, 1, 2, 4, 2, false);
  row("zigzag sp4 gqa", SpMode::ZigzagRing, 1, 4, 4, 2, false);
  row("zigzag sp4 mqa", SpMode::ZigzagRing, 1, 4, 4, 1, false);
  row("zigzag sp4 mha", SpMode::ZigzagRing, 1, 4, 4, 4, false);
  row("zigzag sp4 gqa fp32", SpMode::ZigzagRing, 1, 4, 4, 2, true);
  row("ulysses sp2 scatter kv", SpMode::Ulysses, 2, 1, 4, 2, false);
  row("ulysses sp4 replicate kv", SpMode::Ulysses, 4, 1, 4, 2, false);
  row("ulysses sp2 mqa replicate", SpMode::Ulysses, 2, 1, 4, 1, false);
  row("ulysses sp4 mqa replicate", SpMode::Ulysses, 4, 1, 4, 1, false);
  row("ulysses sp4 mha", SpMode::Ulysses, 4, 1, 4, 4, false);
  row("ulysses sp4 replicate kv fp32", SpMode::Ulysses, 4, 1, 4, 2, true);
  row("usp 2x2 gqa", SpMode::Usp, 2, 2, 4, 2, false);
  row("usp 2x2 mqa", SpMode::Usp, 2, 2, 4, 1, false);
  row("usp 2x2 mha", SpMode::Usp, 2, 2, 4, 4, false);
  row("usp 2x2 gqa fp32", SpMode::Usp, 2, 2, 4, 2, true);
}

void TestSpAttention::matchesSingleProcess() {
  QFETCH(SpMode, mode);
  QFETCH(int, ulysses);
  QFETCH(int, ring);
  QFETCH(int, qHeads);
  QFETCH(int, kvHeads);
  QFETCH(bool, fp32);
  const Grid grid{mode, ulysses, ring};
  const int64_t batch = 2, len = 24, dim = 8;  // 24: a multiple of every sp_pad_multiple here
  const double scale = 1.0 / std::sqrt(double(dim));
  const double tol = fp32 ? 1e-5 : 1e-10;
  torch::manual_seed(1234);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const auto dtype = fp32 ? torch::kFloat : torch::kDouble;
  // Inputs rounded to the test dtype once, so the fp64 reference sees the same numbers.
  const torch::Tensor q = torch::randn({batch, qHeads, len, dim}, f64).to(dtype);
  const torch::Tensor k = torch::randn({batch, kvHeads, len, dim}, f64).to(dtype);
  const torch::Tensor v = torch::randn({batch, kvHeads, len, dim}, f64).to(dtype);
  const torch::Tensor dout = torch::randn({batch, qHeads, len, dim}, f64).to(dtype);
  const Grads want = run_attention(
      q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble), dout.to(torch::kDouble),
      [&](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
        return local_attention(a, b, c, /*causal=*/true, scale);
      });

  std::vector<Grads> got(static_cast<size_t>(grid.sp()));
  std::vector<SpLayout> layouts(static_cast<size_t>(grid.sp()));
  const auto errors = run_ranks(grid, [&](const SpLayout& l, dist::Communicator& comm) {
    const AttentionFn attention = make_sp_attention(l, comm);
    const AttentionCall call{/*layer=*/0, /*causal=*/true, scale};
    const auto local = [&](const torch::Tensor& t) { return split_sequence(t, 2, l); };
    got[static_cast<size_t>(l.rank)] =
        run_attention(local(q), local(k), local(v), local(dout),
                      [&](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
                        return attention(a, b, c, call);
                      });
    layouts[static_cast<size_t>(l.rank)] = l;
  });
  for (size_t r = 0; r < errors.size(); ++r)
    QVERIFY2(errors[r].empty(),
             qPrintable(QStringLiteral("rank %1: %2").arg(r).arg(errors[r].c_str())));

  for (size_t r = 0; r < got.size(); ++r) {
    const SpLayout& l = layouts[r];
    const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> checks[] = {
        {"out", {got[r].out, want.out}},
        {"dq", {got[r].dq, want.dq}},
        {"dk", {got[r].dk, want.dk}},
        {"dv", {got[r].dv, want.dv}}};
    for (const auto& [name, pair] : checks) {
      QVERIFY2(pair.first.defined(), name);
      QCOMPARE(pair.first.scalar_type(), dtype);
      const double err = max_abs_error(pair.first, split_sequence(pair.second, 2, l));
      QVERIFY2(err <= tol, qPrintable(QStringLiteral("rank %1 %2: max abs error %3 > %4")
                                          .arg(r)
                                          .arg(name)
                                          .arg(err, 0, 'g', 3)
                                          .arg(tol, 0, 'g', 3)));
    }
  }
}

// A ring of one rank has no chunks to pair: plain causal attention, odd lengths included.
void TestSpAttention::ringOfOneIsLocalAttention() {
  torch::manual_seed(99);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor q = torch::randn({1, 4, 7, 8}, f64), k = torch::randn({1, 2, 7, 8}, f64),
                      v = torch::randn({1, 2, 7, 8}, f64), dout = torch::randn({1, 4, 7, 8}, f64);
  dist::CommOptions o;  // a world of one: no store
  dist::Communicator comm(o);
  QCOMPARE(comm.ring_group().size(), 1);
  const Grads want = run_attention(
      q, k, v, dout, [](auto& a, auto& b, auto& c) { return local_attention(a, b, c, true, 0.3); });
  const Grads got = run_attention(q, k, v, dout, [&](auto& a, auto& b, auto& c) {
    return zigzag_ring_attention(a, b, c, 0.3, comm.ring_group());
  });
  QVERIFY(max_abs_error(got.out, want.out) <= 1e-12);
  QVERIFY(max_abs_error(got.dq, want.dq) <= 1e-12);
  QVERIFY(max_abs_error(got.dk, want.dk) <= 1e-12);
  QVERIFY(max_abs_error(got.dv, want.dv) <= 1e-12);
}

// The seam refuses heads Ulysses cannot split, on every rank and before any communication.
void TestSpAttention::ulyssesRefusesIndivisibleHeads() {
  const torch::Tensor q = torch::randn({1, 6, 4, 8}), kv = torch::randn({1, 3, 4, 8});
  const auto errors =
      run_ranks({SpMode::Ulysses, 2, 1}, [&](const SpLayout& l, dist::Communicator& comm) {
        const AttentionFn attention = make_sp_attention(l, comm);
        try {
          attention(q, kv, kv, AttentionCall{0, true, 0.3});
        } catch (const std::invalid_argument&) {
          comm.world().barrier("refused");
          throw;
        }
      });
  for (const std::string& e : errors)
    QVERIFY2(QString::fromStdString(e).contains(
                 "ulysses: 3 key/value heads cannot be split over 2 ranks (neither divides the "
                 "other); use sequence_parallel_mode: zigzag-ring"),
             e.c_str());
}

QTEST_MAIN(TestSpAttention)
#include "tst_sp_attention.moc"
