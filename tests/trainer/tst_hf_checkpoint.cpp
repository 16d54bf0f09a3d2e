// Hugging Face model folders on disk: sharded and single-file saves read back bit-exactly (also by
// an independent Python reader), the index transformers writes, copied config and tokenizer
// files, broken folders refused with the files named, check_shapes, and saves that fail midway
// leaving nothing half-written; a reward model's value head saved apart (value_head.safetensors,
// LLaMA-Factory's layout) and read back, or initialised, by model_weights.
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/tensors/safetensors.h"

#include <torch/torch.h>

#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

using namespace studio::trainer;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

QStringList entries(const fs::path& dir) {
  QStringList out;
  for (const auto& e : fs::directory_iterator(dir))
    out << QString::fromStdString(e.path().filename().string());
  out.sort();
  return out;
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.scalar_type() == cb.scalar_type() && ca.sizes() == cb.sizes() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

// A two-layer LLaMA-shaped model in f32, in state_dict order. In bf16 the tensors take 512, 128,
// 256, 16, 128, 256, 16 and 512 bytes: 600-byte shards give four files.
NamedTensors model(int seed = 1) {
  torch::manual_seed(seed);
  NamedTensors t;
  t.emplace_back("model.embed_tokens.weight", torch::randn({32, 8}));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.emplace_back(p + "self_attn.q_proj.weight", torch::randn({8, 8}));
    t.emplace_back(p + "mlp.up_proj.weight", torch::randn({16, 8}));
    if (l == 0) t.emplace_back(p + "input_layernorm.weight", torch::randn({8}));
  }
  t.emplace_back("model.norm.weight", torch::randn({8}));
  t.emplace_back("lm_head.weight", torch::randn({32, 8}));
  return t;
}

std::uint64_t bytes_of(const NamedTensors& ts, torch::ScalarType dtype) {
  std::uint64_t n = 0;
  for (const auto& [name, t] : ts) n += t.numel() * c10::elementSize(dtype);
  return n;
}

const json kConfig = {{"architectures", {"LlamaForCausalLM"}},
                      {"hidden_size", 8},
                      {"rms_norm_eps", 1e-06},
                      {"torch_dtype", "float32"},
                      {"vocab_size", 32}};
const char* const kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                       "special_tokens_map.json", "chat_template.jinja",
                                       "merges.txt"};

double weighted_sum(const torch::Tensor& t) {
  const torch::Tensor flat = t.reshape({-1}).to(torch::kDouble);
  return (flat * torch::arange(flat.numel(), torch::kDouble)).sum().item<double>();
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b));
}

}  // namespace

class TestHfCheckpoint : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void shardedSaveReadsBack();
  void singleFileSaveUsesSourceDtype();
  void copiesConfigAndTokenizer();
  void readerErrors_data();
  void readerErrors();
  void checkShapesListsEveryProblem();
  void checkShapesTruncatesLongLists();
  void interruptedSave_data();
  void interruptedSave();
  void resaveInPlaceRemovesStaleWeights();
  void pythonReaderAgrees();
  void valueHeadSavedApart();
  void modelWeightsValueHead_data();
  void modelWeightsValueHead();

 private:
  fs::path fresh(const std::string& name) const;
  HfSaveResult save_sharded(const fs::path& out, const NamedTensors& t);

  QTemporaryDir tmp_;
  fs::path root_, source_;
};

void TestHfCheckpoint::initTestCase() {
  QVERIFY(tmp_.isValid());
  root_ = tmp_.path().toStdString();
  source_ = root_ / "source-model";
  fs::create_directories(source_);
  write_text(source_ / "config.json", kConfig.dump(2));
  for (const char* f : kTokenizerFiles)
    write_text(source_ / f, std::string("contents of ") + f + "\n");
  write_text(source_ / "README.md", "not part of a saved model\n");
}

// A new empty parent folder per test, so that leftovers of one test cannot hide in another's.
fs::path TestHfCheckpoint::fresh(const std::string& name) const {
  const fs::path parent = root_ / (name + "-parent");
  fs::remove_all(parent);
  fs::create_directories(parent);
  return parent / "out";
}

