// The sequence-parallel token split (no communication): which global positions each rank holds
// in every mode, the round trip through gather_sequence, the local token counts of split_batch
// (an all-padding rank included) and the head checks that refuse impossible Ulysses splits.
#include "studio/trainer/sp/layout.h"
#include "studio/trainer/sp/sp_attention.h"
#include "studio/config/sp_picture.h"

#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

using namespace studio;
using namespace studio::trainer;
using namespace studio::trainer::sp;

using Positions = std::vector<std::vector<int64_t>>;  // per SP rank, in local order
Q_DECLARE_METATYPE(Positions)
Q_DECLARE_METATYPE(SpMode)
Q_DECLARE_METATYPE(std::vector<int64_t>)

namespace {

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TokenizedSample sample(int64_t len, int64_t first_label) {
  TokenizedSample s;
  for (int64_t i = 0; i < len; ++i) {
    s.input_ids.push_back(100 + i);
    s.labels.push_back(i >= first_label ? 100 + i : kIgnoreIndex);
  }
  return s;
}

}  // namespace

class TestSpLayout : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void pictureIsTheEnginesSplit_data();
  void pictureIsTheEnginesSplit();
  void positionsPerRank_data();
  void positionsPerRank();
  void padMultiple_data();
  void padMultiple();
  void batchRoundTrip_data();
  void batchRoundTrip();
  void allPaddingRank_data();
  void allPaddingRank();
  void rejectsBadInput();
  void headsCheck_data();
  void headsCheck();
};

void TestSpLayout::positionsPerRank_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("ring");
  QTest::addColumn<int>("length");
  QTest::addColumn<Positions>("expected");
  QTest::newRow("no sp") << SpMode::ZigzagRing << 1 << 1 << 5 << Positions{{0, 1, 2, 3, 4}};
  QTest::newRow("zigzag sp2") << SpMode::ZigzagRing << 1 << 2 << 8
                              << Positions{{0, 1, 6, 7}, {2, 3, 4, 5}};
  QTest::newRow("zigzag sp4, one token per chunk")
      << SpMode::ZigzagRing << 1 << 4 << 8 << Positions{{0, 7}, {1, 6}, {2, 5}, {3, 4}};
  QTest::newRow("ulysses sp4") << SpMode::Ulysses << 4 << 1 << 8
                               << Positions{{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  // Ring piece r = c_r ++ c_{3-r}, then split contiguously over the two Ulysses ranks.
  QTest::newRow("usp 2x2") << SpMode::Usp << 2 << 2 << 16
                           << Positions{
                                  {0, 1, 2, 3}, {12, 13, 14, 15}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  // Odd Ulysses degree: the middle rank's slice straddles the two zigzag chunks.
  QTest::newRow("usp ulysses 3 x ring 2")
      << SpMode::Usp << 3 << 2 << 12 << Positions{{0, 1}, {2, 9}, {10, 11}, {3, 4}, {5, 6}, {7, 8}};
}

void TestSpLayout::positionsPerRank() {
  QFETCH(SpMode, mode);
  QFETCH(int, ulysses);
  QFETCH(int, ring);
  QFETCH(int, length);
  QFETCH(Positions, expected);
  const int64_t sp = ulysses * ring;
  QCOMPARE(static_cast<int64_t>(expected.size()), sp);
  const torch::Tensor seq = torch::arange(length, torch::kLong).mul(10).unsqueeze(0);
  for (int64_t r = 0; r < sp; ++r) {
    const SpLayout l = make_sp_layout(mode, sp, r, ulysses, ring);
    QCOMPARE(to_vector(sp_token_positions(length, l)), expected[static_cast<size_t>(r)]);
    // split_sequence cuts any dim the same way.
    const torch::Tensor want = torch::tensor(expected[static_cast<size_t>(r)]).mul(10);
    QVERIFY(torch::equal(split_sequence(seq, 1, l), want.unsqueeze(0)));
    QVERIFY(torch::equal(split_sequence(seq.t(), 0, l), want.unsqueeze(1)));
  }
}

void TestSpLayout::padMultiple_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("ring");
  QTest::addColumn<int>("multiple");
  QTest::newRow("no sp") << SpMode::ZigzagRing << 1 << 1 << 1;
  QTest::newRow("zigzag sp4") << SpMode::ZigzagRing << 1 << 4 << 8;
  QTest::newRow("ulysses sp4") << SpMode::Ulysses << 4 << 1 << 4;
  QTest::newRow("usp 3x2") << SpMode::Usp << 3 << 2 << 12;
}

void TestSpLayout::padMultiple() {
  QFETCH(SpMode, mode);
  QFETCH(int, ulysses);
  QFETCH(int, ring);
  QFETCH(int, multiple);
  const SpLayout l = make_sp_layout(mode, ulysses * ring, 0, ulysses, ring);
  QCOMPARE(sp_pad_multiple(l), int64_t(multiple));
  QCOMPARE(l.ulysses, int64_t(ulysses));
  QCOMPARE(l.ring, int64_t(ring));
}

void TestSpLayout::batchRoundTrip_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("ring");
  QTest::newRow("zigzag sp2") << SpMode::ZigzagRing << 1 << 2;
  QTest::newRow("zigzag sp4") << SpMode::ZigzagRing << 1 << 4;
  QTest::newRow("ulysses sp4") << SpMode::Ulysses << 4 << 1;
  QTest::newRow("usp 2x2") << SpMode::Usp << 2 << 2;
  QTest::newRow("usp 3x2") << SpMode::Usp << 3 << 2;
}

