#include "studio/ui/wizard/sample_preview.h"

#include <QEvent>
#include <QFontDatabase>
#include <QTextCursor>

namespace studio::ui {
namespace {

void writeSequence(QTextCursor& cursor, const studio::data::PreviewSequence& seq,
                   const QTextCharFormat& learned, const QTextCharFormat& masked) {
  for (const auto& span : seq.spans)
    cursor.insertText(QString::fromStdString(span.text), span.learned ? learned : masked);
  cursor.insertBlock();
}

}  // namespace

SamplePreview::SamplePreview(QWidget* parent) : QTextBrowser(parent) {
  setObjectName(QStringLiteral("samplePreview"));
  setAccessibleName(tr("Sample preview"));
  setOpenLinks(false);
  setLineWrapMode(QTextEdit::WidgetWidth);
}

QColor SamplePreview::maskedColor() const {
  return palette().color(QPalette::PlaceholderText);
}

void SamplePreview::setReport(const studio::data::PreviewReport& report) {
  report_ = report;
  notice_.clear();
  render();
}

void SamplePreview::setNotice(const QString& text) {
  report_.reset();
  notice_ = text;
  render();
}

void SamplePreview::changeEvent(QEvent* event) {
  QTextBrowser::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) render();
}

void SamplePreview::render() {
  clear();
  QTextCursor cursor(document());
  QTextCharFormat plain;
  plain.setForeground(palette().color(QPalette::Text));
  if (!report_) {
    cursor.insertText(notice_, plain);
    return;
  }
  QTextCharFormat heading = plain;
  heading.setFontWeight(QFont::Bold);
  QTextCharFormat learned = plain;
  learned.setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  QTextCharFormat masked = learned;
  masked.setForeground(maskedColor());

  const bool rm = report_->stage == studio::Stage::Rm;
  if (rm) {
    // A reward model learns no tokens: the labels only mark the response.
    cursor.insertText(tr("Stage rm learns no tokens: each chosen and rejected sequence is scored "
                         "at its last token, and the chosen one must score higher (grey: the "
                         "prompt, normal colour: the response)"),
                      plain);
  } else {
    cursor.insertText(tr("Legend: "), plain);
    cursor.insertText(tr("grey text is masked (not learned)"), masked);
    cursor.insertText(QStringLiteral(", "), plain);
    cursor.insertText(tr("text in the normal colour is learned"), learned);
  }
  cursor.insertBlock();
  const bool dpo = report_->stage == studio::Stage::Dpo || rm;
  const bool kto = report_->stage == studio::Stage::Kto;
  if (kto) {
    cursor.insertBlock();
    cursor.insertText(tr("Each example is its prompt with its own response, marked desirable or "
                         "undesirable; its KL sequence, the same prompt with the previous row's "
                         "response (as LLaMA-Factory pairs them), is only scored."),
                      plain);
    cursor.insertBlock();
  }
  for (const auto& s : report_->samples) {
    cursor.insertBlock();
    QString head = tr("%1, row %2: ").arg(QString::fromStdString(s.dataset)).arg(s.row);
    if (kto)
      head += tr("%1, %2 tokens, %3 learned; KL %4 tokens")
                  .arg(s.desirable ? tr("desirable") : tr("undesirable"))
                  .arg(s.sequence.tokens)
                  .arg(s.sequence.learned_tokens)
                  .arg(s.kl.tokens);
    else
      head += dpo ? tr("%1 / %2 tokens (chosen / rejected)").arg(s.chosen.tokens).arg(s.rejected.tokens)
                  : tr("%1 tokens, %2 learned").arg(s.sequence.tokens).arg(s.sequence.learned_tokens);
    if (s.truncated) head += tr(", truncated from %1").arg(s.full_length);
    cursor.insertText(head, heading);
    cursor.insertBlock();
    if (dpo) {
      cursor.insertText(tr("chosen:"), heading);
      cursor.insertBlock();
      writeSequence(cursor, s.chosen, learned, masked);
      cursor.insertText(tr("rejected:"), heading);
      cursor.insertBlock();
      writeSequence(cursor, s.rejected, learned, masked);
    } else if (kto) {
      cursor.insertText(s.desirable ? tr("target (desirable):") : tr("target (undesirable):"),
                        heading);
      cursor.insertBlock();
      writeSequence(cursor, s.sequence, learned, masked);
      cursor.insertText(tr("KL sequence (scored, not learned):"), heading);
      cursor.insertBlock();
      writeSequence(cursor, s.kl, learned, masked);
    } else {
      writeSequence(cursor, s.sequence, learned, masked);
    }
  }
  moveCursor(QTextCursor::Start);
}

}  // namespace studio::ui