HfSaveResult TestHfCheckpoint::save_sharded(const fs::path& out, const NamedTensors& t) {
  HfSaveOptions o;
  o.dtype = torch::kBFloat16;
  o.max_shard_bytes = 600;
  o.source_dir = source_.string();
  return save_hf_model(out.string(), t, o);
}

void TestHfCheckpoint::shardedSaveReadsBack() {
  const fs::path out = fresh("sharded");
  const NamedTensors t = model();
  const HfSaveResult r = save_sharded(out, t);

  const std::vector<std::string> shards = {
      "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
      "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"};
  QCOMPARE(r.weight_files, shards);
  QCOMPARE(r.total_size, bytes_of(t, torch::kBFloat16));
  QCOMPARE(entries(out.parent_path()), QStringList{"out"});  // no staging folder left

  // The index as transformers writes it: sorted keys, 2-space indent, trailing newline.
  const std::string index_text = read_text(out / "model.safetensors.index.json");
  const json index = json::parse(index_text);
  QCOMPARE(index_text, index.dump(2) + "\n");
  QCOMPARE(index["metadata"], json({{"total_size", r.total_size}}));
  QCOMPARE(index["weight_map"].size(), t.size());

  // Shards hold the tensors in state_dict order, each within the limit.
  std::size_t next = 0;
  for (const auto& shard : shards) {
    const SafetensorsFile f = SafetensorsFile::open((out / shard).string());
    std::uint64_t bytes = 0;
    for (const auto& name : f.names()) {
      QCOMPARE(index["weight_map"][name].get<std::string>(), shard);
      bytes += f.info(name).size;
    }
    QVERIFY(bytes <= 600);
    for (std::size_t k = 0; k < f.names().size(); ++k, ++next) QVERIFY(f.has(t[next].first));
  }
  QCOMPARE(next, t.size());

  const CheckpointReader reader = CheckpointReader::open(out.string());
  QCOMPARE(reader.names().size(), t.size());
  for (const auto& [name, want] : t)
    QVERIFY2(same_bytes(reader.tensor(name), want.to(torch::kBFloat16)), name.c_str());
}