void TestSpLayout::batchRoundTrip() {
  QFETCH(SpMode, mode);
  QFETCH(int, ulysses);
  QFETCH(int, ring);
  const int64_t sp = ulysses * ring;
  const std::vector<TokenizedSample> samples = {sample(37, 5), sample(11, 0), sample(50, 49)};
  const std::vector<int64_t> lengths = {37, 11, 50};
  const SpLayout l0 = make_sp_layout(mode, sp, 0, ulysses, ring);
  const Batch global =
      make_batch({&samples[0], &samples[1], &samples[2]}, /*pad_id=*/0, sp_pad_multiple(l0));
  std::vector<torch::Tensor> ids, targets, positions;
  int64_t valid = 0, tokens = 0, tokens_share = 0;
  for (int64_t r = 0; r < sp; ++r) {
    const SpLayout l = make_sp_layout(mode, sp, r, ulysses, ring);
    const Batch local = split_batch(global, l, lengths);
    QCOMPARE(local.input_ids.size(1), global.input_ids.size(1) / sp);
    // Positions stay global: they are the positions of the tokens this rank holds.
    const torch::Tensor held = sp_token_positions(global.input_ids.size(1), l);
    QVERIFY(torch::equal(local.position_ids, held.unsqueeze(0).expand_as(local.position_ids)));
    QCOMPARE(local.valid_tokens, (local.targets != kIgnoreIndex).sum().item<int64_t>());
    QCOMPARE(local.tokens,
             (held.unsqueeze(0) < torch::tensor(lengths).unsqueeze(1)).sum().item<int64_t>());
    ids.push_back(local.input_ids);
    targets.push_back(local.targets);
    positions.push_back(local.position_ids);
    valid += local.valid_tokens;
    tokens += local.tokens;
    tokens_share += split_batch(global, l).tokens;
  }
  QVERIFY(torch::equal(gather_sequence(ids, 1, l0), global.input_ids));
  QVERIFY(torch::equal(gather_sequence(targets, 1, l0), global.targets));
  QVERIFY(torch::equal(gather_sequence(positions, 1, l0), global.position_ids));
  QCOMPARE(valid, global.valid_tokens);
  QCOMPARE(tokens, global.tokens);
  QCOMPARE(tokens_share, global.tokens);
}

void TestSpLayout::allPaddingRank_data() {
  QTest::addColumn<std::vector<int64_t>>("valid");
  QTest::addColumn<std::vector<int64_t>>("tokens");
  // One 2-token sample, both labels learned, in 8 positions over zigzag sp4: rank r holds
  // {r, 7-r}. Only position 0 has a target (labels[1]); positions 0 and 1 are real tokens.
  QTest::newRow("zigzag sp4") << std::vector<int64_t>{1, 0, 0, 0}
                              << std::vector<int64_t>{1, 1, 0, 0};
}

void TestSpLayout::allPaddingRank() {
  QFETCH(std::vector<int64_t>, valid);
  QFETCH(std::vector<int64_t>, tokens);
  const TokenizedSample s = sample(2, 0);
  const Batch global = make_batch({&s}, /*pad_id=*/0, 8);
  QCOMPARE(global.input_ids.size(1), int64_t(8));
  for (int64_t r = 0; r < 4; ++r) {
    const Batch local = split_batch(global, make_sp_layout(SpMode::ZigzagRing, 4, r), {2});
    QCOMPARE(local.valid_tokens, valid[static_cast<size_t>(r)]);
    QCOMPARE(local.tokens, tokens[static_cast<size_t>(r)]);
  }
}

void TestSpLayout::rejectsBadInput() {
  const TokenizedSample s = sample(6, 0);
  const Batch unpadded = make_batch({&s}, 0, 1);
  const SpLayout zigzag = make_sp_layout(SpMode::ZigzagRing, 2, 0);
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, split_batch(unpadded, zigzag));  // 6 % 4
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           split_batch(make_batch({&s}, 0, 4), zigzag, {6, 6}));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_sp_layout(SpMode::Usp, 4, 0, 3, 2));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_sp_layout(SpMode::ZigzagRing, 2, 2));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_sp_layout(SpMode::ZigzagRing, 0, 0));
}

