// A model's config.json as read for validation, estimates and training: whole numbers are read
// exactly and within what the model code holds them in (issue 35: a size or id past int32 is
// refused, not cut to 32 bits or truncated from a fraction).
#include <QtTest>

#include <nlohmann/json.hpp>

#include "studio/model_facts/model_info.h"

using nlohmann::json;
using namespace studio;

namespace {

// The demo model's shape (resources/demo/model/config.json).
json demoConfig() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", "qwen2"},
          {"hidden_size", 128},
          {"intermediate_size", 352},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 4288},
          {"max_position_embeddings", 2048},
          {"bos_token_id", 4256},
          {"eos_token_id", 4258}};
}

}  // namespace

class TestModelInfo : public QObject {
  Q_OBJECT

 private slots:
  void wholeNumbersAreReadInRange_data() {
    QTest::addColumn<QByteArray>("key");
    QTest::addColumn<QByteArray>("value");  // JSON text
    QTest::addColumn<QString>("fragment");  // of the error; empty: it reads
    QTest::newRow("a size") << QByteArray("hidden_size") << QByteArray("256") << QString();
    QTest::newRow("a whole float") << QByteArray("hidden_size") << QByteArray("256.0") << QString();
    QTest::newRow("a size past 32 bits")
        << QByteArray("hidden_size") << QByteArray("4294967424")
        << "'hidden_size': 4294967424 is too large (at most 2147483647)";
    QTest::newRow("past int64") << QByteArray("vocab_size") << QByteArray("18446744073709551615")
                                << "'vocab_size': 18446744073709551615 is too large";
    QTest::newRow("past uint64") << QByteArray("vocab_size") << QByteArray("100000000000000000000")
                                 << "'vocab_size': 1e+20 is too large";
    QTest::newRow("a fraction") << QByteArray("num_hidden_layers") << QByteArray("4.5")
                                << "'num_hidden_layers': expected a whole number, got 4.5";
    QTest::newRow("text") << QByteArray("num_attention_heads") << QByteArray("\"4\"")
                          << "'num_attention_heads': expected a whole number, got string";
    QTest::newRow("an id past 32 bits")
        << QByteArray("bos_token_id") << QByteArray("4294967299")
        << "'bos_token_id': 4294967299 is too large (at most 2147483647)";
    QTest::newRow("a list of ids")
        << QByteArray("eos_token_id") << QByteArray("[1, 4258]") << QString();
    QTest::newRow("an id in a list past 32 bits")
        << QByteArray("eos_token_id") << QByteArray("[1, 4294967296]")
        << "'eos_token_id[1]': 4294967296 is too large (at most 2147483647)";
    QTest::newRow("a negative id past int32")
        << QByteArray("pad_token_id") << QByteArray("-4294967296")
        << "'pad_token_id': -4294967296 is too small (at least -2147483648)";
  }

  void wholeNumbersAreReadInRange() {
    QFETCH(QByteArray, key);
    QFETCH(QByteArray, value);
    QFETCH(QString, fragment);
    json config = demoConfig();
    config[key.toStdString()] = json::parse(value.toStdString());
    std::string error;
    const auto info = parse_model_info(config.dump(), error);
    if (fragment.isEmpty()) {
      QVERIFY2(info.has_value(), error.c_str());
      return;
    }
    QVERIFY2(!info.has_value(), "read a value that does not fit");
    QVERIFY2(QString::fromStdString(error).contains(fragment), error.c_str());
  }
};

QTEST_GUILESS_MAIN(TestModelInfo)
#include "tst_model_info.moc"
