// The Parallelism page's picture of an SP choice (sp_picture.h), by hand on small layouts: the
// zigzag pairs, Ulysses' slices and head groups, usp's grid, the replicas, each group's spans
// covering the sequence once, and one layer's traffic from the model's shape. (That the spans are
// the engine's own split is tst_sp_layout::pictureIsTheEnginesSplit.)
#include <QtTest>

#include <algorithm>

#include "studio/config/sp_picture.h"

using namespace studio;

namespace {

ModelInfo model(int64_t heads, int64_t kv_heads, int64_t head_dim = 128) {
  ModelInfo m;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.hidden_size = heads * head_dim;
  m.num_layers = 28;
  return m;
}

RunConfig choice(SpMode mode, int64_t sp, int64_t ulysses, int64_t cutoff) {
  RunConfig c;
  c.sequence_parallel_mode = mode;
  c.sequence_parallel_size = sp;
  c.sequence_parallel_ulysses_degree = ulysses;
  c.sequence_parallel_ring_degree = sp / std::max<int64_t>(1, ulysses);
  c.cutoff_len = cutoff;
  c.bf16 = true;
  c.per_device_train_batch_size = 1;
  return c;
}

QString spans(const SpRankPicture& r) {
  QStringList out;
  for (const SeqSpan& s : r.tokens) out << QStringLiteral("%1-%2").arg(s.begin).arg(s.end);
  return out.join(' ');
}

}  // namespace

class TestSpPicture : public QObject {
  Q_OBJECT

 private slots:
  void zigzagPairsChunks() {
    const SpPicture p = sp_picture(choice(SpMode::ZigzagRing, 4, 1, 32768), model(28, 4), 8, 1);
    QVERIFY(p.problem.empty());
    QCOMPARE(p.replicas, 2);
    QCOMPARE(p.ring, 4);
    QCOMPARE(p.tokens_per_rank, int64_t{8192});
    QCOMPARE(spans(p.ranks[0]), QStringLiteral("0-0.125 0.875-1"));
    QCOMPARE(spans(p.ranks[1]), QStringLiteral("0.125-0.25 0.75-0.875"));
    QCOMPARE(spans(p.ranks[3]), QStringLiteral("0.375-0.625"));  // c_3 ++ c_4 meet
    QCOMPARE(spans(p.ranks[4]), spans(p.ranks[0]));  // the second replica
    QCOMPARE(p.ranks[5].sp_rank, 1);
    // One layer: 3 K/V blocks of 8,192 tokens x 4 KV heads x 128 x 2 bytes x 2 (K and V).
    QCOMPARE(int(p.per_layer.size()), 1);
    QCOMPARE(p.per_layer[0].bytes, int64_t{8192} * 4 * 128 * 2 * 2);
    QCOMPARE(p.per_layer[0].times, int64_t{3});
  }

  void ulyssesSlicesAndHeads() {
    const SpPicture p = sp_picture(choice(SpMode::Ulysses, 4, 4, 1000), model(32, 8), 4, 1);
    QVERIFY(p.problem.empty());
    QCOMPARE(p.tokens, int64_t{1000});  // a multiple of 4 already
    QCOMPARE(spans(p.ranks[2]), QStringLiteral("0.5-0.75"));
    QCOMPARE(p.ranks[2].heads_begin, int64_t{16});
    QCOMPARE(p.ranks[2].heads_end, int64_t{24});
    QCOMPARE(p.ranks[2].kv_heads_begin, int64_t{4});
    QCOMPARE(p.ranks[2].kv_heads_end, int64_t{6});
    // q, k, v in: 250 tokens x (32 + 2 x 8) heads x 128 x 2 bytes, 3/4 of it leaves the rank.
    QCOMPARE(p.per_layer[0].bytes, int64_t{250} * 48 * 128 * 2 * 3 / 4);
    QCOMPARE(p.per_layer[1].bytes, int64_t{250} * 32 * 128 * 2 * 3 / 4);
  }

