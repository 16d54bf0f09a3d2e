// The host-side rules of the fused linear + cross-entropy launcher: the chunk size rule, the
// workspace layout and validate(). Every launch goes through validate(), so these hold (and are
// tested) on machines without CUDA as well.
#include "studio/kernels/fused_linear_ce.h"

#include <QtTest>

#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace studio::kernels;

using Edit = std::function<void(FusedLinearCeParams&)>;
Q_DECLARE_METATYPE(Edit)

namespace {

constexpr std::int64_t kTokens = 6;
constexpr std::int64_t kHidden = 4;
constexpr std::int64_t kVocab = 10;

// Host buffers stand in for device memory: validate() only looks at values and addresses.
// alignas(256): the workspace must be aligned like cudaMalloc's result.
struct Buffers {
  std::vector<float> x = std::vector<float>(kTokens * kHidden);
  std::vector<float> w = std::vector<float>(kVocab * kHidden);
  std::vector<std::int64_t> targets = std::vector<std::int64_t>(kTokens);
  std::vector<float> gx = std::vector<float>(kTokens * kHidden);
  std::vector<float> gw = std::vector<float>(kVocab * kHidden);
  std::vector<float> logprobs = std::vector<float>(kTokens);
  float loss = 0;
  std::int64_t count = 0;
  alignas(256) unsigned char workspace[4096] = {};
};

FusedLinearCeParams valid_params(Buffers& b) {
  FusedLinearCeParams p;
  p.x = b.x.data();
  p.weight = b.w.data();
  p.targets = b.targets.data();
  p.shape = {kTokens, kHidden, kVocab};
  p.loss_sum = &b.loss;
  p.target_count = &b.count;
  p.target_logprobs = b.logprobs.data();
  p.grad_x = b.gx.data();
  p.grad_weight = b.gw.data();
  p.workspace = b.workspace;
  p.workspace_bytes = sizeof b.workspace;
  return p;
}

const void* offset_bytes(const void* p, std::ptrdiff_t n) {
  return static_cast<const char*>(p) + n;
}

}  // namespace

class TestFusedLinearCeParams : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void chunkRule_data();
  void chunkRule();
  void workspaceSize_data();
  void workspaceSize();
  void validation_data();
  void validation();
};

void TestFusedLinearCeParams::chunkRule_data() {
  QTest::addColumn<qint64>("tokens");
  QTest::addColumn<qint64>("hidden");
  QTest::addColumn<qint64>("vocab");
  QTest::addColumn<qint64>("chunk");
  QTest::newRow("no tokens") << qint64(0) << qint64(4096) << qint64(128256) << qint64(0);
  QTest::newRow("one token") << qint64(1) << qint64(4096) << qint64(128256) << qint64(1);
  // ceil(128256 / 4096) = 32 -> 32768 / 32 = 1024 tokens of logits ~ 32768 tokens of hidden; the
  // floor is more: 2048 rows x 128256 x 4 B = 1.0 GB <= 1 GiB (4096 rows would be 2.1 GB).
  QTest::newRow("Llama-3 8B, 32k tokens")
      << qint64(32768) << qint64(4096) << qint64(128256) << qint64(2048);
  // ceil(151936 / 3584) = 43 -> ceil(131072 / 43) = 3049 -> power of two 4096, above the
  // floor's 1024 rows.
  QTest::newRow("Qwen2 7B, 128k tokens")
      << qint64(131072) << qint64(3584) << qint64(151936) << qint64(4096);
  // The rule alone gives 64 rows (8192 / ceil(151936 / 896) = 49 -> 64): 128 chunks, each a
  // pass over the 545 MB fp32 head gradient; the floor makes it 1024 rows, 8 chunks.
  QTest::newRow("Qwen2.5-0.5B, 8k tokens: the floor")
      << qint64(8192) << qint64(896) << qint64(151936) << qint64(1024);
  QTest::newRow("vocab below hidden: one chunk")
      << qint64(300) << qint64(64) << qint64(7) << qint64(300);
  QTest::newRow("small vocabulary: the floor takes every token")
      << qint64(37) << qint64(16) << qint64(20) << qint64(37);
}

