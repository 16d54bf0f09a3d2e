#pragma once
// The problems of one wizard page, shown under its fields as they change: one row per message
// with an error or warning icon. Empty pages show nothing.
#include <vector>

#include <QString>
#include <QWidget>

#include "studio/config/diagnostic.h"

class QVBoxLayout;

namespace studio::ui {

struct InlineMessage {
  studio::Severity severity = studio::Severity::Error;
  QString text;
};

class InlineMessages : public QWidget {
  Q_OBJECT

 public:
  explicit InlineMessages(QWidget* parent = nullptr);

  void setMessages(const std::vector<InlineMessage>& messages);
  const std::vector<InlineMessage>& messages() const { return messages_; }
  // The messages as plain text, one per line, errors first.
  QString text() const;
  int errorCount() const;

 private:
  QVBoxLayout* rows_;
  std::vector<InlineMessage> messages_;
};

}  // namespace studio::ui
