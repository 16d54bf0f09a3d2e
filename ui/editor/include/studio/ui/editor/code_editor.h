#pragma once
// A plain-text editor for config files: fixed-width font, a line-number gutter with per-line
// marks (icons for lines with problems), the cursor's line highlighted, and jumping to a place.
#include <map>

#include <QIcon>
#include <QPlainTextEdit>

namespace studio::ui {

class CodeEditor : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit CodeEditor(QWidget* parent = nullptr);

  // Moves the cursor to a 1-based line and column (clamped to the text), shows it, focuses.
  void goTo(int line, int column);
  // Icons drawn in the gutter beside 1-based lines; replaces the previous marks.
  void setLineMarks(std::map<int, QIcon> marks);
  const std::map<int, QIcon>& lineMarks() const { return marks_; }
  int gutterWidth() const;

 signals:
  void paletteChanged();

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  class Gutter;

  void paintGutter(QPaintEvent* event);
  void updateGutterWidth();
  void updateGutter(const QRect& rect, int dy);
  void highlightCurrentLine();
  int markSize() const;

  Gutter* gutter_;
  std::map<int, QIcon> marks_;
};

}  // namespace studio::ui
