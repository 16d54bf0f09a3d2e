// Saving a run config: the YAML written (minimal and full) loads back to the same config, with
// unknown keys kept as written whatever their form, numbers PyYAML reads alike, files replaced
// atomically.
#include <QtTest>

#include <QTemporaryDir>

#include <algorithm>
#include <functional>

#include <yaml-cpp/yaml.h>

#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "config_test_support.h"

using namespace studio;
using config_test::dump;
using config_test::kBase;
using config_test::readAll;

class TestConfigSave : public QObject {
  Q_OBJECT

 private slots:
  void roundTripKeepsUnknownKeysAndOrder();
  void selfReferentialAliasInAnUnknownKey();
  void longUnknownKeysSaveAndLoadBack_data();
  void longUnknownKeysSaveAndLoadBack();
  void fullStyleRoundTripsEveryKey();
  void emittedFloatsReadBackByPyYaml();
  void saveIsAtomicAndReadable();
};

// An unknown key whose value is an alias of itself (`&x [1, *x]`: legal YAML, a list that holds
// itself) is kept as written; the JSON of the config (the start event's) holds its text rather
// than recursing without end, and the config saves and loads back.
void TestConfigSave::selfReferentialAliasInAnUnknownKey() {
  const std::string yaml =
      "output_dir: out\nmodel_name_or_path: m\ndataset: d\ntemplate: qwen\n"
      "my_extra: &x [1, *x]\n";
  LoadResult a = load_config_string(yaml, "a.yaml");
  QVERIFY2(a.ok(), qPrintable(dump(a.diagnostics)));
  QCOMPARE(a.config.extra_keys.size(), size_t{1});
  const nlohmann::json j = config_to_json(a.config);
  QVERIFY2(j["my_extra"].is_string(), j["my_extra"].dump().c_str());
  QVERIFY2(QString::fromStdString(j["my_extra"].get<std::string>()).contains("[1, *"),
           j["my_extra"].dump().c_str());
  const std::string saved = to_yaml(a.config);
  LoadResult b = load_config_string(saved, "b.yaml");
  QVERIFY2(b.ok(), qPrintable(dump(b.diagnostics) + QString::fromStdString("\n" + saved)));
  QCOMPARE(b.config.extra_keys.size(), size_t{1});
}

// Unknown keys of any length are kept, and the saved file loads: YAML allows 1,024 characters
// before an implicit key's colon, and escaping lengthens a key (a line break is written `\n`,
// a control character `\x84`), so a key of 300 such characters would be written past that
// limit as `"...": value` (scripts/fuzz.sh found it: the file did not load again).
void TestConfigSave::longUnknownKeysSaveAndLoadBack_data() {
  QTest::addColumn<QByteArray>("entry");  // the unknown entry, appended to a valid config
  QTest::addColumn<int>("length");        // its longest key once read, nested or not
  QByteArray lines, bytes, plain, control, many;
  for (int i = 0; i < 300; ++i) lines += "ab\\n", bytes += "\\x84", plain += "k";
  for (int i = 0; i < 256; ++i) control += "\\x01";  // 1,026 characters with the quotes
  for (int i = 0; i < 600; ++i) many += "k" + QByteArray::number(i) + ": 0, ";
  const QByteArray key = "\"" + lines + "\"";
  // Written in the explicit form in the source, where escaped they are past the limit too.
  QTest::newRow("line breaks, 900 characters") << QByteArray("? " + key + "\n: 1") << 900;
  // (U+0084 is 2 bytes of UTF-8, and written back as the 4 characters \x84.)
  QTest::newRow("control characters, 300 of them") << QByteArray("? \"" + bytes + "\"\n: 1") << 600;
  QTest::newRow("256 control bytes, 2 past the limit once quoted")
      << QByteArray("? \"" + control + "\"\n: 1") << 256;
  QTest::newRow("plain, 300 characters") << QByteArray(plain + ": 1") << 300;
  QTest::newRow("plain, 1,000 characters") << QByteArray(plain + plain + plain + plain.left(100) + ": 1") << 1000;
  QTest::newRow("nested: line breaks, 900 characters")
      << QByteArray("my_extra:\n  ? " + key + "\n  : [1, 2]") << 900;
  QTest::newRow("nested after 600 entries")
      << QByteArray("my_extra: {" + many + "sub: {? " + key + " : 1}}") << 900;
  // Aliases: a node shared twice, and a map that holds itself.
  QTest::newRow("shared by an alias")
      << QByteArray("my_extra:\n  a: &s {? " + key + " : 1}\n  b: *s") << 900;
  QTest::newRow("a map holding itself") << QByteArray("my_extra: &x {? " + key + " : *x}") << 900;
}

