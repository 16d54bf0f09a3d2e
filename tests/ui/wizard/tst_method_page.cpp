// MethodPage: SFT or DPO, the DPO settings enabled only for DPO, the adapter keys shown only for
// their finetuning_type, and validate_config's rules for them shown live.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>

#include "studio/ui/wizard/method_page.h"
#include "wizard_test_support.h"

using studio::ui::MethodPage;
using studio::ui::RunDraft;

namespace {

// The field named `key` as the page shows it: setField's text, read back.
QString fieldText(const QWidget& page, const QString& key) {
  const QWidget* w = page.findChild<QWidget*>(key);
  if (auto* e = qobject_cast<const QLineEdit*>(w)) return e->text();
  if (auto* s = qobject_cast<const QSpinBox*>(w)) return QString::number(s->value());
  if (auto* d = qobject_cast<const QDoubleSpinBox*>(w)) return QString::number(d->value());
  if (auto* c = qobject_cast<const QCheckBox*>(w))
    return c->isChecked() ? QStringLiteral("true") : QStringLiteral("false");
  if (auto* b = qobject_cast<const QComboBox*>(w)) return b->currentText();
  return QStringLiteral("(no field %1)").arg(key);
}

QStringList names(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

const QStringList loraKeys{"lora_rank", "lora_alpha", "lora_dropout", "lora_target",
                           "additional_target", "use_rslora", "use_dora",
                           "adapter_name_or_path", "create_new_adapter"};
const QStringList freezeKeys{"freeze_trainable_layers", "freeze_trainable_modules",
                             "freeze_extra_modules"};

// Whether every one of `keys` would show with the page (the page itself need not be shown).
bool shown(const QWidget& page, const QStringList& keys, bool expected) {
  for (const QString& key : keys) {
    const QWidget* w = page.findChild<QWidget*>(key);
    if (!w || w->isVisibleTo(&page) != expected) {
      qWarning("%s: %s", qPrintable(key), !w ? "no such field" : expected ? "hidden" : "shown");
      return false;
    }
  }
  return true;
}

}  // namespace

class TestMethodPage : public QObject {
  Q_OBJECT

