// The safetensors reader and writer on real files: bit-exact round trips, the layout the Python
// library produces, zero-copy reads, and malformed files (made by corrupting a valid one) that
// must each give a CheckpointError naming the file and the tensor, never a crash.
#include "studio/trainer/tensors/safetensors.h"

#include <torch/torch.h>

#include <QtTest>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

using namespace studio::trainer;
using json = nlohmann::json;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.scalar_type() == cb.scalar_type() && ca.sizes() == cb.sizes() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

// Values that only a bit-exact path keeps: NaN, infinities, -0, subnormals.
torch::Tensor sample(torch::ScalarType dtype, const std::vector<std::int64_t>& shape) {
  if (!at::isFloatingType(dtype)) return torch::randint(-1000000, 1000000, shape, dtype);
  torch::Tensor t = torch::randn(shape, torch::kDouble).to(dtype);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(), -0.0, 1e-40, -1e-310};
  auto flat = t.view({-1});
  for (std::int64_t i = 0; i < std::min<std::int64_t>(flat.numel(), 5); ++i) flat[i] = specials[i];
  return t;
}

// A file as bytes: its header JSON and the data section, to corrupt one of them.
struct Parts {
  json header;
  std::string data;
};

Parts split(const std::string& bytes) {
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

std::string join(const std::string& header_text, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header_text.size();
  std::memcpy(out.data(), &n, 8);
  return out + header_text + data;
}

std::string join(const Parts& p) {
  return join(p.header.dump(), p.data);
}

void set_header_length(std::string& bytes, std::uint64_t n) {
  std::memcpy(bytes.data(), &n, 8);
}

// Opens the file and reads every tensor: only a CheckpointError may come out of it. What open()
// accepts must lie inside the file and not overlap (reading a few bytes past the mapping need not
// crash, so this is checked rather than left to luck).
void open_and_read_all(const std::string& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& name : f.names()) {
    const TensorInfo& info = f.info(name);
    if (info.offset > f.mapping_size() || info.size > f.mapping_size() - info.offset)
      throw std::logic_error("accepted tensor '" + name + "' reaching past the end of the file");
    if (info.size > 0) ranges.emplace_back(info.offset, info.offset + info.size);
    (void)f.tensor(name).to(torch::kDouble).sum().item<double>();
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw std::logic_error("accepted overlapping tensors");
}

struct Corruption {
  const char* row;
  const char* tensor;    // the tensor the message must name, or "" for file-level problems
  const char* fragment;  // what else the message must say
  std::function<std::string(std::string)> apply;
};

// The valid file: two f32 [2, 3] tensors (a first, b second in the data) and a bf16 one.
const char* const kA = "model.layers.3.mlp.up_proj.weight";
const char* const kB = "model.layers.3.mlp.down_proj.weight";
const char* const kC = "model.embed_tokens.weight";

std::string edit(const std::string& bytes, const std::function<void(Parts&)>& f) {
  Parts p = split(bytes);
  f(p);
  return join(p);
}

const std::vector<Corruption>& corruptions() {
  static const std::vector<Corruption> table = {
      {"too short", "", "too short", [](std::string b) { return b.substr(0, 5); }},
      {"truncated in the header", "", "past the end",
       [](std::string b) { return b.substr(0, 8 + split(b).header.dump().size() / 2); }},
      {"truncated in the data", kC, "end past the data section",
       [](std::string b) { return b.substr(0, b.size() - 3); }},
      {"header length past the end", "", "past the end",
       [](std::string b) {
         set_header_length(b, b.size());
         return b;
       }},
      {"header length huge", "", "100 MiB",
       [](std::string b) {
         set_header_length(b, 1ull << 62);
         return b;
       }},
      {"header not JSON", "", "not valid JSON",
       [](std::string b) { return join("{\"a\": [1, 2", split(b).data); }},
      // nlohmann throws out_of_range, not parse_error, for a number no double holds (found by
      // fuzz_safetensors_header): it must still be a CheckpointError, not a crash.
      {"number too large for a double", "", "number overflow",
       [](std::string b) {
         return join(std::string("{\"") + kA + "\": {\"dtype\": \"F32\", \"shape\": [2E3555555555],"
                         " \"data_offsets\": [0, 24]}}",
                     split(b).data);
       }},
      {"header a JSON array", "", "not an object",
       [](std::string b) { return join("[1, 2, 3]", split(b).data); }},
      {"entry not an object", kA, "not an object",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kA] = 7; }); }},
      {"overlapping offsets", kA, kB,
       [](std::string b) {
         return edit(b,
                     [](Parts& p) { p.header[kA]["data_offsets"] = p.header[kB]["data_offsets"]; });
       }},
      {"offsets past the end", kC, "end past the data section",
       [](std::string b) {
         return edit(b, [](Parts& p) {
           const std::uint64_t n = p.data.size();
           p.header[kC]["data_offsets"] = {n - 6, n + 4};
         });
       }},
      {"end before begin", kA, "end before begin",
       [](std::string b) {
         return edit(b, [](Parts& p) { p.header[kA]["data_offsets"] = {24, 0}; });
       }},
      {"size not shape x itemsize", kB, "needs 32",
       [](std::string b) { return edit(b, [](Parts& p) {
                             p.header[kB]["shape"] = {2, 4};
                           }); }},
      {"unknown dtype", kA, "F8_E4M3",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kA]["dtype"] = "F8_E4M3"; }); }},
      {"BOOL dtype", kA, "BOOL",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kA]["dtype"] = "BOOL"; }); }},
      {"dtype not a string", kC, "not supported",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kC]["dtype"] = 16; }); }},
      {"negative shape", kB, "negative",
       [](std::string b) { return edit(b, [](Parts& p) {
                             p.header[kB]["shape"] = {-2, -3};
                           }); }},
      {"fractional shape", kB, "non-integer",
       [](std::string b) { return edit(b, [](Parts& p) {
                             p.header[kB]["shape"] = {2.5, 3};
                           }); }},
      {"shape overflows", kB, "too large",
       [](std::string b) {
         return edit(b, [](Parts& p) {
           p.header[kB]["shape"] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
         });
       }},
      // Rendering such a value recursively for the message would overflow the stack.
      {"shape nested a million deep", kB, "nested JSON array",
       [](std::string b) {
         const std::string nested = std::string(1000000, '[') + std::string(1000000, ']');
         return join(std::string("{\"") + kB + "\": {\"dtype\": \"F32\", \"shape\": " + nested +
                         ", \"data_offsets\": [0, 24]}}",
                     split(b).data);
       }},
      {"missing data_offsets", kA, "data_offsets",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kA].erase("data_offsets"); }); }},
      {"missing shape", kC, "'shape'",
       [](std::string b) { return edit(b, [](Parts& p) { p.header[kC].erase("shape"); }); }},
      {"data_offsets of three", kA, "[begin, end]",
       [](std::string b) {
         return edit(b, [](Parts& p) { p.header[kA]["data_offsets"] = {0, 12, 24}; });
       }},
      {"metadata not strings", "", "__metadata__",
       [](std::string b) {
         return edit(b, [](Parts& p) { p.header["__metadata__"]["step"] = 3; });
       }},
  };
  return table;
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void roundTrip_data();
  void roundTrip();
  void convertsFloatsToRequestedDtype();
  void layoutIsThePythonLibrarys();
  void metadataRoundTrip();
  void unalignedDataIsCopied();
  void tensorOutlivesFile();
  void unknownTensorNamesFileAndTensor();
  void writerRefuses_data();
  void writerRefuses();
  void failedWriteLeavesTargetAlone();
  void malformed_data();
  void malformed();
  void fuzz_data();
  void fuzz();

 private:
  std::string path(const std::string& name) const {
    return (dir_.path() + "/").toStdString() + name;
  }
  std::string valid_file();
  void fuzz_file(const std::string& bytes, int iterations, unsigned seed, int mode);

  QTemporaryDir dir_;
};

