// The per-GPU memory estimate against numbers worked out by hand from the model shapes in
// resources/model-shapes (each with its arithmetic), the valid SP sizes against validation's head
// rule, the smallest SP size that fits, and the text table.
#include <QtTest>

#include <map>
#include <optional>

#include "studio/config/adapters.h"
#include "studio/config/config_io.h"
#include "studio/config/memory_estimate.h"
#include "studio/config/validate.h"

using namespace studio;

namespace {

// Llama-3.1-8B shape (the numbers most rows use):
//   h = 4096, f = 14336, 32 layers, 32 heads, 8 KV heads of 128 -> h_kv = 1024, vocab V = 128256.
//   Parameters P = 8,030,261,248: per layer 4096*4096*2 (q, o) + 4096*1024*2 (k, v)
//   + 3*4096*14336 (MLP) + 2*4096 (norms) = 218,112,000; x 32 = 6,979,584,000;
//   embedding and LM head 2 * 128256*4096 = 1,050,673,152; final norm 4096.
//   One layer's activations per token under bf16, as studio-train's decoder keeps them:
//     reference formula 12h + 4h_kv + 6f = 49,152 + 4,096 + 86,016 = 139,264 (= 34h)
//   + what the engine keeps beyond it, 10h + 2f = 69,632 (each RMSNorm's fp32 input copy 2 x 4h,
//     the o_proj input copy 2h, SiLU's output 2f)
//   + fp32 statistics 4*(heads + 2) = 136            -> 209,032 B.
//   Outside the layers: RoPE cos and sin 2*2*128 = 512, the final norm 4h + 2h + 4, the hidden
//   states it returns 2h, and for SFT the copy of the rows with a target 2h:
//   SFT 512 + 10h + 4 = 41,476 B; DPO 512 + 8h + 4 = 33,284 B.
//   With checkpointing each layer keeps its bf16 input, 2h = 8,192 B, plus one full layer:
//   SFT 32*8,192 + 209,032 + 41,476 = 512,652 B per token; DPO 504,460 B.
const QString kBase = QStringLiteral(
    "model_name_or_path: m\ndataset: d\ntemplate: qwen\noutput_dir: o\n");

ModelInfo shape(const QString& name) {
  std::string error;
  const auto m = read_model_info(STUDIO_SOURCE_DIR "/resources/model-shapes/" + name.toStdString(),
                                 error);
  if (!m) qFatal("cannot read the model shape %s: %s", qPrintable(name), error.c_str());
  return *m;
}

RunConfig config(const QString& yaml) {
  const LoadResult r = load_config_string((kBase + yaml).toStdString(), "case.yaml");
  if (!r.ok()) qFatal("bad test config:\n%s", format_all(r.diagnostics).c_str());
  return r.config;
}

// zero: -1 without a DeepSpeed JSON; offload: "", "optimizer" or "both".
EstimateOptions options(int nproc, int zero = -1, const QString& offload = {},
                        double capacity_gib = 0) {
  EstimateOptions opt;
  opt.nproc_per_node = nproc;
  if (zero >= 0) {
    DeepSpeedRequest ds;
    ds.zero_stage = zero;
    ds.offload_optimizer = !offload.isEmpty();
    ds.offload_param = offload == "both";
    opt.deepspeed = ds;
  }
  opt.gpu_capacity_bytes = capacity_gib * 1024.0 * 1024.0 * 1024.0;
  return opt;
}

double part(const MemoryEstimate& e, const QString& name) {
  for (const MemoryPart& p : memory_parts(e.bytes))
    if (name == p.key) return p.bytes;
  const std::map<QString, double> more = {{"total", e.bytes.total()},
                                          {"tokens_per_rank", double(e.tokens_per_rank)},
                                          {"bytes_per_param", e.bytes_per_param},
                                          {"model_state_bytes", e.model_state_bytes},
                                          {"offloaded_bytes", e.offloaded_bytes},
                                          {"host_activation_bytes", e.host_activation_bytes},
                                          {"loss_peak", e.long_context.loss_peak}};
  const auto it = more.find(name);
  if (it == more.end()) qFatal("no part %s", qPrintable(name));
  return it->second;
}

bool notes_mention(const MemoryEstimate& e, const QString& fragment) {
  for (const auto& n : e.notes)
    if (QString::fromStdString(n).contains(fragment)) return true;
  return false;
}

}  // namespace

class TestMemoryEstimate : public QObject {
  Q_OBJECT

 private slots:
  void parts_data();
  void parts();
  void validSpSizes_data();
  void validSpSizes();
  void validSpSizesAgreeWithValidation();
  void smallestFittingSp_data();
  void smallestFittingSp();
  void notesExplainTheAssumptions_data();
  void notesExplainTheAssumptions();
  void textTableShowsPartsAndVerdict();
  void longestFittingCutoff_data();
  void longestFittingCutoff();
  void adapterModelStates_data();
  void adapterModelStates();
  void freezeTrainsWholeLayers_data();
  void freezeTrainsWholeLayers();
};