void TestConfigSave::longUnknownKeysSaveAndLoadBack() {
  QFETCH(QByteArray, entry);
  QFETCH(int, length);
  const std::string yaml = "output_dir: out\nmodel_name_or_path: m\ndataset: d\ntemplate: qwen\n" +
                           entry.toStdString() + "\n";
  LoadResult a = load_config_string(yaml, "a.yaml");
  QVERIFY2(a.ok(), qPrintable(dump(a.diagnostics)));
  QCOMPARE(a.config.extra_keys.size(), size_t{1});
  // The longest key within 3 levels (an alias may make the value hold itself).
  std::function<size_t(const YAML::Node&, int)> longest = [&](const YAML::Node& n, int depth) {
    size_t most = 0;
    if (depth > 3 || !n.IsMap()) return most;
    for (const auto& kv : n)
      most = std::max({most, kv.first.IsScalar() ? kv.first.Scalar().size() : 0,
                       longest(kv.second, depth + 1)});
    return most;
  };
  for (const auto style : {YamlStyle::Minimal, YamlStyle::Full}) {
    const std::string saved = to_yaml(a.config, style);
    LoadResult b = load_config_string(saved, "b.yaml");
    QVERIFY2(b.ok(), qPrintable(dump(b.diagnostics) + QString::fromStdString("\n" + saved.substr(0, 3000))));
    QCOMPARE(b.config.extra_keys.size(), size_t{1});
    QCOMPARE(int(longest(YAML::Load(saved), 0)), length);
    QCOMPARE(QString::fromStdString(to_yaml(b.config, style)), QString::fromStdString(saved));
  }
}

void TestConfigSave::roundTripKeepsUnknownKeysAndOrder() {
  const std::string yaml =
      "# a comment users write\n"
      "output_dir: out/a b\n"
      "model_name_or_path: models/qwen2.5-7b-shape\n"
      "enable_liger_kernel: true\n"
      "dataset: long_docs,chat_demo\n"
      "image_max_pixels: 262144\n"
      "template: qwen\n"
      "freeze_extra:\n  nested: [1, 2, {x: y}]\n  text: 'a: b'\n"
      "learning_rate: 1e-5\n"
      "sequence_parallel_size: 4\n";
  LoadResult a = load_config_string(yaml, "a.yaml");
  QVERIFY2(a.ok(), qPrintable(dump(a.diagnostics)));
  QCOMPARE(a.config.extra_keys.size(), size_t{3});
  int warnings = 0;
  for (const auto& d : a.diagnostics) warnings += d.severity == Severity::Warning;
  QCOMPARE(warnings, 3);  // each unknown key reported once

  const std::string saved = to_yaml(a.config);
  LoadResult b = load_config_string(saved, "b.yaml");
  QVERIFY2(b.ok(), qPrintable(dump(b.diagnostics)));
  QCOMPARE(QString::fromStdString(to_yaml(b.config)), QString::fromStdString(saved));
  QCOMPARE(QString::fromStdString(to_yaml(b.config, YamlStyle::Full)),
           QString::fromStdString(to_yaml(a.config, YamlStyle::Full)));

  // Order as in the source file, unknown keys where they stood.
  YAML::Node root = YAML::Load(saved);
  QStringList keys;
  for (const auto& kv : root) keys << QString::fromStdString(kv.first.Scalar());
  QCOMPARE(keys, QStringList({"output_dir", "model_name_or_path", "enable_liger_kernel", "dataset",
                              "image_max_pixels", "template", "freeze_extra", "learning_rate",
                              "sequence_parallel_size"}));
  QCOMPARE(root["freeze_extra"]["nested"][2]["x"].as<std::string>(), std::string("y"));
  QCOMPARE(root["freeze_extra"]["text"].as<std::string>(), std::string("a: b"));
  QCOMPARE(root["output_dir"].as<std::string>(), std::string("out/a b"));
  QCOMPARE(root["image_max_pixels"].as<int>(), 262144);
}