void TestSafetensors::initTestCase() {
  QVERIFY(dir_.isValid());
  torch::manual_seed(7);
}

std::string TestSafetensors::valid_file() {
  const std::string p = path("valid.safetensors");
  write_safetensors(p, {{kA, sample(torch::kFloat, {2, 3})},
                        {kB, sample(torch::kFloat, {2, 3})},
                        {kC, sample(torch::kBFloat16, {5, 3})}});
  return read_bytes(p);
}

void TestSafetensors::roundTrip_data() {
  QTest::addColumn<int>("dtype");
  QTest::addColumn<QList<qint64>>("shape");
  QTest::newRow("bf16 odd") << int(torch::kBFloat16) << QList<qint64>{3, 5, 7};
  QTest::newRow("f16 odd") << int(torch::kHalf) << QList<qint64>{1, 13};
  QTest::newRow("f32 odd") << int(torch::kFloat) << QList<qint64>{11};
  QTest::newRow("bf16 scalar") << int(torch::kBFloat16) << QList<qint64>{};
  QTest::newRow("f32 scalar") << int(torch::kFloat) << QList<qint64>{};
  QTest::newRow("f16 zero-size") << int(torch::kHalf) << QList<qint64>{0, 4};
  QTest::newRow("f32 zero-size") << int(torch::kFloat) << QList<qint64>{3, 0};
  QTest::newRow("f64") << int(torch::kDouble) << QList<qint64>{2, 3};
  QTest::newRow("i64") << int(torch::kLong) << QList<qint64>{5};
  QTest::newRow("i32") << int(torch::kInt) << QList<qint64>{3, 3};
}