void TestMemoryEstimate::parts_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("zero");
  QTest::addColumn<QString>("offload");
  QTest::addColumn<QString>("part");
  QTest::addColumn<double>("expected");
  const QString llama = "llama-3.1-8b";
  const QString bf16 = "bf16: true\n";

  // --- activations ------------------------------------------------------------------------
  // One layer per token, bf16: norms 2*(2h + 4) = 16,392; projection inputs 2*2h = 16,384;
  // q, k, v 2*(h + 2h_kv) = 12,288; output and lse 2h + 4*32 = 8,320; MLP 8f = 114,688
  // -> 168,072. Outside: cos, sin 2*2*128 = 512, final norm 2h + 4, its output 2h -> 16,900.
  // While a layer's attention backward runs, FlashAttention-2's workspace: the fp32 dq
  // accumulator 4h_q = 16,384, K and V gradients expanded to the 32 query heads (GQA) 2*2h_q =
  // 16,384, softmax_d 4*32 = 128 -> 32,896.
  // One token, no checkpointing: 32 x 168,072 + 32,896 + 16,900 = 5,428,100.
  QTest::newRow("llama 1 token, no checkpointing")
      << llama << bf16 + "cutoff_len: 1\ngradient_checkpointing: false\n" << 1 << -1 << ""
      << "activations" << 5428100.0;
  // 1024 tokens with checkpointing: 1024 x (32 x 2h + 168,072 + 32,896 + 16,900 = 480,012)
  // = 491,532,288.
  QTest::newRow("llama 1024 tokens, checkpointing")
      << llama << bf16 + "cutoff_len: 1024\n" << 1 << -1 << "" << "activations" << 491532288.0;
  // fp32 doubles every value: norms 2*(4h + 4) = 32,776; projection inputs 2*4h = 32,768;
  // q, k, v 4*(h + 2h_kv) = 24,576; output and lse 4h + 4*32 = 16,512; on CUDA fp32 attention
  // takes the math path, whose output is copied for o_proj, 4h = 16,384; MLP 16f = 229,376
  // -> 352,392 per layer; outside 2*4*128 + 4h + 4 + 4h = 33,796; the math path has no
  // FlashAttention workspace. 32 x 352,392 + 33,796 = 11,310,340.
  QTest::newRow("llama fp32 1 token, no checkpointing")
      << llama << "cutoff_len: 1\ngradient_checkpointing: false\n" << 1 << -1 << ""
      << "activations" << 11310340.0;
  // Qwen3-8B (h 4096, f 12288, 36 layers, 32 heads, 8 KV heads of 128) adds the per-head q/k
  // RMSNorms, their inputs and 1/rms: 2*(4096 + 1024) + 4*(32 + 8) = 10,400 to
  // 12h + 4h_kv + 8f + 4*32 + 8 = 151,688 -> 162,088 per layer; 36 x 162,088 + 32,896
  // (attention backward, as Llama's) + 16,900 = 5,884,964.
  QTest::newRow("qwen3 qk-norm 1 token, no checkpointing")
      << "qwen3-8b" << bf16 + "cutoff_len: 1\ngradient_checkpointing: false\n" << 1 << -1 << ""
      << "activations" << 5884964.0;
  // tiled_mlp: a layer keeps 8f less (168,072 - 114,688 = 53,384 per token) and one tile of
  // n = 2h x 1024 / 8f = 73 tokens holds 73 x (12f + 2h) = 13,156,352 in its backward, less
  // than the attention backward's 1024 x 32,896 = 33,685,504 (they run one after the other):
  // 1024 x (262,144 + 53,384 + 16,900) + 33,685,504 = 374,091,776.
  QTest::newRow("llama 1024 tokens, checkpointing, tiled MLP")
      << llama << bf16 + "cutoff_len: 1024\ntiled_mlp: true\n" << 1 << -1 << "" << "activations"
      << 374091776.0;
  // offload_activations: the 32 inputs leave for host memory, two come back in the backward:
  // 1024 x (2 x 2h + 168,072 + 32,896 + 16,900) = 239,874,048 on the GPU, 1024 x 32 x 2h =
  // 268,435,456 in host memory.
  QTest::newRow("llama 1024 tokens, activations offloaded")
      << llama << bf16 + "cutoff_len: 1024\noffload_activations: true\n" << 1 << -1 << ""
      << "activations" << 239874048.0;
  QTest::newRow("llama 1024 tokens, offloaded activations in host memory")
      << llama << bf16 + "cutoff_len: 1024\noffload_activations: true\n" << 1 << -1 << ""
      << "host_activation_bytes" << 268435456.0;

  // --- logits (the fused loss) -------------------------------------------------------------
  // 1024 tokens: 1024 / ceil(V / h) = 1024 / 32 = 32 rows by the ratio, but the floor's 2048
  // rows (2048 x 4V = 1,050,673,152 <= 1 GiB) take all 1024. The peak: the head's fp32 gradient
  // 4Vh = 2,101,346,304, the hidden states' gradient and the rows read 2 x 2h x 1024 =
  // 16,777,216, one chunk's logits in fp32 and bf16 1024 x 6V = 788,004,864: 2,906,128,384.
  QTest::newRow("llama loss peak 1024 tokens")
      << llama << bf16 + "cutoff_len: 1024\n" << 1 << -1 << "" << "loss_peak" << 2906128384.0;
  // 8192 tokens: 256 rows by the ratio, 2048 by the floor; 2,101,346,304 + 134,217,728 +
  // 2048 x 6V = 1,576,009,728.
  QTest::newRow("llama loss peak 8192 tokens")
      << llama << bf16 + "cutoff_len: 8192\n" << 1 << -1 << "" << "loss_peak" << 3811573760.0;
  // The layers' backward comes after the loss, and its working set (the layer recomputed,
  // 1024 x 168,072 = 172,105,728, the attention backward's 33,685,504, one layer's gradient
  // reduction, 2,181,120,000, and the head's bf16 gradient waiting for its own, 2Vh =
  // 1,050,673,152) is larger than the loss's peak: the loss needs nothing beyond it.
  QTest::newRow("bf16 1024 tokens: the backward covers the loss")
      << llama << bf16 + "cutoff_len: 1024\n" << 1 << -1 << "" << "logits" << 0.0;
  // fp32 on one GPU has no reduction buffers: the loss's peak 4Vh + 2 x 4h x 1024 + 1024 x 4V
  // = 2,660,237,312 exceeds the recomputed layer's 1024 x 352,392 = 360,849,408 by
  // 2,299,387,904.
  QTest::newRow("fp32 1024 tokens: the loss beyond the backward")
      << llama << "cutoff_len: 1024\n" << 1 << -1 << "" << "logits" << 2299387904.0;

  // --- model states -----------------------------------------------------------------------
  // Llama-3.1-8B: P = 8,030,261,248. bf16, no ZeRO: weights 2P = 16,060,522,496; fp32
  // gradients 4P = 32,121,044,992; fp32 masters + AdamW m, v 12P = 96,363,134,976: 18 B/param.
  QTest::newRow("bf16 weights") << llama << bf16 << 1 << -1 << "" << "weights" << 16060522496.0;
  QTest::newRow("bf16 fp32 gradients") << llama << bf16 << 1 << -1 << "" << "gradients"
                                       << 32121044992.0;
  QTest::newRow("bf16 optimizer") << llama << bf16 << 1 << -1 << "" << "optimizer"
                                  << 96363134976.0;
  QTest::newRow("bf16 18 B/param") << llama << bf16 << 8 << -1 << "" << "bytes_per_param"
                                   << 18.0;
  // pure_bf16: the engine keeps fp32 masters and fp32 m, v all the same: 12P.
  QTest::newRow("pure_bf16 optimizer") << llama << "pure_bf16: true\n" << 1 << -1 << ""
                                       << "optimizer" << 96363134976.0;
  // fp32: 4P = 32,121,044,992 weights (the masters themselves), 8P = 64,242,089,984 m and v.
  QTest::newRow("fp32 weights") << llama << "" << 1 << -1 << "" << "weights" << 32121044992.0;
  QTest::newRow("fp32 optimizer") << llama << "" << 1 << -1 << "" << "optimizer"
                                  << 64242089984.0;
  // ZeRO-1 over 8: masters + m, v 12P/8 = 12,045,391,872; gradients whole (4P);
  // 2 + 4 + 12/8 = 7.5 B/param.
  QTest::newRow("zero1 optimizer") << llama << bf16 << 8 << 1 << "" << "optimizer"
                                   << 12045391872.0;
  QTest::newRow("zero1 gradients whole") << llama << bf16 << 8 << 1 << "" << "gradients"
                                         << 32121044992.0;
  QTest::newRow("zero1 7.5 B/param") << llama << bf16 << 8 << 1 << "" << "bytes_per_param"
                                     << 7.5;
  // ZeRO-2 over 8: gradient pieces 4P/8 = 4,015,130,624; 2 + 16/8 = 4 B/param.
  QTest::newRow("zero2 gradients") << llama << bf16 << 8 << 2 << "" << "gradients"
                                   << 4015130624.0;
  QTest::newRow("zero2 weights whole") << llama << bf16 << 8 << 2 << "" << "weights"
                                       << 16060522496.0;
  QTest::newRow("zero2 4 B/param") << llama << bf16 << 8 << 2 << "" << "bytes_per_param" << 4.0;
  // ZeRO-3 over 8: no resident weights (the pieces are the masters); gathered in bf16: the
  // embeddings, LM head and final norm (2 x 525,336,576 + 4096 = 1,050,677,248) and two layers
  // (2 x 218,112,000): 2 x 1,486,901,248 = 2,973,802,496.
  QTest::newRow("zero3 weights") << llama << bf16 << 8 << 3 << "" << "weights" << 2973802496.0;
  QTest::newRow("zero3 gradients") << llama << bf16 << 8 << 3 << "" << "gradients"
                                   << 4015130624.0;
  QTest::newRow("zero3 optimizer") << llama << bf16 << 8 << 3 << "" << "optimizer"
                                   << 12045391872.0;
  // 16/8 B/param resident between steps: 2P = 16,060,522,496.
  QTest::newRow("zero3 model states") << llama << bf16 << 8 << 3 << "" << "model_state_bytes"
                                      << 16060522496.0;
  // Offloads: masters, m, v and gradient pieces leave for host memory (16P/8 = 2P there);
  // the gathered weights stay.
  QTest::newRow("zero3 offload weights") << llama << bf16 << 8 << 3 << "both" << "weights"
                                         << 2973802496.0;
  QTest::newRow("zero3 offload optimizer") << llama << bf16 << 8 << 3 << "both" << "optimizer"
                                           << 0.0;
  QTest::newRow("zero3 offload gradients") << llama << bf16 << 8 << 3 << "both" << "gradients"
                                           << 0.0;
  QTest::newRow("zero3 offload: nothing resident")
      << llama << bf16 << 8 << 3 << "both" << "model_state_bytes" << 0.0;
  QTest::newRow("zero3 offload: host") << llama << bf16 << 8 << 3 << "both" << "offloaded_bytes"
                                       << 16060522496.0;
  QTest::newRow("zero2 offload optimizer") << llama << bf16 << 8 << 2 << "optimizer"
                                           << "optimizer" << 0.0;
  // ZeRO-1 offload: the whole fp32 gradients stay on the GPU.
  QTest::newRow("zero1 offload gradients stay")
      << llama << bf16 << 8 << 1 << "optimizer" << "gradients" << 32121044992.0;
  // offload_param below ZeRO-3 (validate refuses it) changes nothing here.
  QTest::newRow("zero2 offload_param ignored") << llama << bf16 << 8 << 2 << "both" << "weights"
                                               << 16060522496.0;
  // The native keys ask the same as the JSON.
  QTest::newRow("zero_stage key") << llama << bf16 + "zero_stage: 3\n" << 8 << -1 << ""
                                  << "gradients" << 4015130624.0;

  // --- DPO --------------------------------------------------------------------------------
  // Chosen + rejected: 2 rows x 1024 = 2048 tokens per rank.
  QTest::newRow("dpo doubles tokens") << llama << bf16 + "stage: dpo\ncutoff_len: 1024\n" << 1
                                      << -1 << "" << "tokens_per_rank" << 2048.0;
  // 2048 tokens: 2048 x 480,012 = 983,064,576.
  QTest::newRow("dpo activations") << llama << bf16 + "stage: dpo\ncutoff_len: 1024\n" << 1 << -1
                                   << "" << "activations" << 983064576.0;
  // Reference model: 2 B/param -> 2P = 16,060,522,496; fp32: 4P = 32,121,044,992.
  QTest::newRow("dpo reference") << llama << bf16 + "stage: dpo\n" << 1 << -1 << ""
                                 << "reference" << 16060522496.0;
  QTest::newRow("dpo fp32 reference") << llama << "stage: dpo\n" << 1 << -1 << "" << "reference"
                                      << 32121044992.0;
  QTest::newRow("dpo precomputed reference")
      << llama << bf16 + "stage: dpo\nprecompute_ref_logps: true\n" << 1 << -1 << ""
      << "reference" << 0.0;
  // ZeRO-3 shards the reference like the weights: 2P/8 = 2,007,565,312.
  QTest::newRow("dpo zero3 reference") << llama << bf16 + "stage: dpo\n" << 8 << 3 << ""
                                       << "reference" << 2007565312.0;
  QTest::newRow("sft no reference") << llama << bf16 << 1 << -1 << "" << "reference" << 0.0;
  // orpo and simpo build no reference model (LLaMA-Factory's use_ref_model is false); kto_pair does.
  QTest::newRow("orpo no reference") << llama << bf16 + "stage: dpo\npref_loss: orpo\n" << 1 << -1
                                     << "" << "reference" << 0.0;
  QTest::newRow("simpo zero3 no reference") << llama << bf16 + "stage: dpo\npref_loss: simpo\n" << 8
                                            << 3 << "" << "reference" << 0.0;
  QTest::newRow("kto_pair reference") << llama << bf16 + "stage: dpo\npref_loss: kto_pair\n" << 1
                                      << -1 << "" << "reference" << 16060522496.0;
  QTest::newRow("pt no reference") << llama << bf16 + "stage: pt\n" << 1 << -1 << "" << "reference"
                                   << 0.0;
  // Stage rm: no reference; the value head's h + 1 = 4,097 parameters join the weights
  // (2 x (P + 4,097) = 16,060,530,690 in bf16); chosen and rejected rows as DPO's; no LM head
  // runs: the loss's peak is the final hidden states' gradient, 2 x h x 2048 = 16,777,216.
  QTest::newRow("rm no reference") << llama << bf16 + "stage: rm\n" << 1 << -1 << ""
                                   << "reference" << 0.0;
  QTest::newRow("rm value head in the weights") << llama << bf16 + "stage: rm\n" << 1 << -1 << ""
                                                << "weights" << 16060530690.0;
  QTest::newRow("rm doubles tokens") << llama << bf16 + "stage: rm\ncutoff_len: 1024\n" << 1
                                     << -1 << "" << "tokens_per_rank" << 2048.0;
  QTest::newRow("rm loss peak: no logits") << llama << bf16 + "stage: rm\ncutoff_len: 1024\n"
                                           << 1 << -1 << "" << "loss_peak" << 16777216.0;
  // Stage kto: DPO's reference (2P), one row per example (its KL row runs without gradients).
  QTest::newRow("kto reference") << llama << bf16 + "stage: kto\n" << 1 << -1 << ""
                                 << "reference" << 16060522496.0;
  QTest::newRow("kto precomputed reference")
      << llama << bf16 + "stage: kto\nprecompute_ref_logps: true\n" << 1 << -1 << ""
      << "reference" << 0.0;
  QTest::newRow("kto one row per example") << llama << bf16 + "stage: kto\ncutoff_len: 1024\n"
                                           << 1 << -1 << "" << "tokens_per_rank" << 1024.0;
  // ASFT (use_asft_loss) runs the same frozen reference as DPO, sharded the same way.
  QTest::newRow("asft reference") << llama << bf16 + "use_asft_loss: true\n" << 1 << -1 << ""
                                  << "reference" << 16060522496.0;
  QTest::newRow("asft zero3 reference") << llama << bf16 + "use_asft_loss: true\n" << 8 << 3
                                        << "" << "reference" << 2007565312.0;

  // --- sequence parallelism ---------------------------------------------------------------
  // cutoff 2048 on a world of 4: SP=1 holds 2048 tokens, SP=4 512.
  // Activations 2048 x 480,012 = 983,064,576 vs 512 x 480,012 = 245,766,144 (a quarter).
  QTest::newRow("sp1 activations") << llama << bf16 + "cutoff_len: 2048\n" << 4 << -1 << ""
                                   << "activations" << 983064576.0;
  QTest::newRow("sp4 activations")
      << llama << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 4\n" << 4 << -1 << ""
      << "activations" << 245766144.0;
  // The loss's per-token part a quarter too (the head's gradient 4Vh = 2,101,346,304 stays);
  // the floor takes every token into one chunk: 2048 tokens, 2 x 2h x 2048 + 2048 x 6V =
  // 1,609,564,160; 512 tokens: 402,391,040.
  QTest::newRow("sp1 loss peak") << llama << bf16 + "cutoff_len: 2048\n" << 4 << -1 << ""
                                 << "loss_peak" << 3710910464.0;
  QTest::newRow("sp4 loss peak")
      << llama << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 4\n" << 4 << -1 << ""
      << "loss_peak" << 2503737344.0;
  // Padding: zigzag over 4 pads to a multiple of 8: 1001 -> 1008, / 4 = 252; Ulysses pads to
  // a multiple of 4: 1001 -> 1004, / 4 = 251.
  QTest::newRow("zigzag pads to 2 x sp")
      << llama << bf16 + "cutoff_len: 1001\nsequence_parallel_size: 4\n" << 4 << -1 << ""
      << "tokens_per_rank" << 252.0;
  QTest::newRow("ulysses pads to sp")
      << llama
      << bf16 + "cutoff_len: 1001\nsequence_parallel_size: 4\nsequence_parallel_mode: ulysses\n"
      << 4 << -1 << "" << "tokens_per_rank" << 251.0;
  // SP buffers: none without SP.
  QTest::newRow("sp1 no buffers") << llama << bf16 + "cutoff_len: 2048\n" << 4 << -1 << ""
                                  << "sp_buffers" << 0.0;
  // Zigzag ring: forward (4 + 2 + 4 + 8) h_q + 4*2*h_kv = 73,728 + 8,192 = 81,920 beats backward
  // 8h_q + 40h_kv = 32,768 + 40,960 = 73,728; x 512 tokens = 41,943,040.
  QTest::newRow("zigzag ring buffers")
      << llama << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 4\n" << 4 << -1 << ""
      << "sp_buffers" << 41943040.0;
  // Ulysses: no ring; send + receive of q, k, v, out: 2*2*(2*4096 + 2*1024) = 40,960; x 512
  // = 20,971,520.
  QTest::newRow("ulysses buffers, no ring")
      << llama
      << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 4\nsequence_parallel_mode: ulysses\n"
      << 4 << -1 << "" << "sp_buffers" << 20971520.0;
  // usp 2 x 2: both, (81,920 + 40,960) x 512 = 62,914,560.
  QTest::newRow("usp buffers")
      << llama
      << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 4\nsequence_parallel_mode: usp\n"
                "sequence_parallel_ulysses_degree: 2\nsequence_parallel_ring_degree: 2\n"
      << 4 << -1 << "" << "sp_buffers" << 62914560.0;
  // Ulysses over 16 with 8 KV heads repeats each twice: K/V count 2 x 1024 from the all-to-all
  // on. 2048 / 16 = 128 tokens. Buffers 2*2*(2*4096 + 2*2048) = 49,152 x 128 = 6,291,456;
  // a layer keeps 168,072 + 2*2*1024 = 172,168; the attention backward works on 2 query heads
  // of the full sequence per rank, the same 32,896 per local token (GQA: 2 heads over 1 KV head);
  // 128 x (32*8,192 + 172,168 + 32,896 + 16,900) = 61,965,824.
  QTest::newRow("ulysses kv replication buffers")
      << llama
      << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 16\nsequence_parallel_mode: ulysses\n"
      << 16 << -1 << "" << "sp_buffers" << 6291456.0;
  QTest::newRow("ulysses kv replication activations")
      << llama
      << bf16 + "cutoff_len: 2048\nsequence_parallel_size: 16\nsequence_parallel_mode: ulysses\n"
      << 16 << -1 << "" << "activations" << 61965824.0;

  // --- gradient reductions and the optimizer step -------------------------------------------
  // One GPU, bf16: a layer's gradients in bf16, their fp32 copy and the flat buffer,
  // (2 + 8) x 218,112,000 = 2,181,120,000, while the layers run backward, and the LM head's bf16
  // gradient waiting for its reduction at the end, 2Vh = 1,050,673,152: 3,231,793,152 (8192
  // tokens: the activations outweigh the embeddings' reduction at the end).
  QTest::newRow("gradient buffers of a layer")
      << llama << bf16 + "cutoff_len: 8192\n" << 1 << -1 << "" << "zero_buffers" << 3231793152.0;
  // ZeRO-2 over 8 adds two earlier layers' reduce-scatters: 2 x 4 x 218,112,000 x 9/8 =
  // 1,963,008,000 -> 5,194,801,152.
  QTest::newRow("gradient buffers, reduce-scatter")
      << llama << bf16 + "cutoff_len: 1024\n" << 8 << 2 << "" << "zero_buffers" << 5194801152.0;
  // Qwen2.5-0.5B (tied, E = 151936 x 896 = 136,134,656; layers of 14,912,384 parameters), one
  // token: activations 24 x 2h + 50,240 + 3,844 = 97,092; the reductions 10 x 14,912,384 + the
  // head's gradient 2E = 421,393,152; the loss's peak 4E + 2 x 2h + 6V = 545,453,824,
  // 124,010,432 beyond the backward's working set (50,240 + 421,393,152). The embeddings'
  // reduction at the end, (2 + 4) x E = 816,807,936, exceeds 97,092 + 124,010,432 + 421,393,152
  // = 545,500,676: zero_buffers = 421,393,152 + 271,307,260 = 692,700,412.
  QTest::newRow("one token: the embeddings' reduction is the backward's peak")
      << "qwen2.5-0.5b" << bf16 + "cutoff_len: 1\n" << 1 << -1 << "" << "zero_buffers"
      << 692700412.0;
  // AdamW updates in place (one fused kernel per unit on the GPU): on one GPU the step needs
  // nothing beyond the model states, whatever the length.
  QTest::newRow("one token: AdamW needs nothing more")
      << llama << bf16 + "cutoff_len: 1\n" << 1 << -1 << "" << "optimizer_step" << 0.0;
  QTest::newRow("1024 tokens: AdamW needs nothing more")
      << llama << bf16 + "cutoff_len: 1024\n" << 1 << -1 << "" << "optimizer_step" << 0.0;
  // ZeRO-1 over 2: the all-gather of two units in flight, the largest being the embeddings and
  // the LM head (525,336,576 each): 2 x 2 x 525,336,576 x 3/2 = 3,152,019,456, less than the
  // backward's 3,232,273,164 (480,012 + 3,231,793,152); over 8 ranks with the LM head's
  // gradient pieces, the same.
  QTest::newRow("zero1 on two ranks: the all-gather within the backward's")
      << llama << bf16 + "cutoff_len: 1\n" << 2 << 1 << "" << "optimizer_step" << 0.0;
  QTest::newRow("long run: the backward is the peak")
      << llama << bf16 + "cutoff_len: 131072\n" << 1 << -1 << "" << "optimizer_step" << 0.0;
  // ZeRO-3 with offload: the update runs on the CPU; nothing on the GPU.
  QTest::newRow("zero3 offload: the step needs nothing on the GPU")
      << llama << bf16 + "cutoff_len: 1\n" << 8 << 3 << "both" << "optimizer_step" << 0.0;
  // The total is the sum of the parts, the peak of the backward (activations 491,532,288,
  // gradient buffers 3,231,793,152; the step needs nothing beyond): 16,060,522,496 +
  // 32,121,044,992 + 96,363,134,976 + 491,532,288 + 3,231,793,152 = 148,268,027,904.
  QTest::newRow("total") << llama << bf16 + "cutoff_len: 1024\n" << 1 << -1 << "" << "total"
                         << 148268027904.0;
  // finetuning_type full said explicitly, or with another type's keys (ignored), is the same
  // estimate as the rows above.
  QTest::newRow("full said: total") << llama << bf16 + "cutoff_len: 1024\nfinetuning_type: full\n"
                                    << 1 << -1 << "" << "total" << 148268027904.0;
  QTest::newRow("full with lora keys: total")
      << llama << bf16 + "cutoff_len: 1024\nlora_rank: 16\nlora_target: q_proj\n" << 1 << -1 << ""
      << "total" << 148268027904.0;
  QTest::newRow("full said: zero3 model states")
      << llama << bf16 + "finetuning_type: full\n" << 8 << 3 << "" << "model_state_bytes"
      << 16060522496.0;
  QTest::newRow("full said: zero3 weights") << llama << bf16 + "finetuning_type: full\n" << 8 << 3
                                            << "" << "weights" << 2973802496.0;
  QTest::newRow("full said: dpo reference") << llama << bf16 + "finetuning_type: full\nstage: dpo\n"
                                            << 1 << -1 << "" << "reference" << 16060522496.0;
}