  void uspGrid() {
    const SpPicture p = sp_picture(choice(SpMode::Usp, 4, 2, 4096), model(16, 2), 4, 1);
    QVERIFY(p.problem.empty());
    QCOMPARE(p.ulysses, 2);
    QCOMPARE(p.ring, 2);
    // Ring rank 0's piece is c_0 ++ c_3 (quarters); its two Ulysses ranks take a half each.
    QCOMPARE(spans(p.ranks[0]), QStringLiteral("0-0.25"));
    QCOMPARE(spans(p.ranks[1]), QStringLiteral("0.75-1"));
    QCOMPARE(spans(p.ranks[2]), QStringLiteral("0.25-0.5"));
    QCOMPARE(p.ranks[3].ring_index, 1);
    QCOMPARE(p.ranks[3].ulysses_index, 1);
    QCOMPARE(int(p.per_layer.size()), 3);  // two all-to-alls and the ring
  }

  void eachGroupCoversTheSequenceOnce_data() {
    QTest::addColumn<int>("mode");
    QTest::addColumn<int>("sp");
    QTest::addColumn<int>("ulysses");
    QTest::newRow("zigzag 8") << int(SpMode::ZigzagRing) << 8 << 1;
    QTest::newRow("ulysses 8") << int(SpMode::Ulysses) << 8 << 8;
    QTest::newRow("usp 8 = 4 x 2") << int(SpMode::Usp) << 8 << 4;
    QTest::newRow("usp 8 = 2 x 4") << int(SpMode::Usp) << 8 << 2;
  }
  void eachGroupCoversTheSequenceOnce() {
    QFETCH(int, mode);
    QFETCH(int, sp);
    QFETCH(int, ulysses);
    const SpPicture p = sp_picture(choice(SpMode(mode), sp, ulysses, 65536), model(32, 8), 8, 2);
    QVERIFY(p.problem.empty());
    QCOMPARE(p.replicas, 2);
    for (int group = 0; group < p.replicas; ++group) {
      std::vector<SeqSpan> all;
      for (int s = 0; s < sp; ++s)
        for (const SeqSpan& x : p.ranks[size_t(group * sp + s)].tokens) all.push_back(x);
      std::sort(all.begin(), all.end(), [](const SeqSpan& a, const SeqSpan& b) { return a.begin < b.begin; });
      double at = 0;
      for (const SeqSpan& x : all) {
        QVERIFY(qAbs(x.begin - at) < 1e-12);
        at = x.end;
      }
      QVERIFY(qAbs(at - 1.0) < 1e-12);
    }
  }

  // A huge world (the Parallelism page allows 4,096 nodes of 1,024 GPUs) costs a bounded
  // picture: the first kMaxPictureRanks ranks, the counts exact.
  void hugeWorldIsBounded() {
    const SpPicture p = sp_picture(choice(SpMode::ZigzagRing, 8, 1, 1 << 20), model(32, 8), 1024, 4096);
    QVERIFY(p.problem.empty());
    QCOMPARE(p.world, 1024 * 4096);
    QCOMPARE(p.replicas, 1024 * 4096 / 8);
    QCOMPARE(int(p.ranks.size()), kMaxPictureRanks);
    QCOMPARE(p.ranks.back().sp_rank, (kMaxPictureRanks - 1) % 8);
  }

  void problemsAreSaid() {
    QVERIFY(QString::fromStdString(
                sp_picture(choice(SpMode::ZigzagRing, 3, 1, 1024), model(8, 8), 4, 1).problem)
                .contains("does not divide the 4 GPUs"));
    QVERIFY(QString::fromStdString(
                sp_picture(choice(SpMode::Ulysses, 4, 4, 1024), model(30, 6), 4, 1).problem)
                .contains("cannot be split 4 ways"));
  }
};

QTEST_MAIN(TestSpPicture)
#include "tst_sp_picture.moc"