void TestSafetensors::roundTrip() {
  QFETCH(int, dtype);
  QFETCH(QList<qint64>, shape);
  const auto type = static_cast<torch::ScalarType>(dtype);
  const torch::Tensor t = sample(type, std::vector<std::int64_t>(shape.begin(), shape.end()));
  // Neighbours of other sizes, so that alignment is exercised: a 1-byte-odd f16 tensor first.
  const torch::Tensor odd = sample(torch::kHalf, {3});
  const torch::Tensor wide = sample(torch::kDouble, {1});
  const std::string p = path("round.safetensors");
  write_safetensors(p, {{"odd", odd}, {"t", t}, {"wide", wide}});

  const SafetensorsFile f = SafetensorsFile::open(p);
  QCOMPARE(f.names(), (std::vector<std::string>{"odd", "t", "wide"}));
  QCOMPARE(f.info("t").dtype, type);
  QCOMPARE(f.info("t").shape, t.sizes().vec());
  QCOMPARE(f.info("t").size, std::uint64_t(t.numel() * t.element_size()));
  const std::vector<std::pair<const char*, torch::Tensor>> all = {
      {"odd", odd}, {"t", t}, {"wide", wide}};
  for (const auto& [name, want] : all) {
    const torch::Tensor got = f.tensor(name);
    QVERIFY2(same_bytes(got, want), name);
    if (got.numel() == 0) continue;
    // Aligned data is a view of the mapping, not a copy.
    const auto* ptr = static_cast<const std::uint8_t*>(got.data_ptr());
    QVERIFY(ptr >= f.mapping_data() && ptr < f.mapping_data() + f.mapping_size());
    QCOMPARE(ptr, f.mapping_data() + f.info(name).offset);
  }
}

void TestSafetensors::convertsFloatsToRequestedDtype() {
  const torch::Tensor w = torch::randn({4, 6});
  const torch::Tensor ids = torch::arange(10, torch::kLong);
  const std::string p = path("convert.safetensors");
  write_safetensors(p, {{"w", w.t()}, {"ids", ids}}, {}, torch::kBFloat16);  // non-contiguous w
  const SafetensorsFile f = SafetensorsFile::open(p);
  QVERIFY(same_bytes(f.tensor("w"), w.t().to(torch::kBFloat16)));
  QVERIFY(same_bytes(f.tensor("ids"), ids));  // integer tensors keep their type
}

// What the Python library writes: u64 LE length, space-padded to 8, __metadata__ {"format": "pt"},
// tensors ordered by dtype size (largest first) then name, data contiguous from 0 to the end.
void TestSafetensors::layoutIsThePythonLibrarys() {
  const std::string p = path("layout.safetensors");
  write_safetensors(p, {{"b16", torch::ones({3}, torch::kBFloat16)},
                        {"z32", torch::ones({1}, torch::kFloat)},
                        {"a32", torch::ones({2}, torch::kFloat)},
                        {"h", torch::ones({5}, torch::kHalf)},
                        {"d", torch::ones({1}, torch::kDouble)}});
  const std::string bytes = read_bytes(p);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  QCOMPARE(n % 8, std::uint64_t(0));
  const std::string header = bytes.substr(8, n);
  QCOMPARE(header.front(), '{');
  QVERIFY(header.find_last_not_of(' ') == header.rfind('}'));
  const auto j = nlohmann::ordered_json::parse(header);
  QCOMPARE(j["__metadata__"], nlohmann::ordered_json({{"format", "pt"}}));
  std::vector<std::string> order;
  std::uint64_t position = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    order.push_back(it.key());
    QCOMPARE(it.value()["data_offsets"][0].get<std::uint64_t>(), position);
    position = it.value()["data_offsets"][1].get<std::uint64_t>();
  }
  QCOMPARE(order, (std::vector<std::string>{"d", "a32", "z32", "b16", "h"}));
  QCOMPARE(position, bytes.size() - 8 - n);
}