void TestMemoryEstimate::parts() {
  QFETCH(QString, model);
  QFETCH(QString, yaml);
  QFETCH(int, nproc);
  QFETCH(int, zero);
  QFETCH(QString, offload);
  QFETCH(QString, part);
  QFETCH(double, expected);
  const MemoryEstimate e =
      estimate_memory(config(yaml), shape(model), options(nproc, zero, offload));
  QCOMPARE(::part(e, part), expected);
  QCOMPARE(e.world_size, nproc);
  double sum = 0;  // the parts of the table and the wizard's bar add up to the total
  for (const MemoryPart& p : memory_parts(e.bytes)) sum += p.bytes;
  QCOMPARE(sum, e.bytes.total());
}

void TestMemoryEstimate::validSpSizes_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<QString>("mode");
  QTest::addColumn<int>("world");
  QTest::addColumn<QList<int>>("sizes");
  // Qwen2.5-7B: 28 query heads, 4 KV heads. Ulysses 8 cannot split 28 heads.
  QTest::newRow("qwen2.5-7b zigzag-ring 8") << "qwen2.5-7b" << "zigzag-ring" << 8
                                            << QList<int>{1, 2, 4, 8};
  QTest::newRow("qwen2.5-7b ulysses 8") << "qwen2.5-7b" << "ulysses" << 8 << QList<int>{1, 2, 4};
  QTest::newRow("qwen2.5-7b usp 8") << "qwen2.5-7b" << "usp" << 8 << QList<int>{1, 2, 4, 8};
  // 28 % 3 != 0: of 1, 2, 3, 6 only 1 and 2 split the heads.
  QTest::newRow("qwen2.5-7b ulysses 6") << "qwen2.5-7b" << "ulysses" << 6 << QList<int>{1, 2};
  // Llama: 32 heads, 8 KV heads: 16 replicates each KV head twice.
  QTest::newRow("llama ulysses 16") << "llama-3.1-8b" << "ulysses" << 16
                                    << QList<int>{1, 2, 4, 8, 16};
  QTest::newRow("one GPU") << "qwen2.5-7b" << "ulysses" << 1 << QList<int>{1};
}