 private slots:
  void validation_data();
  void validation();
  void dpoSettingsFollowTheStage();
  void adapterFieldsFollowFinetuningType_data();
  void adapterFieldsFollowFinetuningType();
  void adapterEditsWriteTheConfig_data();
  void adapterEditsWriteTheConfig();
  void loadedAdaptersShow_data();
  void loadedAdaptersShow();
};

void TestMethodPage::validation_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("settings");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  const QStringList dpoData{"dataset=demo_dpo"};
  QTest::newRow("sft") << QStringList() << "" << true << "";
  QTest::newRow("dpo on instruction data") << QStringList() << "stage=dpo" << false
                                           << "dataset: 'demo_sft' is not a preference dataset";
  QTest::newRow("dpo") << dpoData << "stage=dpo" << true << "";
  QTest::newRow("dpo, every setting")
      << dpoData
      << "stage=dpo;pref_beta=0.2;pref_loss=hinge;pref_ftx=0.5;precompute_ref_logps=true" << true
      << "";
  QTest::newRow("pref_beta 0") << dpoData << "stage=dpo;pref_beta=0" << false
                               << "pref_beta: must be positive, got 0";
  QTest::newRow("label smoothing too large") << dpoData << "stage=dpo;dpo_label_smoothing=0.7"
                                             << false << "dpo_label_smoothing: must be in [0, 0.5]";
  QTest::newRow("label smoothing with ipo")
      << dpoData << "stage=dpo;pref_loss=ipo;dpo_label_smoothing=0.1" << true
      << "dpo_label_smoothing: only applies to pref_loss: sigmoid; ignored";
  QTest::newRow("missing reference model")
      << dpoData << "stage=dpo;ref_model=/nonexistent/ref" << true
      << "ref_model: no such folder: /nonexistent/ref";
  QTest::newRow("pt on plain texts") << QStringList{"dataset=demo_pt"} << "stage=pt" << true << "";
  QTest::newRow("pt on preference pairs") << dpoData << "stage=pt" << false
                                          << "dataset: 'demo_dpo' is a preference dataset";
  QTest::newRow("orpo") << dpoData << "stage=dpo;pref_loss=orpo;pref_beta=0.2" << true << "";
  QTest::newRow("simpo with gamma") << dpoData << "stage=dpo;pref_loss=simpo;simpo_gamma=1.2" << true
                                    << "";
  QTest::newRow("kto_pair") << dpoData << "stage=dpo;pref_loss=kto_pair" << true << "";
  QTest::newRow("rm on preference pairs") << dpoData << "stage=rm" << true << "";
  QTest::newRow("rm on instruction data") << QStringList() << "stage=rm" << false
                                          << "dataset: 'demo_sft' is not a preference dataset (\"ranking\": true), which stage: rm needs";
  QTest::newRow("rm with neat_packing")
      << QStringList{"dataset=demo_dpo", "neat_packing=true"} << "stage=rm" << false
      << "neat_packing: stage rm scores each chosen and rejected sequence";
  QTest::newRow("kto on feedback data") << QStringList{"dataset=demo_kto"}
                                        << "stage=kto;kto_chosen_weight=1.5;pref_ftx=0.1" << true
                                        << "";
  QTest::newRow("kto on preference pairs") << dpoData << "stage=kto" << false
                                           << "dataset: 'demo_dpo' is a preference dataset";
  // (A negative weight cannot be typed: the spin boxes stop at 0; validate refuses it in files.)
  QTest::newRow("kto on instruction data") << QStringList() << "stage=kto" << false
                                           << "dataset: 'demo_sft' has no kto_tag column";
  QTest::newRow("kto pref_beta 0") << QStringList{"dataset=demo_kto"} << "stage=kto;pref_beta=0"
                                   << false << "pref_beta: must be positive, got 0";
  QTest::newRow("dpo keys in an sft run") << QStringList{"pref_beta=0.3"} << "" << true
                                          << "pref_beta: only used with stage: dpo; ignored";
  // Adapters: the demo model is a dense Qwen2 (q_proj ... down_proj) with tied embeddings.
  QTest::newRow("lora") << QStringList()
                        << "finetuning_type=lora;lora_rank=16;lora_target=q_proj,v_proj" << true
                        << "";
  QTest::newRow("lora, every setting")
      << QStringList()
      << "finetuning_type=lora;lora_rank=4;lora_alpha=8;lora_dropout=0.05;lora_target=all;"
         "additional_target=norm;use_rslora=true;use_dora=true"
      << true << "";
  QTest::newRow("additional_target embed_tokens on tied embeddings")
      << QStringList() << "finetuning_type=lora;additional_target=embed_tokens" << false
      << "additional_target: 'embed_tokens': this model ties its LM head to the embeddings";
  QTest::newRow("qlora") << QStringList()
                         << "finetuning_type=lora;quantization_bit=4;quantization_type=fp4;"
                            "double_quantization=false"
                         << true << "";
  QTest::newRow("qlora 8 bit") << QStringList() << "finetuning_type=lora;quantization_bit=8"
                               << false << "quantization_bit: 8-bit (LLM.int8) training is not implemented";
  QTest::newRow("quantized full training") << QStringList() << "quantization_bit=4" << false
                                           << "quantization_bit: a quantized base trains only with finetuning_type: lora";
  QTest::newRow("lora target the model lacks")
      << QStringList() << "finetuning_type=lora;lora_target=q_proj,x_proj" << false
      << "lora_target: 'x_proj' is not a linear layer";
  QTest::newRow("lora_alpha not a number") << QStringList() << "finetuning_type=lora;lora_alpha=big"
                                           << false << "lora_alpha: 'big' is not a number";
  QTest::newRow("lora_dropout 1") << QStringList() << "finetuning_type=lora;lora_dropout=1" << false
                                  << "lora_dropout: must be in [0, 1)";
  QTest::newRow("missing adapter folder")
      << QStringList() << "finetuning_type=lora;adapter_name_or_path=/nonexistent/adapter" << true
      << "adapter_name_or_path: /nonexistent/adapter holds no adapter_config.json";
  QTest::newRow("rm with lora") << dpoData << "stage=rm;finetuning_type=lora" << false
                                << "finetuning_type: stage rm with lora is not implemented";
  QTest::newRow("use_dora in a full run") << QStringList{"use_dora=true"} << "" << false
                                          << "use_dora: is only valid for finetuning_type: lora";
  QTest::newRow("lora keys in a full run")
      << QStringList{"lora_rank=16"} << "" << true
      << "lora_rank: only used with finetuning_type: lora (this run is full); ignored";
  QTest::newRow("freeze") << QStringList()
                          << "finetuning_type=freeze;freeze_trainable_layers=-1;"
                             "freeze_trainable_modules=mlp,self_attn;freeze_extra_modules=norm"
                          << true << "";
  QTest::newRow("freeze 0 layers") << QStringList()
                                   << "finetuning_type=freeze;freeze_trainable_layers=0" << false
                                   << "freeze_trainable_layers: must not be 0";
  QTest::newRow("freeze more layers than the model's")
      << QStringList() << "finetuning_type=freeze;freeze_trainable_layers=9" << true
      << "freeze_trainable_layers: 9 is more than the model's 4 layers";
  QTest::newRow("freeze a tied lm_head")
      << QStringList() << "finetuning_type=freeze;freeze_extra_modules=lm_head" << false
      << "freeze_extra_modules: 'lm_head' is tied to the embeddings";
}