void TestHfCheckpoint::singleFileSaveUsesSourceDtype() {
  const fs::path out = fresh("single");
  fs::create_directories(out);  // an empty output folder made beforehand is filled in place
  const NamedTensors t = model();
  HfSaveOptions o;
  o.source_dir = source_.string();  // its config says float32
  const HfSaveResult r = save_hf_model(out.string(), t, o);
  QCOMPARE(r.dtype, torch::kFloat);
  QCOMPARE(r.weight_files, std::vector<std::string>{"model.safetensors"});
  QVERIFY(!fs::exists(out / "model.safetensors.index.json"));
  const CheckpointReader reader = CheckpointReader::open(out.string());
  for (const auto& [name, want] : t) QVERIFY2(same_bytes(reader.tensor(name), want), name.c_str());
  QCOMPARE(reader.file_of("lm_head.weight"), (out / "model.safetensors").string());
  QCOMPARE(entries(out),
           (QStringList{"chat_template.jinja", "config.json", "merges.txt", "model.safetensors",
                        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"}));
}

void TestHfCheckpoint::copiesConfigAndTokenizer() {
  const fs::path out = fresh("copies");
  save_sharded(out, model());
  json want = kConfig;
  want["torch_dtype"] = "bfloat16";
  const std::string config_text = read_text(out / "config.json");
  QCOMPARE(config_text, want.dump(2) + "\n");
  for (const char* f : kTokenizerFiles) QCOMPARE(read_text(out / f), read_text(source_ / f));
  QVERIFY(!fs::exists(out / "README.md"));
  QVERIFY(!fs::exists(out / "tokenizer.model"));  // absent in the source: not invented
}

void TestHfCheckpoint::readerErrors_data() {
  QTest::addColumn<int>("damage");
  QTest::addColumn<QStringList>("fragments");
  const QString index = "model.safetensors.index.json";
  QTest::newRow("missing shard") << 0
                                 << QStringList{
                                        index, "'model-00002-of-00004.safetensors' does not exist"};
  QTest::newRow("tensor missing from its shard")
      << 1
      << QStringList{index, "'model.ghost.weight'",
                     "'model-00001-of-00004.safetensors', which does not hold it"};
  QTest::newRow("tensor mapped to another shard")
      << 2
      << QStringList{index,
                     "'model.layers.0.self_attn.q_proj.weight' is in "
                     "'model-00002-of-00004.safetensors'",
                     "maps it to 'model-00001-of-00004.safetensors'"};
  QTest::newRow("tensor not in the index")
      << 3 << QStringList{index, "'model.norm.weight'", "not in the weight_map"};
  QTest::newRow("no weights at all") << 4 << QStringList{"neither model.safetensors nor"};
  QTest::newRow("index not JSON") << 5 << QStringList{index, "malformed JSON"};
  QTest::newRow("shard outside the folder") << 6 << QStringList{index, "../evil.safetensors"};
  QTest::newRow("truncated shard")
      << 7 << QStringList{"model-00003-of-00004.safetensors", "end past the data section"};
}

void TestHfCheckpoint::readerErrors() {
  QFETCH(int, damage);
  QFETCH(QStringList, fragments);
  const fs::path out = fresh("broken");
  save_sharded(out, model());
  const fs::path index_path = out / "model.safetensors.index.json";
  json index = json::parse(read_text(index_path));
  auto& wm = index["weight_map"];
  switch (damage) {
    case 0:
      fs::remove(out / "model-00002-of-00004.safetensors");
      break;
    case 1:
      wm["model.ghost.weight"] = "model-00001-of-00004.safetensors";
      break;
    case 2:
      wm["model.layers.0.self_attn.q_proj.weight"] = "model-00001-of-00004.safetensors";
      break;
    case 3:
      wm.erase("model.norm.weight");
      break;
    case 4:
      for (const auto& e : fs::directory_iterator(out))
        if (e.path().string().find("safetensors") != std::string::npos) fs::remove(e.path());
      break;
    case 5:
      write_text(index_path, "{\"weight_map\": {");
      break;
    case 6:
      wm["model.norm.weight"] = "../evil.safetensors";
      break;
    case 7: {
      const fs::path shard = out / "model-00003-of-00004.safetensors";
      fs::resize_file(shard, fs::file_size(shard) - 4);
      break;
    }
  }
  if (damage != 4 && damage != 5 && damage != 0 && damage != 7)
    write_text(index_path, index.dump(2));
  try {
    CheckpointReader::open(out.string());
    QFAIL("accepted");
  } catch (const CheckpointError& e) {
    for (const QString& f : fragments) QVERIFY2(QString(e.what()).contains(f), e.what());
  }
}

void TestHfCheckpoint::checkShapesListsEveryProblem() {
  const fs::path out = fresh("shapes");
  const NamedTensors t = model();
  save_sharded(out, t);
  const CheckpointReader reader = CheckpointReader::open(out.string());
  std::map<std::string, std::vector<std::int64_t>> expected;
  for (const auto& [name, tensor] : t) expected[name] = tensor.sizes().vec();
  reader.check_shapes(expected);  // the right shapes pass

  expected.erase("model.norm.weight");
  expected["model.layers.2.mlp.up_proj.weight"] = {16, 8};
  expected["lm_head.weight"] = {33, 8};
  try {
    reader.check_shapes(expected);
    QFAIL("accepted");
  } catch (const CheckpointError& e) {
    const QString m = e.what();
    for (const char* f :
         {"1 mismatched, 1 missing, 1 unexpected", "shapes against the config",
          "tensor 'lm_head.weight' has shape [32, 8], the config implies [33, 8]",
          "missing tensor 'model.layers.2.mlp.up_proj.weight' (expected shape [16, 8])",
          "unexpected tensor 'model.norm.weight' [8]"})
      QVERIFY2(m.contains(f), e.what());
  }
}

void TestHfCheckpoint::checkShapesTruncatesLongLists() {
  const fs::path out = fresh("shapes-long");
  save_sharded(out, model());
  std::map<std::string, std::vector<std::int64_t>> expected;
  for (int i = 0; i < 30; ++i) expected["extra." + std::to_string(i)] = {1};
  try {
    CheckpointReader::open(out.string()).check_shapes(expected);
    QFAIL("accepted");
  } catch (const CheckpointError& e) {
    const QString m = e.what();
    QCOMPARE(m.count("\n  "), 21);                      // 20 problems and the "... and N more" line
    QVERIFY2(m.contains("... and 18 more"), e.what());  // 30 missing + 8 unexpected
  }
}

void TestHfCheckpoint::interruptedSave_data() {
  QTest::addColumn<int>("scenario");
  QTest::newRow("tensor fails in the last shard") << 0;
  QTest::newRow("parent is a file") << 1;
  QTest::newRow("tensor fails over an earlier save") << 2;
}

// A meta tensor has a shape but no data: it fails when its bytes are written, after the first
// shards are already on disk.
void TestHfCheckpoint::interruptedSave() {
  QFETCH(int, scenario);
  fs::path out = fresh("interrupted");
  const NamedTensors old = model(2);
  if (scenario == 2) save_sharded(out, old);
  const QStringList before = fs::exists(out) ? entries(out) : QStringList{};
  if (scenario == 1) {
    write_text(out.parent_path() / "file", "x");
    out = out.parent_path() / "file" / "model";
  }
  NamedTensors t = model();
  t.emplace_back("z.unreadable", torch::empty({64}, torch::TensorOptions().device(torch::kMeta)));
  try {
    save_sharded(out, t);
    QFAIL("no error");
  } catch (const CheckpointError& e) {
    if (scenario != 1) QVERIFY2(QString(e.what()).contains("'z.unreadable'"), e.what());
  }
  if (scenario == 0) {
    QVERIFY(!fs::exists(out));
    QCOMPARE(entries(out.parent_path()), QStringList{});
  }
  if (scenario == 1) QVERIFY(fs::is_regular_file(out.parent_path()));
  if (scenario == 2) {
    QCOMPARE(entries(out.parent_path()), QStringList{"out"});
    QCOMPARE(entries(out), before);
    const CheckpointReader reader = CheckpointReader::open(out.string());
    for (const auto& [name, want] : old)
      QVERIFY2(same_bytes(reader.tensor(name), want.to(torch::kBFloat16)), name.c_str());
  }
}

void TestHfCheckpoint::resaveInPlaceRemovesStaleWeights() {
  const fs::path out = fresh("resave");
  save_sharded(out, model(1));
  write_text(out / "notes.txt", "kept\n");

  // Two larger shards replace four: the 4-shard files go.
  HfSaveOptions o;
  o.dtype = torch::kBFloat16;
  o.max_shard_bytes = 1100;
  save_hf_model(out.string(), model(2), o);
  QCOMPARE(entries(out),
           (QStringList{"chat_template.jinja", "config.json", "merges.txt",
                        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "notes.txt", "special_tokens_map.json",
                        "tokenizer.json", "tokenizer_config.json"}));

  // A single file replaces the shards and the index.
  o.max_shard_bytes = 1u << 20;
  const NamedTensors t = model(3);
  save_hf_model(out.string(), t, o);
  QVERIFY(fs::exists(out / "model.safetensors"));
  QVERIFY(!fs::exists(out / "model.safetensors.index.json"));
  QVERIFY(!fs::exists(out / "model-00001-of-00002.safetensors"));
  QCOMPARE(read_text(out / "notes.txt"), std::string("kept\n"));
  const CheckpointReader reader = CheckpointReader::open(out.string());
  for (const auto& [name, want] : t)
    QVERIFY2(same_bytes(reader.tensor(name), want.to(torch::kBFloat16)), name.c_str());
  QCOMPARE(entries(out.parent_path()), QStringList{"out"});
}

// What Hugging Face's safetensors library (the Rust reader transformers uses) sees in our files
// must be what the C++ reader sees. Fails, never skips, when the reference is missing.
void TestHfCheckpoint::pythonReaderAgrees() {
  const QString python = QStringLiteral(STUDIO_PYTHON);
  QProcess probe;
  probe.start(python, {"-c", "import torch, safetensors"});
  QVERIFY2(probe.waitForFinished(120000) && probe.exitCode() == 0,
           qPrintable(python + " cannot import torch and safetensors: run scripts/setup.sh " +
                      QString::fromUtf8(probe.readAllStandardError())));

  const fs::path sharded = fresh("python-sharded"), single = fresh("python-single");
  NamedTensors t = model();
  save_sharded(sharded, t);
  t.emplace_back("rope.inv_freq", torch::rand({4}, torch::kDouble));
  t.emplace_back("position_ids", torch::arange(7, torch::kLong).reshape({1, 7}));
  t.emplace_back("empty", torch::empty({0, 3}));
  t.emplace_back("scalar", torch::tensor(3.5f).reshape({}));
  save_hf_model(single.string(), t, HfSaveOptions{torch::kHalf, 1u << 20, ""});

  for (const fs::path& dir : {sharded, single}) {
    QProcess p;
    p.start(python, {STUDIO_SOURCE_DIR "/tests/trainer/read_safetensors.py",
                     QString::fromStdString(dir.string())});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
             p.readAllStandardError().constData());
    const json got = json::parse(p.readAllStandardOutput().toStdString());
    const CheckpointReader reader = CheckpointReader::open(dir.string());
    QCOMPARE(got["tensors"].size(), reader.names().size());
    for (const json& py : got["tensors"]) {
      const std::string name = py["name"];
      const TensorInfo& info = reader.info(name);
      const torch::Tensor c = reader.tensor(name);
      QCOMPARE(py["dtype"].get<std::string>(), safetensors_dtype_name(info.dtype));
      QCOMPARE(py["shape"].get<std::vector<std::int64_t>>(), info.shape);
      QCOMPARE(py["file"].get<std::string>(), fs::path(reader.file_of(name)).filename().string());
      const double sum = c.to(torch::kDouble).sum().item<double>();
      QVERIFY2(close(py["sum"].get<double>(), sum), name.c_str());
      QVERIFY2(close(py["wsum"].get<double>(), weighted_sum(c)), name.c_str());
    }
  }
}

// A value head's tensors go to value_head.safetensors in fp32 whatever the save dtype, after the
// model's own shards (hf_save_order, which a streamed save fetches in); a save without a head
// removes an earlier save's head file.
void TestHfCheckpoint::valueHeadSavedApart() {
  const fs::path out = fresh("value-head");
  NamedTensors t = model(4);
  torch::manual_seed(5);
  t.emplace_back("v_head.summary.weight", torch::randn({1, 8}));
  t.emplace_back("v_head.summary.bias", torch::randn({1}));
  HfSaveOptions o;
  o.dtype = torch::kBFloat16;
  o.max_shard_bytes = 600;
  o.source_dir = source_.string();
  const auto order = hf_save_order(t, o);
  QCOMPARE(order.size(), t.size());
  QCOMPARE(order[order.size() - 2], t.size() - 2);  // the head last
  QCOMPARE(order.back(), t.size() - 1);
  std::vector<std::size_t> fetched;
  o.fetch = [&](std::size_t i) {
    fetched.push_back(i);
    return t[i].second;
  };
  NamedTensors metas;
  for (const auto& [name, v] : t)
    metas.emplace_back(name, torch::empty(v.sizes(), torch::TensorOptions().device(torch::kMeta)));
  const HfSaveResult r = save_hf_model(out.string(), metas, o);
  QVERIFY(r.value_head);
  QCOMPARE(fetched, order);
  const CheckpointReader reader = CheckpointReader::open(out.string());
  for (const auto& name : reader.names()) QVERIFY2(!is_value_head_tensor(name), name.c_str());
  QCOMPARE(reader.names().size(), t.size() - 2);
  const SafetensorsFile head = SafetensorsFile::open((out / kValueHeadFile).string());
  QCOMPARE(head.names().size(), std::size_t{2});
  for (std::size_t i = t.size() - 2; i < t.size(); ++i) {
    QCOMPARE(head.info(t[i].first).dtype, torch::kFloat);
    QVERIFY(same_bytes(head.tensor(t[i].first), t[i].second));
  }
  // Saved again without a head: its file goes.
  save_hf_model(out.string(), model(6), HfSaveOptions{});
  QVERIFY(!fs::exists(out / kValueHeadFile));
}

void TestHfCheckpoint::modelWeightsValueHead_data() {
  QTest::addColumn<QString>("head");  // what the folder holds: "", "file", "bin", "wrong shape"
  QTest::addColumn<bool>("value_head");
  QTest::addColumn<QString>("error");  // "": none
  QTest::newRow("no file: initialised") << "" << true << "";
  QTest::newRow("read from the file") << "file" << true << "";
  QTest::newRow("a model without a head ignores the file") << "file" << false << "";
  QTest::newRow("value_head.bin alone") << "bin" << true << "value_head.bin";
  QTest::newRow("wrong shape") << "wrong shape" << true << "has shape";
  QTest::newRow("a tensor missing") << "missing" << true << "no tensor 'v_head.summary.bias'";
}

// model_weights: the model's own tensors from the folder, the head from value_head.safetensors
// or, without one, TRL's initialisation (U(-1/sqrt(h), 1/sqrt(h)), the same for a seed).
void TestHfCheckpoint::modelWeightsValueHead() {
  QFETCH(QString, head);
  QFETCH(bool, value_head);
  QFETCH(QString, error);
  const fs::path dir = fresh("weights-" + std::to_string(QTest::currentDataTag()[0]) +
                             std::to_string(std::strlen(QTest::currentDataTag())));
  fs::create_directories(dir);
  const json config = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"},
                       {"hidden_act", "silu"}, {"hidden_size", 16}, {"intermediate_size", 32},
                       {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                       {"num_key_value_heads", 1}, {"vocab_size", 64},
                       {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6},
                       {"rope_theta", 10000.0}, {"tie_word_embeddings", true},
                       {"torch_dtype", "float32"}};
  write_text(dir / "config.json", config.dump(2));
  init_model_folder((dir / "config.json").string(), dir.string(), 7);
  const torch::Tensor w = torch::full({1, 16}, 0.25), b = torch::full({1}, -0.5);
  if (head == "file" || head == "missing" || head == "wrong shape") {
    NamedTensors t{{"v_head.summary.weight", head == "wrong shape" ? torch::zeros({1, 8}) : w}};
    if (head != "missing") t.emplace_back("v_head.summary.bias", b);
    write_safetensors((dir / kValueHeadFile).string(), t, {{"format", "pt"}}, torch::kFloat);
  }
  if (head == "bin") write_text(dir / "value_head.bin", "pickle");
  std::string error_text;
  const auto info = studio::read_model_info(dir.string(), error_text);
  QVERIFY2(info, error_text.c_str());
  ModelOptions opt;
  opt.value_head = value_head;
  CausalLM m(*info, opt);
  std::string note;
  try {
    load_weights(m, dir.string(), 42, &note);
    QVERIFY2(error.isEmpty(), "no error");
  } catch (const CheckpointError& e) {
    QVERIFY2(!error.isEmpty() && QString(e.what()).contains(error), e.what());
    return;
  }
  if (!value_head) {
    QVERIFY(note.empty());
    for (const auto& [name, p] : m->hf_state()) QVERIFY(!is_value_head_tensor(name));
    return;
  }
  if (head == "file") {
    QVERIFY(torch::equal(m->v_head->summary->weight, w));
    QVERIFY(torch::equal(m->v_head->summary->bias, b));
    QVERIFY2(QString::fromStdString(note).contains("read from"), note.c_str());
    return;
  }
  QVERIFY2(QString::fromStdString(note).contains("initialised (seed 42"), note.c_str());
  const double bound = 1.0 / std::sqrt(16.0);
  QVERIFY(m->v_head->summary->weight.abs().max().item<double>() <= bound);
  QVERIFY(m->v_head->summary->weight.std().item<double>() > bound / 4);  // not all zeros
  CausalLM again(*info, opt), other(*info, opt);
  load_weights(again, dir.string(), 42);
  load_weights(other, dir.string(), 43);
  QVERIFY(torch::equal(again->v_head->summary->weight, m->v_head->summary->weight));
  QVERIFY(!torch::equal(other->v_head->summary->weight, m->v_head->summary->weight));
}

QTEST_MAIN(TestHfCheckpoint)
#include "tst_hf_checkpoint.moc"