void TestMemoryEstimate::validSpSizes() {
  QFETCH(QString, model);
  QFETCH(QString, mode);
  QFETCH(int, world);
  QFETCH(QList<int>, sizes);
  const RunConfig cfg = config("sequence_parallel_mode: " + mode + "\n");
  const std::vector<int> got = valid_sp_sizes(cfg, shape(model), world);
  QCOMPARE(QList<int>(got.begin(), got.end()), sizes);
}

// The estimate's SP sizes are exactly those validate_config accepts (one head rule for both).
void TestMemoryEstimate::validSpSizesAgreeWithValidation() {
  const QString dir = STUDIO_SOURCE_DIR "/resources/model-shapes/qwen2.5-7b";
  const ModelInfo m = shape("qwen2.5-7b");
  for (int world : {6, 8, 12}) {
    const RunConfig base = config("sequence_parallel_mode: ulysses\n");
    const std::vector<int> valid = valid_sp_sizes(base, m, world);
    for (int sp : divisors(world)) {
      RunConfig c = config("sequence_parallel_mode: ulysses\nsequence_parallel_size: " +
                           QString::number(sp) + "\n");
      c.model_name_or_path = dir.toStdString();
      ValidateOptions opt;
      opt.nproc_per_node = world;
      bool head_error = false;
      for (const auto& d : validate_config(c, opt))
        head_error |= d.severity == Severity::Error && d.key == "sequence_parallel_size";
      const bool listed = std::find(valid.begin(), valid.end(), sp) != valid.end();
      QVERIFY2(listed != head_error, qPrintable(QString("world %1, sp %2").arg(world).arg(sp)));
    }
  }
}

