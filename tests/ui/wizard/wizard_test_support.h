#pragma once
// Fixtures and helpers shared by the wizard tests: the demo project, model shapes, and setting a
// page's fields by their YAML key as a user would.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QString>
#include <QStringList>
#include <QTest>

#include "studio/config/config_io.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/wizard_page.h"

namespace wizard_test {

inline QString sourcePath(const QString& relative) {
  return QStringLiteral(STUDIO_SOURCE_DIR "/") + relative;
}
inline QString demoModel() { return sourcePath(QStringLiteral("resources/demo/model")); }
inline QString demoData() { return sourcePath(QStringLiteral("resources/demo/data")); }
inline QString demoConfig() { return sourcePath(QStringLiteral("resources/demo/sft_demo.yaml")); }
inline QString shape(const QString& name) {
  return sourcePath(QStringLiteral("resources/model-shapes/") + name);
}
inline QString testData(const QString& name) {
  return sourcePath(QStringLiteral("tests/ui/wizard/data/") + name);
}

// The SFT demo with absolute model and data paths, as a valid config; `overrides` are
// `key=value` lines applied as `--set` applies them.
inline studio::RunConfig demoRun(const QStringList& overrides = {}) {
  studio::RunConfig c = studio::load_config_file(demoConfig().toStdString()).config;
  c.model_name_or_path = demoModel().toStdString();
  c.dataset_dir = demoData().toStdString();
  c.output_dir = "saves/wizard-test";
  std::vector<std::string> sets;
  for (const QString& s : overrides) sets.push_back(s.toStdString());
  const auto problems = studio::apply_overrides(c, sets);
  if (!problems.empty()) qFatal("bad override: %s", studio::format_all(problems).c_str());
  return c;
}

// Waits until the draft's newest validation has arrived.
inline bool settled(studio::ui::RunDraft& draft) {
  return QTest::qWaitFor([&] { return !draft.validating(); }, 10000);
}

// A page's verdict once its draft's validation has arrived: complete or not, and its messages
// containing `message` (empty: no message at all). Fails the calling test otherwise.
inline void verifyPage(const studio::ui::WizardPage& page, bool complete, const QString& message) {
  QVERIFY(settled(*page.draft()));
  QCOMPARE(page.isComplete(), complete);
  if (message.isEmpty())
    QCOMPARE(page.messageText(), QString());
  else
    QVERIFY2(page.messageText().contains(message), qPrintable(page.messageText()));
}

// Sets the field named `key` on `page` from text: line edits take it as typed, spin boxes as a
// number, check boxes "true"/"false", combo boxes the item with this text.
inline bool setField(QWidget* page, const QString& key, const QString& value) {
  QWidget* w = page->findChild<QWidget*>(key);
  if (auto* e = qobject_cast<QLineEdit*>(w)) {
    e->setText(value);
  } else if (auto* s = qobject_cast<QSpinBox*>(w)) {
    s->setValue(value.toInt());
  } else if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) {
    d->setValue(value.toDouble());
  } else if (auto* c = qobject_cast<QCheckBox*>(w)) {
    c->setChecked(value == QLatin1String("true"));
  } else if (auto* b = qobject_cast<QComboBox*>(w)) {
    const int index = b->findText(value);
    if (index < 0) return false;
    b->setCurrentIndex(index);
  } else {
    return false;
  }
  return true;
}

// "key=value;key=value" through setField.
inline bool setFields(QWidget* page, const QString& settings) {
  for (const QString& kv : settings.split(QLatin1Char(';'), Qt::SkipEmptyParts)) {
    const int eq = static_cast<int>(kv.indexOf(QLatin1Char('=')));
    if (eq < 0 || !setField(page, kv.left(eq), kv.mid(eq + 1))) return false;
  }
  return true;
}

}  // namespace wizard_test
