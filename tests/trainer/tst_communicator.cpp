// Process groups over real Gloo: ranks run as threads of this process, each with its own
// Communicator (TCPStore rendezvous on 127.0.0.1, full-mesh Gloo pairs), so the collectives,
// the dp x sp grid and the failure messages are the real ones.
#include <QtTest/QtTest>

#include <array>
#include <functional>
#include <thread>

#include "store_socket.h"
#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/parallel/reduce.h"

using namespace studio::trainer::dist;

namespace {

// Runs fn(rank, comm) on `world` threads; returns each rank's exception text ("" when none).
std::vector<std::string> run_ranks(int world, int64_t sp, int64_t u, int timeout_s,
                                   const std::function<void(int, Communicator&)>& fn,
                                   bool verify = false) {
  const test_store::Listening store = test_store::listening_socket();
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        CommOptions o;
        o.rank = r;
        o.world_size = world;
        o.master_port = store.port;
        o.store_listen_fd = r == 0 ? store.fd : -1;
        o.sp = sp;
        o.ulysses_degree = u;
        o.ring_degree = sp / u;
        o.timeout = std::chrono::seconds(timeout_s);
        o.verify_collectives = verify;
        Communicator c(o);
        fn(r, c);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

class TestCommunicator : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void grid_data() {
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("sp");
    QTest::addColumn<int>("u");
    QTest::newRow("dp4") << 4 << 1 << 1;
    QTest::newRow("ring4") << 4 << 4 << 1;
    QTest::newRow("dp2 x ring2") << 4 << 2 << 1;
    QTest::newRow("ulysses2 dp2") << 4 << 2 << 2;
    QTest::newRow("usp u2 x ring2") << 4 << 4 << 2;
    QTest::newRow("single") << 1 << 1 << 1;
  }
  // Group membership follows docs/SEQUENCE_PARALLEL.md ("Process groups"): contiguous SP groups,
  // strided DP groups, Ulysses ranks contiguous inside an SP group; every group's all-reduce sums
  // its members.
  void grid() {
    QFETCH(int, world);
    QFETCH(int, sp);
    QFETCH(int, u);
    std::mutex m;
    std::vector<std::array<std::vector<int>, 4>> seen(static_cast<size_t>(world));
    auto errors = run_ranks(world, sp, u, 30, [&](int r, Communicator& c) {
      std::array<Group*, 4> groups{&c.sp_group(), &c.dp_group(), &c.ulysses_group(),
                                   &c.ring_group()};
      std::array<std::vector<int>, 4> mine;
      for (size_t g = 0; g < groups.size(); ++g) {
        auto t = torch::tensor({static_cast<double>(1 << r)}, torch::kDouble);
        groups[g]->all_reduce_sum(t, "membership");
        const auto bits = static_cast<int>(t.item<double>());
        for (int k = 0; k < c.world_size(); ++k)
          if (bits & (1 << k)) mine[g].push_back(k);
        if (mine[g] != groups[g]->global_ranks()) throw std::runtime_error("members differ");
      }
      std::lock_guard<std::mutex> lock(m);
      seen[static_cast<size_t>(r)] = mine;
    });
    for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
    for (int r = 0; r < world; ++r) {
      const auto& g = seen[static_cast<size_t>(r)];
      const int first = r / sp * sp;
      std::vector<int> sp_expect, dp_expect, u_expect, ring_expect;
      for (int s = 0; s < sp; ++s) sp_expect.push_back(first + s);
      for (int d = 0; d < world / sp; ++d) dp_expect.push_back(d * sp + r % sp);
      for (int i = 0; i < u; ++i) u_expect.push_back(first + (r % sp) / u * u + i);
      for (int k = 0; k < sp / u; ++k) ring_expect.push_back(first + k * u + (r % sp) % u);
      QCOMPARE(g[0], sp_expect);
      QCOMPARE(g[1], dp_expect);
      QCOMPARE(g[2], u_expect);
      QCOMPARE(g[3], ring_expect);
    }
  }

  void collectives() {
    const int world = 3;
    auto errors = run_ranks(world, 1, 1, 30, [&](int r, Communicator& c) {
      Group& w = c.world();
      // all_to_all: rank r sends value 10*r + i to rank i.
      auto in = torch::tensor({10.0 * r, 10.0 * r + 1, 10.0 * r + 2}, torch::kDouble);
      auto out = torch::empty_like(in);
      w.all_to_all(out, in, "a2a");
      for (int i = 0; i < world; ++i)
        if (out[i].item<double>() != 10.0 * i + r) throw std::runtime_error("all_to_all");
      // all_gather
      auto mine = torch::full({2}, static_cast<double>(r), torch::kDouble);
      std::vector<torch::Tensor> all;
      for (int i = 0; i < world; ++i) all.push_back(torch::empty({2}, torch::kDouble));
      w.all_gather(all, mine, "gather");
      for (int i = 0; i < world; ++i)
        if (all[static_cast<size_t>(i)][1].item<double>() != i)
          throw std::runtime_error("all_gather");
      // broadcast from rank 2
      auto b = torch::full({1}, static_cast<double>(r), torch::kDouble);
      w.broadcast(b, 2, "bcast");
      if (b.item<double>() != 2) throw std::runtime_error("broadcast");
      // a ring of send/recv, posted before waiting, as the ring attention does
      auto s = torch::full({4}, static_cast<double>(r), torch::kDouble);
      auto rv = torch::empty({4}, torch::kDouble);
      auto ps = w.send(s, (r + 1) % world, 7, "ring");
      auto pr = w.recv(rv, (r + world - 1) % world, 7, "ring");
      pr.wait();
      ps.wait();
      if (rv[0].item<double>() != (r + world - 1) % world) throw std::runtime_error("ring");
      w.barrier("end");
    });
    for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
  }

  // The ring hop's issue order under NCCL-like semantics: each rank runs its two point-to-point
  // ops strictly in issue order and an op completes only when the peer is at the matching op (a
  // pair's send and recv share one stream). ring_send_first() must complete for every ring size;
  // "every rank receives first" (the order before) deadlocks, which shows the simulation can fail.
  void ring_order_cannot_deadlock_data() {
    QTest::addColumn<int>("size");
    for (int n : {2, 3, 4, 5, 7, 8, 16})
      QTest::newRow(qPrintable(QString("ring of %1").arg(n))) << n;
  }
  void ring_order_cannot_deadlock() {
    QFETCH(int, size);
    // ops[r] = {(is_send, peer), (is_send, peer)} in issue order.
    using Op = std::pair<bool, int>;
    auto simulate = [size](const std::function<bool(int)>& send_first) {
      std::vector<std::array<Op, 2>> ops(static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) {
        const Op s{true, (r + 1) % size}, v{false, (r + size - 1) % size};
        ops[static_cast<size_t>(r)] =
            send_first(r) ? std::array<Op, 2>{s, v} : std::array<Op, 2>{v, s};
      }
      std::vector<size_t> at(static_cast<size_t>(size), 0);
      for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < size; ++r) {
          auto& i = at[static_cast<size_t>(r)];
          if (i == 2) continue;
          const Op op = ops[static_cast<size_t>(r)][i];
          auto& j = at[static_cast<size_t>(op.second)];
          if (j == 2) continue;
          const Op peer = ops[static_cast<size_t>(op.second)][j];
          if (peer.first != op.first && peer.second == r) {
            ++i;
            ++j;
            progress = true;
          }
        }
      }
      for (size_t i : at)
        if (i != 2) return false;
      return true;
    };
    QVERIFY(simulate([](int r) { return ring_send_first(r); }));
    QVERIFY(!simulate([](int) { return false; }));  // all receive first: a cycle of waits
  }

  // Group::ring_shift on real Gloo rings of 2, 3 and 4 ranks: several hops in a row, each rank's
  // tensor arrives at the next rank, with the two tags of the ring attention interleaved.
  void ring_shift_data() {
    QTest::addColumn<int>("size");
    QTest::newRow("2") << 2;
    QTest::newRow("3") << 3;
    QTest::newRow("4") << 4;
  }
  void ring_shift() {
    QFETCH(int, size);
    auto errors = run_ranks(size, size, 1, 30, [&](int r, Communicator& c) {
      Group& ring = c.ring_group();
      if (ring.size() != size) throw std::runtime_error("ring size");
      torch::Tensor held = torch::full({3, 5}, static_cast<double>(r), torch::kDouble);
      for (int hop = 1; hop < 2 * size; ++hop) {
        torch::Tensor got = torch::empty_like(held),
                      grad_in = torch::full({2}, 100.0 + r, torch::kDouble);
        torch::Tensor grad_out = torch::empty_like(grad_in);
        auto a = ring.ring_shift(held, got, 1, "kv");
        auto b = ring.ring_shift(grad_in, grad_out, 2, "dkv");
        a.recv.wait();
        a.send.wait();
        b.recv.wait();
        b.send.wait();
        const int from = ((r - hop) % size + size) % size;
        if (got.min().item<double>() != from || got.max().item<double>() != from)
          throw std::runtime_error("hop " + std::to_string(hop) + ": rank " + std::to_string(r) +
                                   " got " + std::to_string(got[0][0].item<double>()));
        if (grad_out[0].item<double>() != 100.0 + (r + size - 1) % size)
          throw std::runtime_error("second tag");
        held = got;
      }
    });
    for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
  }

  // A rank that never joins a collective: the others get an error naming the operation and the
  // group within the timeout, not a hang.
  void hung_peer_times_out() {
    QElapsedTimer timer;
    timer.start();
    auto errors = run_ranks(2, 1, 1, 3, [&](int r, Communicator& c) {
      auto t = torch::ones({1});
      if (r == 0)
        c.world().all_reduce_sum(t, "gradients");
      else
        std::this_thread::sleep_for(std::chrono::seconds(6));
    });
    QVERIFY2(errors[0].find("rank 0: all_reduce(gradients) in group world") != std::string::npos,
             errors[0].c_str());
    QVERIFY2(errors[0].find("timed out") != std::string::npos ||
                 errors[0].find("failed") != std::string::npos,
             errors[0].c_str());
    QVERIFY(timer.elapsed() < 20000);
  }

  // ZeRO's collectives: reduce_scatter hands rank i the sum of every rank's i-th slice (also
  // when it may sum in its input); all_gather_flat puts every rank's slice in rank order; a wrong
  // size is refused by name.
  void reduce_scatter_and_all_gather_data() {
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("slice");
    QTest::newRow("2 ranks") << 2 << 5;
    QTest::newRow("3 ranks") << 3 << 1;
    QTest::newRow("4 ranks") << 4 << 7;
  }
  void reduce_scatter_and_all_gather() {
    QFETCH(int, world);
    QFETCH(int, slice);
    auto errors = run_ranks(world, 1, 1, 30, [&](int r, Communicator& c) {
      // in[j] = 100 * r + j: the sum over ranks of slice i is sum_r (100 r + i*slice + t).
      auto in = (torch::arange(world * slice, torch::kFloat) + 100.0f * static_cast<float>(r))
                    .contiguous();
      auto out = torch::empty({slice}, torch::kFloat);
      c.world().reduce_scatter_sum_async(out, in, "grads").wait();
      const float ranks_sum = 100.0f * static_cast<float>(world * (world - 1) / 2);
      auto want =
          torch::arange(r * slice, (r + 1) * slice, torch::kFloat) * static_cast<float>(world) +
          ranks_sum;
      if (!torch::equal(out, want)) throw std::runtime_error("reduce_scatter: wrong sums");
      // The consuming form sums in its input: the same sums, in a view of `in` on Gloo (no copy
      // of the whole input is made); a size that does not split is refused by name.
      auto given = (torch::arange(world * slice, torch::kFloat) + 100.0f * static_cast<float>(r))
                       .contiguous();
      torch::Tensor piece;
      c.world().reduce_scatter_sum_consuming_async(piece, given, "grads").wait();
      if (!torch::equal(piece, want))
        throw std::runtime_error("consuming reduce_scatter: wrong sums");
      if (piece.data_ptr() != given.narrow(0, r * slice, slice).data_ptr())
        throw std::runtime_error(
            "consuming reduce_scatter: the piece is not this rank's slice of the input");
      auto odd = torch::zeros({world * slice + 1}, torch::kFloat);
      try {
        c.world().reduce_scatter_sum_consuming_async(piece, odd, "grads");
        throw std::runtime_error("an input that does not split was accepted");
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find("reduce_scatter(grads)") == std::string::npos)
          throw std::runtime_error(std::string("unclear error: ") + e.what());
      }
      auto mine = torch::full({slice}, static_cast<float>(r));
      auto all = torch::empty({world * slice}, torch::kFloat);
      c.world().all_gather_flat_async(all, mine, "weights").wait();
      for (int q = 0; q < world; ++q)
        if (!torch::equal(all.narrow(0, q * slice, slice),
                          torch::full({slice}, static_cast<float>(q))))
          throw std::runtime_error("all_gather: slice " + std::to_string(q) + " is wrong");
      auto bad = torch::empty({world * slice + 1}, torch::kFloat);
      try {
        c.world().all_gather_flat_async(bad, mine, "weights");
        throw std::runtime_error("a wrong size was accepted");
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find("all_gather(weights)") == std::string::npos)
          throw std::runtime_error(std::string("unclear error: ") + e.what());
      }
    });
    for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
  }

  // Collective verification: ranks that reach different operations (a different name, size,
  // dtype, a skipped collective, a ring hop of another shape) get a CollectiveError naming both
  // sides, where unverified Gloo would exchange mismatched buffers or abort the process.
  void verification_names_divergent_collectives_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");
    QTest::newRow("skipped collective") << "skip"
                                        << "runs all_reduce(gradients (bucket 0)) of 1000";
    QTest::newRow("other size") << "size"
                                << "of 7 ";
    QTest::newRow("other dtype") << "dtype"
                                 << "Double";
    QTest::newRow("ring hop of another shape") << "ring"
                                               << "send/recv(k/v) of 12";
    QTest::newRow("agreeing ranks pass") << "same"
                                         << "";
  }
  void verification_names_divergent_collectives() {
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    const std::string k = kind.toStdString();
    auto errors = run_ranks(
        2, 2, 1, 20,
        [&](int r, Communicator& c) {
          if (k == "skip") {
            // Rank 1 has no gradient bucket to reduce and goes straight to the loss.
            if (r == 0) {
              auto g = torch::ones({1000});
              c.world().all_reduce_sum(g, "gradients (bucket 0)");
            }
            auto loss = torch::ones({1}, torch::kDouble);
            c.world().all_reduce_sum(loss, "loss");
          } else if (k == "size" || k == "dtype" || k == "same") {
            auto t = torch::ones({k == "size" && r == 1 ? 7 : 5},
                                 k == "dtype" && r == 1 ? torch::kDouble : torch::kFloat);
            c.world().all_reduce_sum(t, "loss");
            if (k == "same" && t[0].item<double>() != 2.0) throw std::runtime_error("wrong sum");
          } else {
            auto sent = torch::ones({r == 0 ? 12 : 16}), got = torch::empty({r == 0 ? 12 : 16});
            auto h = c.ring_group().ring_shift(sent, got, 3, "k/v");
            h.send.wait();
            h.recv.wait();
          }
        },
        /*verify=*/true);
    if (expected.isEmpty()) {
      for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
      return;
    }
    // Collectives: every rank sees the divergence. Point to point: the receiver that sees it
    // fails with it, its peer with a closed connection.
    bool named = false;
    for (const auto& e : errors) {
      QVERIFY2(!e.empty(), "every rank fails");
      if (k != "ring")
        QVERIFY2(e.find("rank-divergent collectives") != std::string::npos, e.c_str());
      named |= e.find("rank-divergent collectives") != std::string::npos &&
               e.find(expected.toStdString()) != std::string::npos;
    }
    QVERIFY2(named, (errors[0] + " | " + errors[1]).c_str());
  }

  void bad_grid_is_refused() {
    CommOptions o;
    o.world_size = 1;
    o.sp = 2;
    QVERIFY_EXCEPTION_THROWN(Communicator{o}, std::invalid_argument);
    o.world_size = 4;
    o.sp = 4;
    o.ulysses_degree = 3;
    o.ring_degree = 1;
    QVERIFY_EXCEPTION_THROWN(Communicator{o}, std::invalid_argument);
  }
};

QTEST_MAIN(TestCommunicator)
#include "tst_communicator.moc"
