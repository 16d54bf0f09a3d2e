// Sweeps' points (config/sweep.h): a grid's combinations in order, a list's columns, folder
// names, the axis syntax, and the mistakes refused with the key named.
#include <QtTest/QtTest>

#include "studio/config/config_io.h"
#include "studio/config/sweep.h"

using studio::SweepMode;

class TestSweepSpec : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void axis_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("key");
    QTest::addColumn<QStringList>("values");
    QTest::addRow("numbers") << "learning_rate=1e-4,3e-4, 1e-3" << "learning_rate"
                             << QStringList{"1e-4", "3e-4", "1e-3"};
    QTest::addRow("a YAML list is one value")
        << "lora_target=[q_proj, v_proj],all" << "lora_target" << QStringList{"[q_proj, v_proj]", "all"};
    QTest::addRow("quoted comma") << "template='a,b',qwen" << "template" << QStringList{"'a,b'", "qwen"};
    QTest::addRow("one value") << "zero_stage=3" << "zero_stage" << QStringList{"3"};
  }
  void axis() {
    QFETCH(QString, text);
    QFETCH(QString, key);
    QFETCH(QStringList, values);
    const auto a = studio::parse_sweep_axis(text.toStdString());
    QCOMPARE(QString::fromStdString(a.key), key);
    QStringList got;
    for (const auto& v : a.values) got << QString::fromStdString(v);
    QCOMPARE(got, values);
  }

  void badAxis_data() {
    QTest::addColumn<QString>("text");
    QTest::addRow("no key") << "=1,2";
    QTest::addRow("no equals") << "learning_rate";
    QTest::addRow("empty value") << "learning_rate=1e-4,,3e-4";
    QTest::addRow("trailing comma") << "learning_rate=1e-4,";
  }
  void badAxis() {
    QFETCH(QString, text);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, studio::parse_sweep_axis(text.toStdString()));
  }

  void grid() {
    studio::SweepSpec spec;
    spec.axes = {{"learning_rate", {"1e-4", "3e-4"}}, {"sequence_parallel_size", {"1", "2", "4"}}};
    const auto points = studio::expand_sweep(spec);
    QCOMPARE(int(points.size()), 6);
    // The last axis varies fastest.
    QCOMPARE(QString::fromStdString(points[0].name), "00-learning_rate=1e-4,sequence_parallel_size=1");
    QCOMPARE(QString::fromStdString(points[2].name), "02-learning_rate=1e-4,sequence_parallel_size=4");
    QCOMPARE(QString::fromStdString(points[3].name), "03-learning_rate=3e-4,sequence_parallel_size=1");
    QCOMPARE(QString::fromStdString(points[5].sets[1]), "sequence_parallel_size=4");
    for (int i = 0; i < 6; ++i) QCOMPARE(points[size_t(i)].index, i);
  }

  void list() {
    studio::SweepSpec spec;
    spec.mode = SweepMode::List;
    spec.axes = {{"sequence_parallel_size", {"1", "2"}}, {"cutoff_len", {"4096", "8192"}}};
    const auto points = studio::expand_sweep(spec);
    QCOMPARE(int(points.size()), 2);
    QCOMPARE(QString::fromStdString(points[1].name), "01-sequence_parallel_size=2,cutoff_len=8192");
  }

  void refused_data() {
    QTest::addColumn<int>("mode");
    QTest::addColumn<QStringList>("axes");
    QTest::addColumn<QString>("says");
    QTest::addRow("no axis") << int(SweepMode::Grid) << QStringList{} << "at least one key";
    QTest::addRow("key twice") << int(SweepMode::Grid) << QStringList{"cutoff_len=1,2", "cutoff_len=3"}
                               << "'cutoff_len' is given twice";
    QTest::addRow("list lengths") << int(SweepMode::List)
                                  << QStringList{"cutoff_len=1,2", "learning_rate=1e-4"}
                                  << "'cutoff_len' has 2 values and 'learning_rate' 1";
    QTest::addRow("too many") << int(SweepMode::Grid)
                              << QStringList{"a=1,2,3,4,5,6,7,8,9,10,11", "b=1,2,3,4,5,6,7,8,9,10",
                                             "c=1,2,3,4,5,6,7,8,9,10"}
                              << "more than 1024 points";
  }
  void refused() {
    QFETCH(int, mode);
    QFETCH(QStringList, axes);
    QFETCH(QString, says);
    studio::SweepSpec spec;
    spec.mode = SweepMode(mode);
    for (const QString& a : axes) spec.axes.push_back(studio::parse_sweep_axis(a.toStdString()));
    try {
      studio::expand_sweep(spec);
      QFAIL("expected a refusal");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).contains(says), e.what());
    }
  }

  // A point's config: the base with the values set (typed by the key table) and its own
  // output_dir; a value of the wrong type is an error naming the key.
  void pointConfig() {
    const auto base = studio::load_config_string(
        "model_name_or_path: m\nstage: sft\ndo_train: true\ndataset: d\noutput_dir: out\n"
        "learning_rate: 1.0e-4\n");
    QVERIFY(base.ok());
    studio::SweepPoint p{1, {"learning_rate=3e-4", "cutoff_len=8192"}, "01-x"};
    const auto pc = studio::sweep_point_config(base.config, p, "/sweeps/s/01-x");
    QCOMPARE(pc.config.learning_rate, 3e-4);
    QCOMPARE(pc.config.cutoff_len, int64_t(8192));
    QCOMPARE(QString::fromStdString(pc.config.output_dir), "/sweeps/s/01-x");
    studio::SweepPoint bad{2, {"cutoff_len=long"}, "02-x"};
    const auto pb = studio::sweep_point_config(base.config, bad, "/sweeps/s/02-x");
    QVERIFY(studio::has_errors(pb.diagnostics));
    bool named = false;
    for (const auto& d : pb.diagnostics) named = named || d.key == "cutoff_len";
    QVERIFY(named);
  }
};

QTEST_GUILESS_MAIN(TestSweepSpec)
#include "tst_sweep_spec.moc"