void TestMemoryEstimate::smallestFittingSp_data() {
  QTest::addColumn<QString>("mode");
  QTest::addColumn<double>("capacityGib");
  QTest::addColumn<int>("expected");  // -1: none
  // Qwen2.5-7B SFT, 131072 tokens, bf16, checkpointing, ZeRO-3 offload over 8 GPUs:
  //   weights: gathered in bf16, the embeddings, LM head and norm (2 x 152064*3584 + 3584 =
  //   1,089,998,336) and two layers (2 x 233,057,792): 2 x 1,556,113,920 = 3,112,227,840;
  //   gradients and optimizer states offloaded. Gradient buffers (stage 3 over 8): a layer in
  //   bf16 and fp32 with its flat buffer and two reduce-scatters in flight, (10 + 9) x
  //   233,057,792 = 4,428,098,048, and the LM head's bf16 gradient 2Vh = 1,089,994,752 until its
  //   reduction: 5,518,092,800 (the embeddings' end-of-backward reduction is smaller).
  //   Per token: 28 layers x 2h (200,704) + one layer (12h + 4h_kv + 8f + 4*28 + 8 = 196,728)
  //   + outside 512 + 4h + 4 (14,852) + FlashAttention-2's backward workspace (4h_q + 2*2h_q
  //   + 4*28 = 28,784, GQA) = 441,068; zigzag buffers 68,608 per token (forward: 18 x 3584 +
  //   8 x 512). The fused loss's peak (4Vh = 2,180,014,080 + 2 x 2h x T + one chunk's 6V per
  //   row) stays below the backward's working set (the recomputed layer, the SP and gradient
  //   buffers): logits 0.
  //   SP 1: 3,112,227,840 + 131072 x 441,068 + 5,518,092,800 = 66,441,985,536 (61.88 GiB)
  //   SP 2: 3,112,227,840 + 65536 x (441,068 + 68,608) + 5,518,092,800 = 42,032,446,976 (39.15)
  //   SP 4: 25,331,383,808 (23.59); SP 8: 16,980,852,224 (15.81).
  QTest::newRow("80 GiB") << "zigzag-ring" << 80.0 << 1;
  QTest::newRow("58 GiB") << "zigzag-ring" << 58.0 << 2;
  QTest::newRow("37 GiB") << "zigzag-ring" << 37.0 << 4;
  QTest::newRow("22 GiB") << "zigzag-ring" << 22.0 << 8;
  QTest::newRow("16 GiB") << "zigzag-ring" << 16.0 << 8;
  QTest::newRow("15.5 GiB: none") << "zigzag-ring" << 15.5 << -1;
  QTest::newRow("capacity unknown") << "zigzag-ring" << 0.0 << -1;
  // Ulysses cannot use 8 (28 heads), so 16 GiB has no answer there. At SP 4 its buffers,
  // 2*2*(2*3584 + 2*512) = 32,768 B per token x 32,768 tokens = 1,073,741,824 instead of the
  // ring's, give a total of 24,156,978,688 (22.50 GiB): it fits 23 GiB.
  QTest::newRow("ulysses 16 GiB: none") << "ulysses" << 16.0 << -1;
  QTest::newRow("ulysses 23 GiB") << "ulysses" << 23.0 << 4;
  // usp takes the largest Ulysses degree that splits the heads (4 for SP 8: 28 / 8 fails) and
  // rings the rest (2): SP 8 holds 16384 tokens with both kinds of buffers, (68,608 + 32,768)
  // x 16384 = 1,660,944,384: total 17,517,723,136 (16.31 GiB) fits 16.5 GiB.
  QTest::newRow("usp 16.5 GiB") << "usp" << 16.5 << 8;
}