void TestSpLayout::headsCheck_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("ring");
  QTest::addColumn<int>("qHeads");
  QTest::addColumn<int>("kvHeads");
  QTest::addColumn<QString>("error");  // empty: accepted
  QTest::newRow("zigzag takes any heads") << SpMode::ZigzagRing << 1 << 4 << 6 << 3 << "";
  QTest::newRow("ulysses scatter") << SpMode::Ulysses << 2 << 1 << 4 << 2 << "";
  QTest::newRow("ulysses replicate") << SpMode::Ulysses << 4 << 1 << 4 << 2 << "";
  QTest::newRow("ulysses mqa") << SpMode::Ulysses << 4 << 1 << 8 << 1 << "";
  QTest::newRow("ulysses kv heads vs 2")
      << SpMode::Ulysses << 2 << 1 << 6 << 3
      << "ulysses: 3 key/value heads cannot be split over 2 ranks (neither divides the other); "
         "use sequence_parallel_mode: zigzag-ring";
  QTest::newRow("ulysses kv heads vs 4")
      << SpMode::Ulysses << 4 << 1 << 12 << 6
      << "ulysses: 6 key/value heads cannot be split over 4 ranks";
  QTest::newRow("ulysses query heads") << SpMode::Ulysses << 4 << 1 << 6 << 6
                                       << "ulysses: 6 query heads cannot be split over 4 ranks";
  QTest::newRow("usp checks the ulysses degree only") << SpMode::Usp << 2 << 3 << 4 << 2 << "";
  QTest::newRow("usp kv heads")
      << SpMode::Usp << 2 << 2 << 6 << 3
      << "usp (sequence_parallel_ulysses_degree 2): 3 key/value heads cannot be split over 2 ranks";
}

void TestSpLayout::headsCheck() {
  QFETCH(SpMode, mode);
  QFETCH(int, ulysses);
  QFETCH(int, ring);
  QFETCH(int, qHeads);
  QFETCH(int, kvHeads);
  QFETCH(QString, error);
  const SpLayout l = make_sp_layout(mode, ulysses * ring, 0, ulysses, ring);
  try {
    check_sp_heads(l, qHeads, kvHeads);
    QVERIFY2(error.isEmpty(), qPrintable("accepted, expected: " + error));
  } catch (const std::invalid_argument& e) {
    QVERIFY2(!error.isEmpty(), e.what());
    QVERIFY2(QString::fromUtf8(e.what()).contains(error), e.what());
  }
}

// The Parallelism page's picture (config/sp_picture.h, which the studio draws without Torch)
// holds, for every SP rank of every group, exactly the positions the engine's split gives it.
void TestSpLayout::pictureIsTheEnginesSplit_data() {
  QTest::addColumn<SpMode>("mode");
  QTest::addColumn<int>("sp");
  QTest::addColumn<int>("ulysses");
  QTest::addColumn<int>("world");
  QTest::newRow("zigzag-ring 4") << SpMode::ZigzagRing << 4 << 1 << 4;
  QTest::newRow("zigzag-ring 2 x dp 2") << SpMode::ZigzagRing << 2 << 1 << 4;
  QTest::newRow("ulysses 4") << SpMode::Ulysses << 4 << 4 << 8;
  QTest::newRow("usp 2 x 2") << SpMode::Usp << 4 << 2 << 4;
  QTest::newRow("usp 4 x 2") << SpMode::Usp << 8 << 4 << 16;
}
void TestSpLayout::pictureIsTheEnginesSplit() {
  QFETCH(SpMode, mode);
  QFETCH(int, sp);
  QFETCH(int, ulysses);
  QFETCH(int, world);
  ModelInfo m;
  m.num_heads = 16;
  m.num_kv_heads = 8;
  m.head_dim = 64;
  m.hidden_size = 1024;
  RunConfig cfg;
  cfg.sequence_parallel_mode = mode;
  cfg.sequence_parallel_size = sp;
  cfg.sequence_parallel_ulysses_degree = ulysses;
  cfg.sequence_parallel_ring_degree = sp / ulysses;
  cfg.cutoff_len = 64 * sp;
  const SpPicture pic = sp_picture(cfg, m, std::min(world, 8), std::max(1, world / 8));
  QVERIFY2(pic.problem.empty(), pic.problem.c_str());
  QCOMPARE(int(pic.ranks.size()), world);
  QCOMPARE(pic.replicas, world / sp);
  for (const SpRankPicture& r : pic.ranks) {
    const SpLayout l = make_sp_layout(mode, sp, r.sp_rank, ulysses, sp / ulysses);
    std::vector<int64_t> want = to_vector(sp_token_positions(pic.tokens, l));
    std::sort(want.begin(), want.end());
    std::vector<int64_t> drawn;
    for (const SeqSpan& span : r.tokens)
      for (int64_t t = std::llround(span.begin * double(pic.tokens));
           t < std::llround(span.end * double(pic.tokens)); ++t)
        drawn.push_back(t);
    QCOMPARE(drawn, want);
    QCOMPARE(int64_t(drawn.size()), pic.tokens_per_rank);
  }
}

QTEST_MAIN(TestSpLayout)
#include "tst_sp_layout.moc"
