#pragma once
// Syntax highlighting for LLaMA-Factory training YAML: keys, scalars, comments, `###` section
// headers and list dashes. Line-based, since these files are flat `key: value` mappings.
#include <array>

#include <QPalette>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace studio::ui {

class YamlHighlighter : public QSyntaxHighlighter {
  Q_OBJECT

 public:
  enum class Token { Key, Number, Keyword, String, Comment, Section, Dash };

  // Starts with the application palette; call setPalette with the editor's palette.
  explicit YamlHighlighter(QTextDocument* document);

  // Picks a light or a dark colour scheme to suit the palette's base colour and re-highlights.
  void setPalette(const QPalette& palette);
  QTextCharFormat format(Token token) const;

 protected:
  void highlightBlock(const QString& text) override;

 private:
  void highlightContent(const QString& text, int begin, int end);
  void highlightFlow(const QString& text, int begin, int end);
  void highlightEntry(const QString& text, int begin, int end);
  void highlightScalar(const QString& text, int begin, int end);
  void apply(Token token, int begin, int end);

  std::array<QTextCharFormat, 7> formats_;
};

}  // namespace studio::ui