void TestMemoryEstimate::smallestFittingSp() {
  QFETCH(QString, mode);
  QFETCH(double, capacityGib);
  QFETCH(int, expected);
  const RunConfig cfg = config("bf16: true\ncutoff_len: 131072\nsequence_parallel_mode: " + mode +
                               "\n");
  const auto got =
      smallest_fitting_sp(cfg, shape("qwen2.5-7b"), options(8, 3, "both", capacityGib));
  QCOMPARE(got.value_or(-1), expected);
}

void TestMemoryEstimate::notesExplainTheAssumptions_data() {
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<int>("zero");
  QTest::addColumn<QString>("fragment");
  QTest::newRow("zero: pieces over the whole world") << "bf16: true\n" << 3
                                                     << "one per rank of the whole world";
  QTest::newRow("zero3: what is gathered") << "bf16: true\n" << 3
                                           << "ZeRO-3 gathers weights in the compute dtype";
  QTest::newRow("no zero: replicas") << "bf16: true\n" << -1 << "No ZeRO: each of the";
  QTest::newRow("bf16: fp32 gradients") << "bf16: true\n" << -1 << "fp32 gradients (4, summed";
  QTest::newRow("pure_bf16 keeps masters") << "pure_bf16: true\n" << -1
                                           << "it keeps fp32 masters and states";
  QTest::newRow("loss fused") << "bf16: true\n" << -1 << "no [tokens x vocab] tensor exists";
  QTest::newRow("tiled MLP") << "bf16: true\ntiled_mlp: true\n" << -1 << "tiled_mlp: the MLP runs over tiles";
  QTest::newRow("activations offloaded") << "bf16: true\noffload_activations: true\n" << -1
                                         << "in host memory (offload_activations)";
  QTest::newRow("reference activations formula") << "bf16: true\n" << -1
                                                 << "12h + 4h_kv + 6f";
  QTest::newRow("checkpointing") << "bf16: true\n" << -1 << "gradient_checkpointing:";
  QTest::newRow("loss and backward never together") << "bf16: true\n" << -1
                                                    << "comes before the layers' backward";
  QTest::newRow("precomputed reference") << "bf16: true\nstage: dpo\nprecompute_ref_logps: true\n"
                                         << -1 << "precompute_ref_logps";
  QTest::newRow("capacity unknown") << "bf16: true\n" << -1 << "GPU capacity unknown";
  QTest::newRow("ring buffers") << "bf16: true\nsequence_parallel_size: 8\n" << -1
                                << "Ring attention (degree 8)";
  QTest::newRow("lora: what is trained") << "bf16: true\nfinetuning_type: lora\n" << 3
                                        << "parameters are trained (the adapters): only they have "
                                           "gradients, fp32 masters and AdamW states";
  QTest::newRow("lora dpo: the reference is the base")
      << "bf16: true\nstage: dpo\nfinetuning_type: lora\n" << -1
      << "DPO reference: the base model with the LoRA adapters switched off";
  QTest::newRow("lora kto: the reference is the base")
      << "bf16: true\nstage: kto\nfinetuning_type: lora\n" << 3
      << "KTO reference: the base model with the LoRA adapters switched off";
  QTest::newRow("lora dpo, additional_target: a reference copy")
      << "bf16: true\nstage: dpo\nfinetuning_type: lora\nadditional_target: norm\n" << -1
      << "DPO reference model: a frozen copy in the compute dtype";
  // Llama-3.1-8B's last two layers, 2 x 218,112,000.
  QTest::newRow("freeze: what is trained") << "bf16: true\nfinetuning_type: freeze\n" << -1
                                          << "freeze: 436M of the 8.03B parameters are trained";
  QTest::newRow("neat packing workspace")
      << "bf16: true\nneat_packing: true\nsequence_parallel_size: 8\n" << -1
      << "masked attention runs on the math path";
}