void TestConfigSave::fullStyleRoundTripsEveryKey() {
  // Non-default values for many keys, through Full style and back.
  const std::string yaml = kBase.toStdString() +
                           "stage: dpo\nref_model: models/qwen2.5-7b-shape\npref_beta: 0.25\n"
                           "pref_loss: hinge\npref_ftx: 0.5\nprecompute_ref_logps: true\n"
                           "max_samples: 1000\nval_size: 0.05\neval_strategy: steps\n"
                           "eval_steps: 7\nsave_total_limit: 3\nmax_steps: 100\n"
                           "lr_scheduler_type: cosine_with_min_lr\n"
                           "lr_scheduler_kwargs: {min_lr_rate: 0.1}\nwarmup_steps: 10\n"
                           "weight_decay: 0.01\nadam_beta2: 0.95\nadam_epsilon: 1.0e-6\n"
                           "pure_bf16: true\ngradient_checkpointing: false\nflash_attn: sdpa\n"
                           "seed: 7\nsequence_parallel_size: 8\nsequence_parallel_mode: usp\n"
                           "sequence_parallel_ulysses_degree: 2\n"
                           "sequence_parallel_ring_degree: 4\nreport_to: [wandb, tensorboard]\n";
  LoadResult a = load_config_string(yaml);
  QVERIFY2(a.ok(), qPrintable(dump(a.diagnostics)));
  const std::string full = to_yaml(a.config, YamlStyle::Full);
  LoadResult b = load_config_string(full);
  QVERIFY2(b.ok(), qPrintable(dump(b.diagnostics)));
  QCOMPARE(QString::fromStdString(to_yaml(b.config, YamlStyle::Full)),
           QString::fromStdString(full));
  QCOMPARE(b.config.pref_loss, PrefLoss::Hinge);
  QCOMPARE(b.config.lr_scheduler_kwargs.at("min_lr_rate"), 0.1);
  QCOMPARE(b.config.sequence_parallel_mode, SpMode::Usp);
  QCOMPARE(*b.config.eval_steps, int64_t{7});
  QCOMPARE(b.config.adam_epsilon, 1e-6);
  QVERIFY(!b.config.gradient_checkpointing);
  // Every table key is present in Full style.
  YAML::Node root = YAML::Load(full);
  for (const auto& f : config_fields())
    QVERIFY2(root[std::string(f.key)], std::string(f.key).c_str());
}

void TestConfigSave::emittedFloatsReadBackByPyYaml() {
  // PyYAML (YAML 1.1) reads floats only with a dot and a signed exponent.
  LoadResult a = load_config_string(kBase.toStdString() + "learning_rate: 5e-6\n"
                                                          "num_train_epochs: 2\n");
  QVERIFY(a.ok());
  const QString out = QString::fromStdString(to_yaml(a.config));
  QVERIFY2(out.contains("learning_rate: 5.0e-06\n"), qPrintable(out));
  QVERIFY2(out.contains("num_train_epochs: 2.0\n"), qPrintable(out));
  const QString full = QString::fromStdString(to_yaml(a.config, YamlStyle::Full));
  QVERIFY2(full.contains("adam_epsilon: 1.0e-08\n"), qPrintable(full));
  QVERIFY2(full.contains("bf16: false\n"), qPrintable(full));
  QVERIFY2(full.contains("max_samples: ~\n") || full.contains("max_samples: null\n"),
           qPrintable(full));
}

void TestConfigSave::saveIsAtomicAndReadable() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  LoadResult a = load_config_string(kBase.toStdString() + "seed: 3\n");
  const QString path = dir.filePath("exported.yaml");
  QCOMPARE(QString::fromStdString(save_config_file(a.config, path.toStdString())), QString());
  QCOMPARE(readAll(path), QString::fromStdString(to_yaml(a.config)));
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList({"exported.yaml"}));  // no temp
  const std::string err = save_config_file(a.config, dir.filePath("no/such/dir/x.yaml").toStdString());
  QVERIFY(QString::fromStdString(err).contains("no/such/dir"));
}

QTEST_MAIN(TestConfigSave)
#include "tst_config_save.moc"