void TestMethodPage::validation() {
  QFETCH(QStringList, overrides);
  QFETCH(QString, settings);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(overrides), QDir::tempPath());
  QVERIFY(wizard_test::setFields(&page, settings));
  wizard_test::verifyPage(page, complete, message);
}

void TestMethodPage::dpoSettingsFollowTheStage() {
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QVERIFY(!page.dpoGroup()->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("dpo")));
  QCOMPARE(draft.config().stage, studio::Stage::Dpo);
  QVERIFY(page.dpoGroup()->isEnabled());
  QWidget* smoothing = page.findChild<QWidget*>(QStringLiteral("dpo_label_smoothing"));
  QVERIFY(smoothing->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("ipo")));
  QVERIFY(!smoothing->isEnabled());  // sigmoid only
  // simpo_gamma only for simpo; orpo and simpo build no reference, so its settings are off.
  QWidget* gamma = page.findChild<QWidget*>(QStringLiteral("simpo_gamma"));
  QWidget* reference = page.findChild<QWidget*>(QStringLiteral("ref_model"));
  QWidget* precompute = page.findChild<QWidget*>(QStringLiteral("precompute_ref_logps"));
  QVERIFY(gamma && reference && precompute);
  QVERIFY(!gamma->isEnabled());
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("simpo")));
  QVERIFY(gamma->isEnabled());
  QVERIFY(!reference->isEnabled() && !precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("orpo")));
  QVERIFY(!gamma->isEnabled() && !reference->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("kto_pair")));
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("pref_loss"), QStringLiteral("ipo")));
  // A reward model has no DPO settings; KTO has beta, ftx, its weights and the reference, not
  // the DPO losses.
  QWidget* chosenWeight = page.findChild<QWidget*>(QStringLiteral("kto_chosen_weight"));
  QWidget* loss = page.findChild<QWidget*>(QStringLiteral("pref_loss"));
  QVERIFY(chosenWeight && loss);
  QVERIFY(!chosenWeight->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("rm")));
  QCOMPARE(draft.config().stage, studio::Stage::Rm);
  QVERIFY(!page.dpoGroup()->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("kto")));
  QVERIFY(page.dpoGroup()->isEnabled());
  QVERIFY(chosenWeight->isEnabled() && !loss->isEnabled() && !smoothing->isEnabled() &&
          !gamma->isEnabled());
  QVERIFY(reference->isEnabled() && precompute->isEnabled());
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("dpo")));
  // The default pref_beta shown is RunConfig{}'s.
  auto* beta = page.findChild<QDoubleSpinBox*>(QStringLiteral("pref_beta"));
  QCOMPARE(beta->value(), studio::RunConfig{}.pref_beta);
  // Clearing the reference folder unsets the key.
  QVERIFY(wizard_test::setField(&page, QStringLiteral("ref_model"), QStringLiteral("/m")));
  QCOMPARE(draft.config().ref_model.value_or(""), std::string("/m"));
  QVERIFY(wizard_test::setField(&page, QStringLiteral("ref_model"), QString()));
  QVERIFY(!draft.config().ref_model);
}