void TestMemoryEstimate::notesExplainTheAssumptions() {
  QFETCH(QString, yaml);
  QFETCH(int, zero);
  QFETCH(QString, fragment);
  const MemoryEstimate e = estimate_memory(config(yaml), shape("llama-3.1-8b"), options(8, zero));
  QVERIFY2(notes_mention(e, fragment),
           qPrintable(QString::fromStdString(format_estimate_text(e))));
  if (yaml.contains("neat_packing")) {
    // The workspace is counted, not just mentioned: 4 fp32 buffers of min(2^25, heads x t^2)
    // elements (Llama-3.1-8B: 32 heads).
    const MemoryEstimate plain = estimate_memory(
        config(QString(yaml).remove("neat_packing: true\n")), shape("llama-3.1-8b"), options(8, zero));
    const double t = double(e.tokens_per_rank);
    QCOMPARE(e.bytes.sp_buffers - plain.bytes.sp_buffers,
             16.0 * std::min(double(int64_t(1) << 25), 32 * t * t));
  }
}

void TestMemoryEstimate::textTableShowsPartsAndVerdict() {
  // The SP 2 and SP 1 cases of smallestFittingSp_data.
  const ModelInfo m = shape("qwen2.5-7b");
  auto text = [&m](const QString& yaml, double capacity_gib) {
    const RunConfig cfg = config("bf16: true\ncutoff_len: 131072\n" + yaml);
    const MemoryEstimate e = estimate_memory(cfg, m, options(8, 3, "both", capacity_gib));
    return QString::fromStdString(format_estimate_text(e));
  };
  const QString fits = text("sequence_parallel_size: 2\n", 80);
  QVERIFY2(fits.contains("world 8, sequence parallel 2 (zigzag-ring), 65,536 tokens per rank"),
           qPrintable(fits));
  // The fused loss needs nothing beyond the backward; total 42,032,446,976 B = 39.15 GiB, 40.85
  // spare.
  QVERIFY2(fits.contains("  logits                   0.00 GiB\n"), qPrintable(fits));
  QVERIFY2(fits.contains("39.15 GiB of 80.00 GiB: fits, 40.85 GiB spare"), qPrintable(fits));
  QVERIFY2(fits.contains("Notes:\n  - bf16:"), qPrintable(fits));
  // 66,441,985,536 B = 61.88 GiB: 21.88 short of 40.
  const QString tight = text("", 40);
  QVERIFY2(tight.contains("61.88 GiB of 40.00 GiB: short by 21.88 GiB"), qPrintable(tight));
  const QString unknown = text("", 0);
  QVERIFY2(unknown.contains("61.88 GiB (GPU capacity unknown)"), qPrintable(unknown));
}

void TestMemoryEstimate::longestFittingCutoff_data() {
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<double>("capacityGib");
  QTest::newRow("zigzag sp8, 80 GiB") << "sequence_parallel_size: 8\n" << 80.0;
  QTest::newRow("one GPU of 8, 80 GiB") << "" << 80.0;
  QTest::newRow("ulysses sp4, 40 GiB") << "sequence_parallel_size: 4\nsequence_parallel_mode: ulysses\n"
                                       << 40.0;
  QTest::newRow("dpo sp8, 80 GiB") << "stage: dpo\nprecompute_ref_logps: true\nsequence_parallel_size: 8\n"
                                   << 80.0;
}

// The longest cutoff_len is the largest multiple of 1024 (here larger than the SP padding) whose
// estimate fits: 1024 more does not. Each long-sequence option makes it longer.
void TestMemoryEstimate::longestFittingCutoff() {
  QFETCH(QString, yaml);
  QFETCH(double, capacityGib);
  const ModelInfo m = shape("qwen2.5-7b");
  const auto opt = options(8, 3, "both", capacityGib);
  const RunConfig cfg = config("bf16: true\n" + yaml);
  const auto longest = longest_fitting_cutoff(cfg, m, opt);
  QVERIFY(longest.has_value());
  QCOMPARE(*longest % 1024, int64_t(0));
  RunConfig at = cfg;
  at.cutoff_len = *longest;
  QVERIFY(estimate_memory(at, m, opt).fits());
  at.cutoff_len = *longest + 1024;
  QVERIFY(!estimate_memory(at, m, opt).fits());
  for (const char* option : {"offload_activations: true\n", "tiled_mlp: true\n"}) {
    const auto more = longest_fitting_cutoff(config("bf16: true\n" + yaml + option), m, opt);
    QVERIFY2(more && *more > *longest, option);
  }
  QVERIFY(!longest_fitting_cutoff(cfg, m, options(8, 3, "both", 0)).has_value());
  // Less than the gathered weights and buffers alone: not even 1024 tokens.
  QVERIFY(!longest_fitting_cutoff(cfg, m, options(8, 3, "both", 4)).has_value());
}