void TestFusedLinearCeParams::chunkRule() {
  QFETCH(qint64, tokens);
  QFETCH(qint64, hidden);
  QFETCH(qint64, vocab);
  QFETCH(qint64, chunk);
  const LinearCeShape s{tokens, hidden, vocab};
  QCOMPARE(fused_linear_ce_chunk_tokens(s), chunk);
  QCOMPARE(effective_chunk_tokens(s, 0), chunk);
  // The point of the rule: one chunk's logits are within 2x of the hidden-state elements
  // (power-of-two rounding), or within the floor, unless the whole batch fits in one chunk.
  if (chunk > 0 && chunk < tokens)
    QVERIFY(chunk * vocab <= std::max<qint64>(2 * tokens * hidden + 2 * vocab,
                                              kChunkLogitsFloorBytes / 4));
  // The floor: never fewer rows than fill it, unless the tokens run out.
  if (chunk > 0 && chunk < tokens) QVERIFY(2 * chunk * vocab * 4 > kChunkLogitsFloorBytes);
  // An explicit chunk wins, capped at the token count.
  QCOMPARE(effective_chunk_tokens(s, 5), std::min<qint64>(5, tokens));
}

void TestFusedLinearCeParams::workspaceSize_data() {
  QTest::addColumn<qint64>("tokens");
  QTest::addColumn<qint64>("chunk");
  QTest::addColumn<int>("dtype");
  QTest::addColumn<bool>("grads");
  QTest::addColumn<qint64>("bytes");
  const int f32 = int(DType::kFloat32), b16 = int(DType::kBFloat16);
  // hidden 4, vocab 100. Parts rounded up to 256 bytes.
  QTest::newRow("empty") << qint64(0) << qint64(0) << f32 << true << qint64(0);
  // chunk 3: logits 3*100*4 = 1200 -> 1280; logprobs 10*4 = 40 -> 256.
  QTest::newRow("fp32") << qint64(10) << qint64(3) << f32 << true << qint64(1280 + 256);
  // bf16 adds the 3*100*2 = 600 -> 768 byte dlogits copy, only when gradients are wanted.
  QTest::newRow("bf16 grads") << qint64(10) << qint64(3) << b16 << true << qint64(1280 + 768 + 256);
  QTest::newRow("bf16 log-probs only")
      << qint64(10) << qint64(3) << b16 << false << qint64(1280 + 256);
  // Automatic chunk: ceil(100/4) = 25 -> ceil(10/25) = 1 token per chunk by the ratio, but the
  // 1 GiB floor takes all 10 tokens: 10*100*4 = 4000 -> 4096.
  QTest::newRow("automatic chunk") << qint64(10) << qint64(0) << f32 << true << qint64(4096 + 256);
}

void TestFusedLinearCeParams::workspaceSize() {
  QFETCH(qint64, tokens);
  QFETCH(qint64, chunk);
  QFETCH(int, dtype);
  QFETCH(bool, grads);
  QFETCH(qint64, bytes);
  const LinearCeShape s{tokens, 4, 100};
  QCOMPARE(static_cast<qint64>(
               fused_linear_ce_workspace_bytes(s, chunk, static_cast<DType>(dtype), grads)),
           bytes);
}

