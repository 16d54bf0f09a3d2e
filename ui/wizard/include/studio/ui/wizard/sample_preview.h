#pragma once
// The first samples as training will see them (data::preview): each one's text with the masked
// spans (prompt, history: not learned) in grey and the learned spans in the normal text colour,
// under a legend saying so. DPO samples show chosen and rejected.
#include <optional>

#include <QColor>
#include <QTextBrowser>

#include "studio/data/preview.h"

namespace studio::ui {

class SamplePreview : public QTextBrowser {
  Q_OBJECT

 public:
  explicit SamplePreview(QWidget* parent = nullptr);

  void setReport(const studio::data::PreviewReport& report);
  // A line in place of samples: why there are none (no model yet, an error).
  void setNotice(const QString& text);
  const std::optional<studio::data::PreviewReport>& report() const { return report_; }
  // The colour of masked text, from the palette (placeholder text: grey in light and dark themes).
  QColor maskedColor() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void render();

  std::optional<studio::data::PreviewReport> report_;
  QString notice_;
};

}  // namespace studio::ui