// finetuning_type lora and freeze (docs/ADAPTERS.md): only the trained parameters T have fp32
// gradients, masters and AdamW states, 4 + 4 + 8 = 16 B each under bf16, split as the ZeRO stage
// says; the frozen ones are held in bf16 (2 B), cut into pieces at stage 3. LoRA's reference
// (stages dpo and kto) is the base with the adapters switched off, no copy, unless
// additional_target changes base weights in place: then a bf16 copy of the base (no adapters).
//
// Qwen2.5-7B (h 3584, 28 heads and 4 KV heads of 128: q 3584, kv 512; f 18944; 28 layers;
// P = 7,615,616,512). LoRA r adds r x (in + out) per adapted linear layer: r = 8 on all seven,
// q and o 8 x 7,168 = 57,344, k and v 8 x 4,096 = 32,768, gate, up and down 8 x 22,528 =
// 180,224: 720,896 per layer, 20,185,088 in all (PEFT's print_trainable_parameters says the
// same). Qwen2.5-0.5B (tied; h 896, 14 heads and 2 KV heads of 64, f 4864, 24 layers, P =
// 494,032,768): 8 x (2 x 1,792 + 2 x 1,024 + 3 x 5,760) = 183,296 per layer, 4,399,104 in all.
void TestMemoryEstimate::adapterModelStates_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("zero");
  QTest::addColumn<double>("trained");    // T
  QTest::addColumn<double>("total");      // base + adapters
  QTest::addColumn<double>("reference");  // bytes
  const QString qwen = "qwen2.5-7b";
  const QString lora = "bf16: true\nfinetuning_type: lora\n";
  const double P = 7615616512.0, adapters = 20185088.0;
  QTest::newRow("lora, no ZeRO") << qwen << lora << 8 << -1 << adapters << P + adapters << 0.0;
  QTest::newRow("lora, ZeRO-1") << qwen << lora << 8 << 1 << adapters << P + adapters << 0.0;
  QTest::newRow("lora, ZeRO-2") << qwen << lora << 8 << 2 << adapters << P + adapters << 0.0;
  QTest::newRow("lora, ZeRO-3") << qwen << lora << 8 << 3 << adapters << P + adapters << 0.0;
  // r 16 on q and v: 16 x 7,168 + 16 x 4,096 = 180,224 per layer, 5,046,272 in all.
  QTest::newRow("lora r16 on q_proj, v_proj")
      << qwen << lora + "lora_rank: 16\nlora_target: q_proj,v_proj\n" << 8 << -1 << 5046272.0
      << P + 5046272.0 << 0.0;
  // DoRA adds a magnitude per output row: 3,584 + 512 + 512 + 3,584 + 2 x 18,944 + 3,584 =
  // 49,664 per layer, 1,390,592 in all.
  QTest::newRow("dora, ZeRO-3") << qwen << lora + "use_dora: true\n" << 8 << 3
                                << adapters + 1390592.0 << P + adapters + 1390592.0 << 0.0;
  QTest::newRow("lora on a tied model") << "qwen2.5-0.5b" << lora << 1 << -1 << 4399104.0
                                        << 494032768.0 + 4399104.0 << 0.0;
  QTest::newRow("lora dpo: no reference copy") << qwen << lora + "stage: dpo\n" << 8 << -1
                                                << adapters << P + adapters << 0.0;
  QTest::newRow("lora kto, ZeRO-3: no reference copy") << qwen << lora + "stage: kto\n" << 8 << 3
                                                        << adapters << P + adapters << 0.0;
  // additional_target norm trains the final norm and every layer's two norms whole: 3,584 x
  // (1 + 2 x 28) = 204,288; the reference is a copy of the base: 2P = 15,231,233,024, at ZeRO-3
  // a piece of it, 2P / 8 = 1,903,904,128.
  QTest::newRow("lora dpo + additional_target: a copy of the base")
      << qwen << lora + "stage: dpo\nadditional_target: norm\n" << 8 << -1 << adapters + 204288.0
      << P + adapters << 15231233024.0;
  QTest::newRow("lora dpo + additional_target, ZeRO-3")
      << qwen << lora + "stage: dpo\nadditional_target: norm\n" << 8 << 3 << adapters + 204288.0
      << P + adapters << 1903904128.0;
  // The last two layers, 2 x 233,057,792 (smallestFittingSp_data works a layer out).
  QTest::newRow("freeze 2 layers") << qwen << "bf16: true\nfinetuning_type: freeze\n" << 8 << -1
                                   << 466115584.0 << P << 0.0;
  QTest::newRow("freeze 2 layers, ZeRO-3") << qwen << "bf16: true\nfinetuning_type: freeze\n" << 8
                                           << 3 << 466115584.0 << P << 0.0;
  // Their attention only: q, o 3,584 x 3,584, k, v 3,584 x 512, the q, k, v biases 4,608:
  // 29,364,736 a layer.
  QTest::newRow("freeze 2 layers' self_attn")
      << qwen << "bf16: true\nfinetuning_type: freeze\nfreeze_trainable_modules: self_attn\n" << 8
      << 2 << 58729472.0 << P << 0.0;
  // Full: every parameter, the 16 B/param of the parts rows above.
  QTest::newRow("full") << qwen << "bf16: true\n" << 8 << -1 << P << P << 0.0;
  QTest::newRow("full, ZeRO-3") << qwen << "bf16: true\n" << 8 << 3 << P << P << 0.0;
}

void TestMemoryEstimate::adapterModelStates() {
  QFETCH(QString, model);
  QFETCH(QString, yaml);
  QFETCH(int, nproc);
  QFETCH(int, zero);
  QFETCH(double, trained);
  QFETCH(double, total);
  QFETCH(double, reference);
  const RunConfig cfg = config(yaml);
  const ModelInfo m = shape(model);
  const TrainedCount count = trained_parameter_count(cfg, m);
  QCOMPARE(double(count.trained), trained);
  QCOMPARE(double(count.total), total);
  const MemoryEstimate e = estimate_memory(cfg, m, options(nproc, zero));
  const double n = nproc;
  // fp32 gradients (4 B), masters (4) and AdamW's m and v (8) of the trained parameters only:
  // 16T without ZeRO, 4T + 12T/n at stage 1, 16T/n at stages 2 and 3.
  QCOMPARE(e.bytes.gradients, zero >= 2 ? 4 * trained / n : 4 * trained);
  QCOMPARE(e.bytes.optimizer, zero >= 1 ? 12 * trained / n : 12 * trained);
  QCOMPARE(e.bytes.reference, reference);
  if (zero < 3) {
    QCOMPARE(e.bytes.weights, 2 * total);  // every weight in bf16, the adapters' too
  } else {
    // Between steps a rank holds a bf16 piece of each frozen weight and fp32 pieces of the
    // trained ones; the gathered weights come and go.
    QCOMPARE(e.model_state_bytes, 2 * (total - trained) / n + 16 * trained / n + reference);
  }
}

// finetuning_type freeze trains whole decoder layers: the last n (n > 0) or the first -n.
void TestMemoryEstimate::freezeTrainsWholeLayers_data() {
  QTest::addColumn<int>("layers");  // freeze_trainable_layers
  QTest::addColumn<QList<int>>("trained");
  QTest::newRow("last 2") << 2 << QList<int>{26, 27};
  QTest::newRow("last 1") << 1 << QList<int>{27};
  QTest::newRow("first 3") << -3 << QList<int>{0, 1, 2};
  QTest::newRow("more than the model has: all") << 40 << [] {
    QList<int> all;
    for (int i = 0; i < 28; ++i) all << i;
    return all;
  }();
}

void TestMemoryEstimate::freezeTrainsWholeLayers() {
  QFETCH(int, layers);
  QFETCH(QList<int>, trained);
  const ModelInfo m = shape("qwen2.5-7b");
  const RunConfig cfg = config("finetuning_type: freeze\nfreeze_trainable_layers: " +
                               QString::number(layers) + "\n");
  const std::vector<int64_t> picked = freeze_trained_layers(cfg, m);
  QCOMPARE(QList<int>(picked.begin(), picked.end()), trained);
  int64_t sum = 0;
  for (int layer : trained) sum += m.layer_parameter_count(layer);
  QCOMPARE(trained_parameter_count(cfg, m).trained, sum);
  QCOMPARE(trained_parameter_count(cfg, m).total, m.parameter_count());
  QCOMPARE(largest_trained_layer(cfg, m), m.layer_parameter_count(trained.front()));
}

QTEST_MAIN(TestMemoryEstimate)
#include "tst_memory_estimate.moc"
