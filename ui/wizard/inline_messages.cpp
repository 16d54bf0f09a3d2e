#include "studio/ui/wizard/inline_messages.h"

#include <algorithm>

#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>
#include <QVBoxLayout>

namespace studio::ui {

InlineMessages::InlineMessages(QWidget* parent) : QWidget(parent), rows_(new QVBoxLayout(this)) {
  rows_->setContentsMargins(0, 0, 0, 0);
  setObjectName(QStringLiteral("messages"));
  hide();
}

void InlineMessages::setMessages(const std::vector<InlineMessage>& messages) {
  messages_ = messages;
  std::stable_sort(messages_.begin(), messages_.end(), [](const auto& a, const auto& b) {
    return a.severity == studio::Severity::Error && b.severity != studio::Severity::Error;
  });
  while (QLayoutItem* item = rows_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  const int size = style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, this);
  for (const InlineMessage& m : messages_) {
    auto* row = new QWidget;
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* icon = new QLabel;
    icon->setPixmap(style()
                        ->standardIcon(m.severity == studio::Severity::Error
                                           ? QStyle::SP_MessageBoxCritical
                                           : QStyle::SP_MessageBoxWarning)
                        .pixmap(size));
    icon->setAlignment(Qt::AlignTop);
    auto* text = new QLabel(m.text);
    text->setTextFormat(Qt::PlainText);
    text->setWordWrap(true);
    text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(icon);
    layout->addWidget(text, 1);
    rows_->addWidget(row);
  }
  setVisible(!messages_.empty());
}

QString InlineMessages::text() const {
  QStringList lines;
  for (const InlineMessage& m : messages_) lines << m.text;
  return lines.join(QLatin1Char('\n'));
}

int InlineMessages::errorCount() const {
  return static_cast<int>(std::count_if(messages_.begin(), messages_.end(), [](const auto& m) {
    return m.severity == studio::Severity::Error;
  }));
}

}  // namespace studio::ui