void TestMethodPage::adapterFieldsFollowFinetuningType_data() {
  QTest::addColumn<QString>("type");
  QTest::addColumn<bool>("lora");
  QTest::addColumn<bool>("freeze");

  QTest::newRow("full") << "full" << false << false;
  QTest::newRow("lora") << "lora" << true << false;
  QTest::newRow("freeze") << "freeze" << false << true;
}

void TestMethodPage::adapterFieldsFollowFinetuningType() {
  QFETCH(QString, type);
  QFETCH(bool, lora);
  QFETCH(bool, freeze);
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QVERIFY(shown(page, loraKeys, false) && shown(page, freezeKeys, false));  // full
  // Through each other type first, so that the fields also hide again.
  for (const QString& other : {QStringLiteral("lora"), QStringLiteral("freeze"), type})
    QVERIFY(wizard_test::setField(&page, QStringLiteral("finetuning_type"), other));
  QCOMPARE(QString::fromUtf8(studio::to_string(draft.config().finetuning_type).data()), type);
  QVERIFY(shown(page, loraKeys, lora));
  QVERIFY(shown(page, freezeKeys, freeze));
  QCOMPARE(page.loraFields()->isVisibleTo(&page), lora);
  QCOMPARE(page.freezeFields()->isVisibleTo(&page), freeze);
  QVERIFY(page.findChild<QWidget*>(QStringLiteral("finetuning_type"))->isVisibleTo(&page));
  // The stage does not change which adapter keys show.
  QVERIFY(wizard_test::setField(&page, QStringLiteral("stage"), QStringLiteral("pt")));
  QVERIFY(shown(page, loraKeys, lora) && shown(page, freezeKeys, freeze));
}

void TestMethodPage::adapterEditsWriteTheConfig_data() {
  QTest::addColumn<QString>("settings");
  QTest::addColumn<qint64>("rank");
  QTest::addColumn<double>("alpha");  // 0: unset (2 x rank)
  QTest::addColumn<QStringList>("target");
  QTest::addColumn<QStringList>("additional");
  QTest::addColumn<QStringList>("adapters");
  QTest::addColumn<qint64>("layers");
  QTest::addColumn<QStringList>("modules");
  QTest::addColumn<QStringList>("extra");

  const QStringList all{"all"}, none;
  QTest::newRow("defaults") << "finetuning_type=lora" << qint64(8) << 0.0 << all << none << none
                            << qint64(2) << all << none;
  QTest::newRow("rank and targets")
      << "finetuning_type=lora;lora_rank=16;lora_target=q_proj, v_proj" << qint64(16) << 0.0
      << QStringList{"q_proj", "v_proj"} << none << none << qint64(2) << all << none;
  QTest::newRow("alpha") << "finetuning_type=lora;lora_alpha=32" << qint64(8) << 32.0 << all
                         << none << none << qint64(2) << all << none;
  QTest::newRow("alpha cleared") << "finetuning_type=lora;lora_alpha=32;lora_alpha=" << qint64(8)
                                 << 0.0 << all << none << none << qint64(2) << all << none;
  QTest::newRow("a trailing comma while typing")
      << "finetuning_type=lora;lora_target=q_proj," << qint64(8) << 0.0 << QStringList{"q_proj"}
      << none << none << qint64(2) << all << none;
  QTest::newRow("targets cleared: all")
      << "finetuning_type=lora;lora_target=q_proj;lora_target=" << qint64(8) << 0.0 << all << none
      << none << qint64(2) << all << none;
  QTest::newRow("additional targets and adapters")
      << "finetuning_type=lora;additional_target=embed_tokens,lm_head;"
         "adapter_name_or_path=saves/a,saves/b"
      << qint64(8) << 0.0 << all << QStringList{"embed_tokens", "lm_head"}
      << QStringList{"saves/a", "saves/b"} << qint64(2) << all << none;
  QTest::newRow("freeze")
      << "finetuning_type=freeze;freeze_trainable_layers=-3;freeze_trainable_modules=mlp,self_attn;"
         "freeze_extra_modules=embed_tokens"
      << qint64(8) << 0.0 << all << none << none << qint64(-3) << QStringList{"mlp", "self_attn"}
      << QStringList{"embed_tokens"};
  QTest::newRow("freeze modules cleared: all")
      << "finetuning_type=freeze;freeze_trainable_modules=mlp;freeze_trainable_modules="
      << qint64(8) << 0.0 << all << none << none << qint64(2) << all << none;
}