void TestFusedLinearCeParams::validation_data() {
  QTest::addColumn<Edit>("edit");
  QTest::addColumn<QString>("error");
  using P = FusedLinearCeParams;
  const float inf = std::numeric_limits<float>::infinity();
  QTest::newRow("valid") << Edit([](P&) {}) << QString();
  QTest::newRow("log-probs only, no workspace for grads") << Edit([](P& p) {
    p.grad_x = nullptr;
    p.grad_weight = nullptr;
  }) << QString();
  QTest::newRow("no optional outputs") << Edit([](P& p) {
    p.target_count = nullptr;
    p.target_logprobs = nullptr;
  }) << QString();
  QTest::newRow("no tokens, null inputs and workspace") << Edit([](P& p) {
    p.shape.tokens = 0;
    p.x = p.weight = nullptr;
    p.targets = nullptr;
    p.workspace = nullptr;
    p.workspace_bytes = 0;
  }) << QString();
  QTest::newRow("negative tokens")
      << Edit([](P& p) { p.shape.tokens = -2; }) << "tokens must be >= 0, got -2";
  QTest::newRow("zero hidden") << Edit([](P& p) { p.shape.hidden = 0; }) << "hidden must be > 0";
  QTest::newRow("zero vocab") << Edit([](P& p) { p.shape.vocab = 0; }) << "vocab must be > 0";
  QTest::newRow("vocab beyond int") << Edit([](P& p) { p.shape.vocab = std::int64_t{INT_MAX} + 1; })
                                    << "vocab 2147483648 exceeds INT_MAX";
  QTest::newRow("negative chunk") << Edit([](P& p) { p.chunk_tokens = -1; }) << "chunk_tokens";
  QTest::newRow("ignore_index inside the vocabulary")
      << Edit([](P& p) { p.ignore_index = 0; }) << "ignore_index 0 is a valid class";
  QTest::newRow("other negative ignore_index")
      << Edit([](P& p) { p.ignore_index = -1; }) << QString();
  QTest::newRow("infinite grad_scale")
      << Edit([inf](P& p) { p.grad_scale = inf; }) << "grad_scale must be finite";
  QTest::newRow("null loss_sum") << Edit([](P& p) { p.loss_sum = nullptr; }) << "loss_sum is null";
  QTest::newRow("null x") << Edit([](P& p) { p.x = nullptr; }) << "x is null";
  QTest::newRow("null weight") << Edit([](P& p) { p.weight = nullptr; }) << "weight is null";
  QTest::newRow("null targets") << Edit([](P& p) { p.targets = nullptr; }) << "targets is null";
  QTest::newRow("misaligned fp32 x")
      << Edit([](P& p) { p.x = offset_bytes(p.x, 2); }) << "x is not aligned to 4";
  QTest::newRow("bf16 x needs only 2-byte alignment") << Edit([](P& p) {
    p.dtype = DType::kBFloat16;
    p.x = offset_bytes(p.x, 2);
    p.grad_x = nullptr;
    p.grad_weight = nullptr;
  }) << QString();
  QTest::newRow("misaligned targets") << Edit([](P& p) {
    p.targets = static_cast<const std::int64_t*>(offset_bytes(p.targets, 4));
  }) << "targets is not aligned to 8";
  QTest::newRow("misaligned workspace")
      << Edit([](P& p) { p.workspace = const_cast<void*>(offset_bytes(p.workspace, 16)); })
      << "workspace is not aligned to 256";
  QTest::newRow("short workspace") << Edit([](P& p) {
    p.workspace_bytes = fused_linear_ce_workspace_bytes(p.shape, 0, p.dtype, true) - 1;
  }) << "workspace_bytes";
  QTest::newRow("bf16 gradients need the dlogits copy") << Edit([](P& p) {
    p.dtype = DType::kBFloat16;
    p.chunk_tokens = kTokens;
    p.workspace_bytes = fused_linear_ce_workspace_bytes(p.shape, kTokens, DType::kFloat32, true);
  }) << "workspace_bytes";
  QTest::newRow("unknown dtype") << Edit([](P& p) { p.dtype = static_cast<DType>(9); })
                                 << "unknown dtype";
}

void TestFusedLinearCeParams::validation() {
  QFETCH(Edit, edit);
  QFETCH(QString, error);
  Buffers b;
  FusedLinearCeParams p = valid_params(b);
  edit(p);
  try {
    validate(p);
    QVERIFY2(error.isEmpty(), qPrintable("accepted, expected: " + error));
  } catch (const std::invalid_argument& e) {
    QVERIFY2(!error.isEmpty(), e.what());
    QVERIFY2(QString::fromUtf8(e.what()).contains(error), e.what());
  }
}

QTEST_MAIN(TestFusedLinearCeParams)
#include "tst_fused_linear_ce_params.moc"
