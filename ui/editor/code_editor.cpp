#include "studio/ui/editor/code_editor.h"

#include <QFontDatabase>
#include <QPainter>
#include <QTextBlock>

namespace studio::ui {

// The gutter is a child widget so it scrolls with the text but paints outside the viewport.
class CodeEditor::Gutter : public QWidget {
 public:
  explicit Gutter(CodeEditor* editor) : QWidget(editor), editor_(editor) {}
  QSize sizeHint() const override { return {editor_->gutterWidth(), 0}; }

 protected:
  void paintEvent(QPaintEvent* event) override { editor_->paintGutter(event); }

 private:
  CodeEditor* editor_;
};

CodeEditor::CodeEditor(QWidget* parent) : QPlainTextEdit(parent), gutter_(new Gutter(this)) {
  setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  setLineWrapMode(QPlainTextEdit::NoWrap);
  setTabChangesFocus(false);
  connect(this, &QPlainTextEdit::blockCountChanged, this, &CodeEditor::updateGutterWidth);
  connect(this, &QPlainTextEdit::updateRequest, this, &CodeEditor::updateGutter);
  connect(this, &QPlainTextEdit::cursorPositionChanged, this, &CodeEditor::highlightCurrentLine);
  updateGutterWidth();
  highlightCurrentLine();
}

int CodeEditor::markSize() const {
  return fontMetrics().height();
}

int CodeEditor::gutterWidth() const {
  int digits = 1;
  for (int n = qMax(1, blockCount()); n >= 10; n /= 10) ++digits;
  const int pad = fontMetrics().horizontalAdvance(QLatin1Char(' '));
  return markSize() + pad + fontMetrics().horizontalAdvance(QLatin1Char('9')) * digits + pad;
}

void CodeEditor::updateGutterWidth() {
  setViewportMargins(gutterWidth(), 0, 0, 0);
}

void CodeEditor::updateGutter(const QRect& rect, int dy) {
  if (dy != 0)
    gutter_->scroll(0, dy);
  else
    gutter_->update(0, rect.y(), gutter_->width(), rect.height());
}

void CodeEditor::resizeEvent(QResizeEvent* event) {
  QPlainTextEdit::resizeEvent(event);
  const QRect r = contentsRect();
  gutter_->setGeometry(QRect(r.left(), r.top(), gutterWidth(), r.height()));
}

void CodeEditor::changeEvent(QEvent* event) {
  QPlainTextEdit::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) {
    highlightCurrentLine();
    emit paletteChanged();
  } else if (event->type() == QEvent::FontChange) {
    updateGutterWidth();
  }
}

void CodeEditor::paintGutter(QPaintEvent* event) {
  QPainter painter(gutter_);
  painter.fillRect(event->rect(), palette().color(QPalette::Window));
  const int current = textCursor().blockNumber();
  const int size = markSize();
  const int pad = fontMetrics().horizontalAdvance(QLatin1Char(' '));
  QTextBlock block = firstVisibleBlock();
  int top = qRound(blockBoundingGeometry(block).translated(contentOffset()).top());
  while (block.isValid() && top <= event->rect().bottom()) {
    const int height = qRound(blockBoundingRect(block).height());
    if (block.isVisible() && top + height >= event->rect().top()) {
      const int line = block.blockNumber() + 1;
      if (auto mark = marks_.find(line); mark != marks_.end())
        mark->second.paint(&painter, QRect(pad / 2, top, size, size));
      painter.setPen(palette().color(block.blockNumber() == current ? QPalette::WindowText
                                                                    : QPalette::PlaceholderText));
      painter.drawText(QRect(0, top, gutter_->width() - pad, height), Qt::AlignRight,
                       QString::number(line));
    }
    top += height;
    block = block.next();
  }
}

void CodeEditor::highlightCurrentLine() {
  QTextEdit::ExtraSelection line;
  QColor tint = palette().color(QPalette::Highlight);
  tint.setAlpha(48);  // a tint of the selection colour keeps the text readable in any palette
  line.format.setBackground(tint);
  line.format.setProperty(QTextFormat::FullWidthSelection, true);
  line.cursor = textCursor();
  line.cursor.clearSelection();
  setExtraSelections({line});
  gutter_->update();  // the current line number is drawn stronger
}

void CodeEditor::goTo(int line, int column) {
  QTextBlock block = document()->findBlockByNumber(qMax(line, 1) - 1);
  if (!block.isValid()) block = document()->lastBlock();
  const int offset = qBound(0, column - 1, qMax(0, block.length() - 1));
  QTextCursor cursor(block);
  cursor.setPosition(block.position() + offset);
  setTextCursor(cursor);
  centerCursor();
  setFocus(Qt::OtherFocusReason);
}

void CodeEditor::setLineMarks(std::map<int, QIcon> marks) {
  marks_ = std::move(marks);
  gutter_->update();
}

}  // namespace studio::ui
