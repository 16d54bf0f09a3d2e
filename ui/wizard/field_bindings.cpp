#include "studio/ui/wizard/field_bindings.h"

#include <algorithm>

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>

#include "studio/config/config_schema.h"

namespace studio::ui {
namespace {

// Numbers as LLaMA-Factory files write them: 5e-05, 0.1, 3.
QString formatNumber(double v) {
  return QString::number(v, 'g', 12);
}

}  // namespace

FieldBindings::FieldBindings(RunDraft* draft, QObject* parent) : QObject(parent), draft_(draft) {
  connect(draft_, &RunDraft::loaded, this, &FieldBindings::refresh);
}

void FieldBindings::prepare(QWidget* widget, const char* key) {
  widget->setObjectName(QString::fromLatin1(key));
  // What a screen reader names it: the config key its label shows, and the key's help.
  widget->setAccessibleName(QString::fromLatin1(key));
  if (const studio::FieldSpec* f = studio::find_field(key)) {
    QString tip = QString::fromUtf8(f->help.data(), static_cast<int>(f->help.size()));
    if (!f->allowed.empty()) tip += tr(" (allowed: %1)").arg(QString::fromStdString(f->allowed));
    widget->setToolTip(QStringLiteral("%1: %2").arg(QString::fromLatin1(key), tip));
    widget->setAccessibleDescription(tip);
  }
}

void FieldBindings::addReader(std::function<void()> read) {
  read();
  readers_.push_back(std::move(read));
}

void FieldBindings::refresh() {
  for (const auto& read : readers_) read();
  if (!problems_.isEmpty()) {
    problems_.clear();  // the widgets show the loaded values again
    emit problemsChanged();
  }
}

void FieldBindings::setProblem(const char* key, const QString& problem) {
  const QString k = QString::fromLatin1(key);
  if (problems_.value(k) == problem) return;
  if (problem.isEmpty())
    problems_.remove(k);
  else
    problems_.insert(k, problem);
  emit problemsChanged();
}

QSpinBox* FieldBindings::integer(const char* key, int64_t studio::RunConfig::*field, int minimum,
                                 int maximum) {
  auto* box = new QSpinBox;
  box->setRange(minimum, maximum);
  prepare(box, key);
  connect(box, &QSpinBox::valueChanged, this,
          [this, field](int v) { draft_->edit([&](studio::RunConfig& c) { c.*field = v; }); });
  addReader([this, box, field] {
    const QSignalBlocker block(box);
    box->setValue(static_cast<int>(std::clamp<int64_t>(draft_->config().*field, box->minimum(),
                                                       box->maximum())));
  });
  return box;
}

QSpinBox* FieldBindings::optionalInteger(const char* key,
                                         std::optional<int64_t> studio::RunConfig::*field,
                                         int maximum, const QString& unsetText) {
  auto* box = new QSpinBox;
  box->setRange(-1, maximum);
  box->setSpecialValueText(unsetText);
  prepare(box, key);
  connect(box, &QSpinBox::valueChanged, this, [this, field](int v) {
    draft_->edit([&](studio::RunConfig& c) {
      c.*field = v < 0 ? std::nullopt : std::optional<int64_t>(v);
    });
  });
  addReader([this, box, field] {
    const QSignalBlocker block(box);
    const auto& v = draft_->config().*field;
    box->setValue(v ? static_cast<int>(std::clamp<int64_t>(*v, 0, box->maximum())) : -1);
  });
  return box;
}

QDoubleSpinBox* FieldBindings::real(const char* key, double studio::RunConfig::*field,
                                    double minimum, double maximum, int decimals) {
  auto* box = new QDoubleSpinBox;
  box->setDecimals(decimals);
  box->setRange(minimum, maximum);
  box->setSingleStep(decimals > 1 ? 0.01 : 1.0);
  prepare(box, key);
  connect(box, &QDoubleSpinBox::valueChanged, this,
          [this, field](double v) { draft_->edit([&](studio::RunConfig& c) { c.*field = v; }); });
  addReader([this, box, field] {
    const QSignalBlocker block(box);
    box->setValue(draft_->config().*field);
  });
  return box;
}

QLineEdit* FieldBindings::number(const char* key, double studio::RunConfig::*field) {
  auto* edit = new QLineEdit;
  prepare(edit, key);
  connect(edit, &QLineEdit::textChanged, this, [this, key, field](const QString& text) {
    double v = 0;
    if (!studio::parse_double(text.trimmed().toStdString(), v)) {
      setProblem(key, tr("%1: '%2' is not a number (write e.g. 5e-5 or 0.00005)")
                          .arg(QString::fromLatin1(key), text));
      return;
    }
    setProblem(key, {});
    draft_->edit([&](studio::RunConfig& c) { c.*field = v; });
  });
  addReader([this, edit, field] {
    const QSignalBlocker block(edit);
    edit->setText(formatNumber(draft_->config().*field));
  });
  return edit;
}

QLineEdit* FieldBindings::optionalNumber(const char* key,
                                         std::optional<double> studio::RunConfig::*field) {
  auto* edit = new QLineEdit;
  prepare(edit, key);
  connect(edit, &QLineEdit::textChanged, this, [this, key, field](const QString& text) {
    const std::string typed = text.trimmed().toStdString();
    double v = 0;
    if (!typed.empty() && !studio::parse_double(typed, v)) {
      setProblem(key, tr("%1: '%2' is not a number (write e.g. 16 or 0.5, or nothing for the "
                         "default)")
                          .arg(QString::fromLatin1(key), text));
      return;
    }
    setProblem(key, {});
    draft_->edit([&](studio::RunConfig& c) {
      c.*field = typed.empty() ? std::nullopt : std::optional<double>(v);
    });
  });
  addReader([this, edit, field] {
    const QSignalBlocker block(edit);
    const auto& v = draft_->config().*field;
    edit->setText(v ? formatNumber(*v) : QString());
  });
  return edit;
}

QCheckBox* FieldBindings::flag(const char* key, bool studio::RunConfig::*field,
                               const QString& text) {
  auto* box = new QCheckBox(text);
  prepare(box, key);
  connect(box, &QCheckBox::toggled, this,
          [this, field](bool v) { draft_->edit([&](studio::RunConfig& c) { c.*field = v; }); });
  addReader([this, box, field] {
    const QSignalBlocker block(box);
    box->setChecked(draft_->config().*field);
  });
  return box;
}

QLineEdit* FieldBindings::text(const char* key, std::string studio::RunConfig::*field) {
  auto* edit = new QLineEdit;
  prepare(edit, key);
  connect(edit, &QLineEdit::textChanged, this, [this, field](const QString& text) {
    draft_->edit([&](studio::RunConfig& c) { c.*field = text.trimmed().toStdString(); });
  });
  addReader([this, edit, field] {
    const QSignalBlocker block(edit);
    edit->setText(QString::fromStdString(draft_->config().*field));
  });
  return edit;
}

QLineEdit* FieldBindings::optionalText(const char* key,
                                       std::optional<std::string> studio::RunConfig::*field) {
  auto* edit = new QLineEdit;
  prepare(edit, key);
  connect(edit, &QLineEdit::textChanged, this, [this, field](const QString& text) {
    const std::string v = text.trimmed().toStdString();
    draft_->edit([&](studio::RunConfig& c) {
      c.*field = v.empty() ? std::nullopt : std::optional<std::string>(v);
    });
  });
  addReader([this, edit, field] {
    const QSignalBlocker block(edit);
    const auto& v = draft_->config().*field;
    edit->setText(v ? QString::fromStdString(*v) : QString());
  });
  return edit;
}

QLineEdit* FieldBindings::list(const char* key,
                               std::vector<std::string> studio::RunConfig::*field) {
  auto* edit = new QLineEdit;
  prepare(edit, key);
  connect(edit, &QLineEdit::textChanged, this, [this, field](const QString& text) {
    std::vector<std::string> names;
    for (const QString& name : text.split(QLatin1Char(','), Qt::SkipEmptyParts))
      if (!name.trimmed().isEmpty()) names.push_back(name.trimmed().toStdString());
    if (names.empty()) names = studio::RunConfig{}.*field;
    draft_->edit([&](studio::RunConfig& c) { c.*field = std::move(names); });
  });
  addReader([this, edit, field] {
    const QSignalBlocker block(edit);
    QStringList names;
    for (const std::string& name : draft_->config().*field) names << QString::fromStdString(name);
    edit->setText(names.join(QLatin1Char(',')));
  });
  return edit;
}

QComboBox* FieldBindings::textChoice(const char* key, std::string studio::RunConfig::*field,
                                     const std::vector<std::string>& values) {
  auto* box = new QComboBox;
  prepare(box, key);
  connect(box, &QComboBox::currentIndexChanged, this, [this, box, field] {
    const std::string v = box->currentData().toString().toStdString();
    draft_->edit([&](studio::RunConfig& c) { c.*field = v; });
  });
  addReader([this, box, field, values] {
    const QSignalBlocker block(box);
    box->clear();
    const std::string& current = draft_->config().*field;
    if (current.empty()) box->addItem(tr("(choose)"), QString());
    for (const std::string& v : values)
      box->addItem(QString::fromStdString(v), QString::fromStdString(v));
    if (!current.empty() && std::find(values.begin(), values.end(), current) == values.end())
      box->addItem(tr("%1 (not known)").arg(QString::fromStdString(current)),
                   QString::fromStdString(current));
    box->setCurrentIndex(box->findData(QString::fromStdString(current)));
  });
  return box;
}

}  // namespace studio::ui