void TestMethodPage::adapterEditsWriteTheConfig() {
  QFETCH(QString, settings);
  QFETCH(qint64, rank);
  QFETCH(double, alpha);
  QFETCH(QStringList, target);
  QFETCH(QStringList, additional);
  QFETCH(QStringList, adapters);
  QFETCH(qint64, layers);
  QFETCH(QStringList, modules);
  QFETCH(QStringList, extra);
  RunDraft draft;
  MethodPage page(&draft);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QSignalSpy changed(&draft, &RunDraft::changed);
  QVERIFY(wizard_test::setFields(&page, settings));
  QVERIFY(!changed.isEmpty());
  const studio::RunConfig& c = draft.config();
  QCOMPARE(c.lora_rank, rank);
  QCOMPARE(c.lora_alpha.value_or(0), alpha);
  QCOMPARE(names(c.lora_target), target);
  QCOMPARE(names(c.additional_target), additional);
  QCOMPARE(names(c.adapter_name_or_path), adapters);
  QCOMPARE(c.freeze_trainable_layers, layers);
  QCOMPARE(names(c.freeze_trainable_modules), modules);
  QCOMPARE(names(c.freeze_extra_modules), extra);
}

void TestMethodPage::loadedAdaptersShow_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("fields");  // key=text as the page shows them
  QTest::addColumn<bool>("lora");
  QTest::addColumn<bool>("freeze");

  QTest::newRow("full") << QStringList()
                        << "finetuning_type=full;lora_rank=8;lora_alpha=;lora_target=all;"
                           "freeze_trainable_layers=2;freeze_trainable_modules=all"
                        << false << false;
  QTest::newRow("lora")
      << QStringList{"finetuning_type=lora", "lora_target=q_proj,v_proj", "lora_rank=16",
                     "lora_alpha=32", "lora_dropout=0.05", "use_rslora=true",
                     "adapter_name_or_path=saves/sft-lora", "create_new_adapter=true"}
      << "finetuning_type=lora;lora_target=q_proj,v_proj;lora_rank=16;lora_alpha=32;"
         "lora_dropout=0.05;use_rslora=true;use_dora=false;adapter_name_or_path=saves/sft-lora;"
         "create_new_adapter=true;additional_target="
      << true << false;
  QTest::newRow("lora, a YAML list")
      << QStringList{"finetuning_type=lora", "lora_target=[q_proj, o_proj]"}
      << "lora_target=q_proj,o_proj;lora_alpha=" << true << false;
  QTest::newRow("freeze")
      << QStringList{"finetuning_type=freeze", "freeze_trainable_layers=-4",
                     "freeze_trainable_modules=mlp", "freeze_extra_modules=embed_tokens,norm"}
      << "finetuning_type=freeze;freeze_trainable_layers=-4;freeze_trainable_modules=mlp;"
         "freeze_extra_modules=embed_tokens,norm"
      << false << true;
}

void TestMethodPage::loadedAdaptersShow() {
  QFETCH(QStringList, overrides);
  QFETCH(QString, fields);
  QFETCH(bool, lora);
  QFETCH(bool, freeze);
  RunDraft draft;
  MethodPage page(&draft);
  const studio::RunConfig loaded = wizard_test::demoRun(overrides);
  draft.load(loaded, QDir::tempPath());
  for (const QString& kv : fields.split(QLatin1Char(';'))) {
    const int eq = static_cast<int>(kv.indexOf(QLatin1Char('=')));
    QCOMPARE(fieldText(page, kv.left(eq)), kv.mid(eq + 1));
  }
  QVERIFY(shown(page, loraKeys, lora));
  QVERIFY(shown(page, freezeKeys, freeze));
  // Showing the loaded values writes nothing back.
  QCOMPARE(names(draft.config().lora_target), names(loaded.lora_target));
  QCOMPARE(names(draft.config().freeze_extra_modules), names(loaded.freeze_extra_modules));
  QCOMPARE(draft.config().lora_alpha, loaded.lora_alpha);
}

QTEST_MAIN(TestMethodPage)
#include "tst_method_page.moc"