void TestSafetensors::metadataRoundTrip() {
  const std::string p = path("meta.safetensors");
  write_safetensors(p, {{"x", torch::zeros({2})}}, {{"step", "100"}, {"note", "héllo"}});
  const auto m = SafetensorsFile::open(p).metadata();
  QCOMPARE(m, (std::map<std::string, std::string>{
                  {"format", "pt"}, {"step", "100"}, {"note", "héllo"}}));
}

// A hand-made file with an f32 tensor at data offset 2: legal, but not viewable in place.
void TestSafetensors::unalignedDataIsCopied() {
  const torch::Tensor h = torch::tensor({1.5}, torch::kHalf);
  const torch::Tensor f32 = torch::tensor({1.0f, -2.0f, 3.25f}, torch::kFloat);
  std::string data(reinterpret_cast<const char*>(h.data_ptr()), 2);
  data.append(reinterpret_cast<const char*>(f32.data_ptr()), 12);
  const json header = {{"h", {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {0, 2}}}},
                       {"f", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {2, 14}}}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string p = path("unaligned.safetensors");
  write_bytes(p, join(text, data));

  const SafetensorsFile f = SafetensorsFile::open(p);
  const torch::Tensor got = f.tensor("f");
  QVERIFY(same_bytes(got, f32));
  const auto* ptr = static_cast<const std::uint8_t*>(got.data_ptr());
  QVERIFY(ptr < f.mapping_data() || ptr >= f.mapping_data() + f.mapping_size());
  QVERIFY(same_bytes(f.tensor("h"), h));
}

void TestSafetensors::tensorOutlivesFile() {
  const torch::Tensor want = torch::randn({64, 3});
  const std::string p = path("outlive.safetensors");
  write_safetensors(p, {{"w", want}});
  torch::Tensor got;
  { got = SafetensorsFile::open(p).tensor("w"); }
  QVERIFY(same_bytes(got, want));  // the mapping is still alive through the tensor
}

void TestSafetensors::unknownTensorNamesFileAndTensor() {
  const std::string p = path("unknown.safetensors");
  write_safetensors(p, {{"w", torch::zeros({1})}});
  const SafetensorsFile f = SafetensorsFile::open(p);
  QVERIFY(!f.has("lm_head.weight"));
  try {
    f.tensor("lm_head.weight");
    QFAIL("no error");
  } catch (const CheckpointError& e) {
    const QString m = e.what();
    QVERIFY2(m.contains("unknown.safetensors") && m.contains("'lm_head.weight'"), e.what());
  }
}

void TestSafetensors::writerRefuses_data() {
  QTest::addColumn<int>("which");
  QTest::addColumn<QString>("fragment");
  QTest::newRow("duplicate name") << 0 << "'w': given twice";
  QTest::newRow("bool tensor") << 1 << "'mask': dtype Bool";
  QTest::newRow("reserved name") << 2 << "'__metadata__'";
  QTest::newRow("undefined tensor") << 3 << "'w': undefined";
  QTest::newRow("missing folder") << 4 << "no/such/dir";
}

void TestSafetensors::writerRefuses() {
  QFETCH(int, which);
  QFETCH(QString, fragment);
  const torch::Tensor w = torch::zeros({2});
  const std::vector<NamedTensors> inputs = {
      {{"w", w}, {"v", w}, {"w", w}},
      {{"w", w}, {"mask", torch::ones({2}, torch::kBool)}},
      {{"__metadata__", w}},
      {{"w", torch::Tensor()}},
      {{"w", w}},
  };
  const std::string p =
      which == 4 ? path("no/such/dir/x.safetensors") : path("refused.safetensors");
  try {
    write_safetensors(p, inputs[which]);
    QFAIL("no error");
  } catch (const CheckpointError& e) {
    QVERIFY2(QString(e.what()).contains(fragment), e.what());
  }
  QVERIFY(!QFile::exists(QString::fromStdString(p)));
}

