#pragma once
// Widgets bound to RunConfig fields. Each one is named after its YAML key (objectName), carries
// the key's help text from the key table as its tooltip, writes its value into the RunDraft as
// the user changes it, and is re-read from the draft when the draft is loaded or assigned. The
// values shown first are therefore RunConfig{}'s defaults (LLaMA-Factory's), never re-typed here.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <QComboBox>
#include <QMap>
#include <QObject>
#include <QSignalBlocker>
#include <QString>
#include <QStringList>

#include "studio/config/run_config.h"
#include "studio/ui/wizard/run_draft.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;
class QWidget;

namespace studio::ui {

class FieldBindings : public QObject {
  Q_OBJECT

 public:
  FieldBindings(RunDraft* draft, QObject* parent);

  QSpinBox* integer(const char* key, int64_t studio::RunConfig::*field, int minimum, int maximum);
  // -1 shows `unsetText` and means the key is unset (null).
  QSpinBox* optionalInteger(const char* key, std::optional<int64_t> studio::RunConfig::*field,
                            int maximum, const QString& unsetText);
  QDoubleSpinBox* real(const char* key, double studio::RunConfig::*field, double minimum,
                       double maximum, int decimals);
  // A number typed as text ("5e-5", "1.0e-5"): text that is not a number is a problem().
  QLineEdit* number(const char* key, double studio::RunConfig::*field);
  // As number(); empty text means the key is unset.
  QLineEdit* optionalNumber(const char* key, std::optional<double> studio::RunConfig::*field);
  QCheckBox* flag(const char* key, bool studio::RunConfig::*field, const QString& text);
  QLineEdit* text(const char* key, std::string studio::RunConfig::*field);
  // Empty text means the key is unset.
  QLineEdit* optionalText(const char* key, std::optional<std::string> studio::RunConfig::*field);
  // Names separated by commas, as LLaMA-Factory writes lists ("q_proj,v_proj"); empty names are
  // skipped while typing. Empty text means RunConfig{}'s value (lora_target: all), so that a
  // placeholder can show it.
  QLineEdit* list(const char* key, std::vector<std::string> studio::RunConfig::*field);
  // A choice among `values`; a value outside them (an imported one) is added and marked.
  QComboBox* textChoice(const char* key, std::string studio::RunConfig::*field,
                        const std::vector<std::string>& values);

  template <class Enum>
  QComboBox* choice(const char* key, Enum studio::RunConfig::*field,
                    const std::vector<Enum>& values) {
    auto* box = new QComboBox;
    for (Enum v : values)
      box->addItem(QString::fromUtf8(to_string(v).data(), static_cast<int>(to_string(v).size())),
                   static_cast<int>(v));
    prepare(box, key);
    connect(box, &QComboBox::currentIndexChanged, this, [this, box, field] {
      const Enum v = static_cast<Enum>(box->currentData().toInt());
      draft_->edit([&](studio::RunConfig& c) { c.*field = v; });
    });
    addReader([this, box, field] {
      const QSignalBlocker block(box);
      box->setCurrentIndex(box->findData(static_cast<int>(draft_->config().*field)));
    });
    return box;
  }

  // Widgets <- the draft's config.
  void refresh();
  // Text that cannot be written to the config, as "key: why".
  QStringList problems() const { return problems_.values(); }

 signals:
  void problemsChanged();

 private:
  void prepare(QWidget* widget, const char* key);
  void addReader(std::function<void()> read);
  void setProblem(const char* key, const QString& problem);

  RunDraft* draft_;
  std::vector<std::function<void()>> readers_;
  QMap<QString, QString> problems_;
};

}  // namespace studio::ui