// A tensor that cannot be read (a meta tensor has no data) fails mid-file: the old file stays,
// and no temporary file is left beside it.
void TestSafetensors::failedWriteLeavesTargetAlone() {
  QTemporaryDir d;
  const std::string p = (d.path() + "/model.safetensors").toStdString();
  const torch::Tensor old = torch::randn({8});
  write_safetensors(p, {{"w", old}});
  const torch::Tensor meta = torch::empty({4, 4}, torch::TensorOptions().device(torch::kMeta));
  try {
    write_safetensors(p, {{"w", torch::ones({8})}, {"z.ghost", meta}});
    QFAIL("no error");
  } catch (const CheckpointError& e) {
    QVERIFY2(QString(e.what()).contains("'z.ghost'"), e.what());
  }
  QVERIFY(same_bytes(SafetensorsFile::open(p).tensor("w"), old));
  QCOMPARE(QDir(d.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"model.safetensors"});
}

void TestSafetensors::malformed_data() {
  QTest::addColumn<int>("index");
  for (std::size_t i = 0; i < corruptions().size(); ++i)
    QTest::newRow(corruptions()[i].row) << int(i);
}

void TestSafetensors::malformed() {
  QFETCH(int, index);
  const Corruption& c = corruptions()[index];
  const std::string file = "corrupt-" + std::to_string(index) + ".safetensors";
  const std::string bytes = c.apply(valid_file());
  write_bytes(path(file), bytes);
  try {
    open_and_read_all(path(file));
    QFAIL("accepted");
  } catch (const CheckpointError& e) {
    const QString m = e.what();
    QVERIFY2(m.contains(QString::fromStdString(file)), e.what());
    if (*c.tensor) QVERIFY2(m.contains(QString("tensor '") + c.tensor + "'"), e.what());
    QVERIFY2(m.contains(c.fragment), e.what());
  }
  // The same damage with random noise on top: still only CheckpointError or a good file (not for
  // the megabyte-sized headers, which would take a minute).
  if (bytes.size() < 65536) fuzz_file(bytes, 200, 1000 + index, 1);
}

void TestSafetensors::fuzz_data() {
  QTest::addColumn<int>("mode");
  QTest::newRow("byte flips in the header") << 0;
  QTest::newRow("byte flips anywhere") << 1;
  QTest::newRow("truncations") << 2;
  QTest::newRow("header length rewrites") << 3;
}

void TestSafetensors::fuzz() {
  QFETCH(int, mode);
  fuzz_file(valid_file(), 2000, 42 + mode, mode);
}

// Mutates `bytes` `iterations` times (fixed seed) and opens each result. Anything but success or
// a CheckpointError fails the test; a crash fails the whole executable.
void TestSafetensors::fuzz_file(const std::string& bytes, int iterations, unsigned seed, int mode) {
  std::mt19937 rng(seed);
  const std::string p = path("fuzz.safetensors");
  std::uint64_t header_end = bytes.size();
  if (bytes.size() >= 8) {
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    header_end =
        std::min<std::uint64_t>(bytes.size(), 8 + std::min<std::uint64_t>(n, bytes.size()));
  }
  int refused = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string m = bytes;
    const auto pick = [&](std::uint64_t n) { return n == 0 ? 0 : rng() % n; };
    if (mode == 2) {
      m.resize(pick(m.size()));
    } else if (mode == 3 && m.size() >= 8) {
      set_header_length(m, rng() % 2 ? pick(m.size() + 16) : (std::uint64_t(rng()) << 32) | rng());
    } else if (!m.empty()) {
      const std::uint64_t span = mode == 0 ? header_end : m.size();
      for (int k = 1 + rng() % 4; k > 0; --k) m[pick(span)] = static_cast<char>(rng());
    }
    ::unlink(p.c_str());  // never rewrite a file that may still be mapped
    write_bytes(p, m);
    try {
      open_and_read_all(p);
    } catch (const CheckpointError& e) {
      ++refused;
      QVERIFY2(QString(e.what()).contains("fuzz.safetensors"), e.what());
    } catch (const std::exception& e) {
      QFAIL(qPrintable(QString("iteration %1: not a CheckpointError: %2").arg(i).arg(e.what())));
    }
  }
  qInfo("%d of %d mutated files refused", refused, iterations);
}

QTEST_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
