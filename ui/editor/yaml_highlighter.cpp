#include "studio/ui/editor/yaml_highlighter.h"

#include <QGuiApplication>
#include <QRegularExpression>

namespace studio::ui {
namespace {

using Token = YamlHighlighter::Token;

struct Scheme {
  QColor key, number, keyword, string, section, dash;
};

// Two hand-tuned schemes, each readable on its own kind of background; comments are blended
// from the palette itself so they always sit between text and background.
const Scheme kLight{QColor(0x0b, 0x4f, 0x9c), QColor(0xa8, 0x4b, 0x00), QColor(0x86, 0x1f, 0xa6),
                    QColor(0x1b, 0x7a, 0x2e), QColor(0x00, 0x6d, 0x77), QColor(0xb3, 0x26, 0x1e)};
const Scheme kDark{QColor(0x79, 0xb8, 0xff), QColor(0xff, 0xab, 0x70), QColor(0xd2, 0xa8, 0xff),
                   QColor(0x85, 0xe8, 0x9d), QColor(0x56, 0xd4, 0xdd), QColor(0xff, 0x7b, 0x72)};

QColor blend(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(static_cast<float>(a.redF() * (1 - t) + b.redF() * t),
                          static_cast<float>(a.greenF() * (1 - t) + b.greenF() * t),
                          static_cast<float>(a.blueF() * (1 - t) + b.blueF() * t));
}

QTextCharFormat coloured(const QColor& colour, bool bold = false, bool italic = false) {
  QTextCharFormat f;
  f.setForeground(colour);
  if (bold) f.setFontWeight(QFont::Bold);
  f.setFontItalic(italic);
  return f;
}

int skipSpaces(const QString& text, int pos, int end) {
  while (pos < end && text[pos].isSpace()) ++pos;
  return pos;
}

int trimEnd(const QString& text, int begin, int end) {
  while (end > begin && text[end - 1].isSpace()) --end;
  return end;
}

// Index just past the quoted string starting at `pos`, or `end` when it is not closed.
int skipQuoted(const QString& text, int pos, int end) {
  const QChar quote = text[pos];
  for (int i = pos + 1; i < end; ++i) {
    if (quote == u'"' && text[i] == u'\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == u'\'' && i + 1 < end && text[i + 1] == u'\'') {
        ++i;  // '' is an escaped quote inside single quotes
        continue;
      }
      return i + 1;
    }
  }
  return end;
}

bool isQuote(QChar c) {
  return c == u'"' || c == u'\'';
}

// A `#` starts a comment at the line start or after white space, outside quotes.
int commentStart(const QString& text) {
  for (int i = 0; i < text.size(); ++i) {
    if (isQuote(text[i]) && (i == 0 || !text[i - 1].isLetterOrNumber())) {
      i = skipQuoted(text, i, text.size()) - 1;
    } else if (text[i] == u'#' && (i == 0 || text[i - 1].isSpace())) {
      return i;
    }
  }
  return -1;
}

// The colon ending the key of a `key: value` entry in [begin, end), or -1.
int keyColon(const QString& text, int begin, int end) {
  int i = begin;
  if (i < end && isQuote(text[i])) i = skipQuoted(text, i, end);
  for (; i < end; ++i) {
    if (text[i] == u':' && (i + 1 == end || text[i + 1].isSpace())) return i;
  }
  return -1;
}

bool isKeyword(const QString& value) {
  static const QRegularExpression re(QStringLiteral(
      "^(?:true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|"
      "null|Null|NULL|~)$"));
  return re.match(value).hasMatch();
}

bool isNumber(const QString& value) {
  static const QRegularExpression re(
      QStringLiteral("^(?:[-+]?(?:\\d[\\d_]*(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|"
                     "0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN))$"));
  return re.match(value).hasMatch();
}

}  // namespace

YamlHighlighter::YamlHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  setPalette(QGuiApplication::palette());
}

void YamlHighlighter::setPalette(const QPalette& palette) {
  // The editor paints text on Base, so Base (not Window) decides light or dark.
  const bool dark = palette.color(QPalette::Base).lightness() < 128;
  const Scheme& s = dark ? kDark : kLight;
  const QColor comment = blend(palette.color(QPalette::Text), palette.color(QPalette::Base), 0.45);
  formats_[static_cast<int>(Token::Key)] = coloured(s.key);
  formats_[static_cast<int>(Token::Number)] = coloured(s.number);
  formats_[static_cast<int>(Token::Keyword)] = coloured(s.keyword);
  formats_[static_cast<int>(Token::String)] = coloured(s.string);
  formats_[static_cast<int>(Token::Comment)] = coloured(comment, false, true);
  formats_[static_cast<int>(Token::Section)] = coloured(s.section, true);
  formats_[static_cast<int>(Token::Dash)] = coloured(s.dash, true);
  rehighlight();
}

QTextCharFormat YamlHighlighter::format(Token token) const {
  return formats_[static_cast<int>(token)];
}

void YamlHighlighter::apply(Token token, int begin, int end) {
  if (end > begin) setFormat(begin, end - begin, format(token));
}

void YamlHighlighter::highlightBlock(const QString& text) {
  const int indent = skipSpaces(text, 0, text.size());
  if (QStringView(text).mid(indent).startsWith(u"###")) {
    apply(Token::Section, indent, text.size());
    return;
  }
  const int comment = commentStart(text);
  highlightContent(text, indent, comment < 0 ? text.size() : comment);
  if (comment >= 0) apply(Token::Comment, comment, text.size());
}

// Block context: list dashes, then one entry.
void YamlHighlighter::highlightContent(const QString& text, int begin, int end) {
  int pos = begin;
  while (pos < end && text[pos] == u'-' && (pos + 1 == end || text[pos + 1].isSpace())) {
    apply(Token::Dash, pos, pos + 1);
    pos = skipSpaces(text, pos + 1, end);
  }
  highlightEntry(text, pos, end);
}

// `key: value` or a bare value.
void YamlHighlighter::highlightEntry(const QString& text, int begin, int end) {
  int pos = skipSpaces(text, begin, end);
  end = trimEnd(text, pos, end);
  const int colon = keyColon(text, pos, end);
  if (colon >= 0) {
    apply(Token::Key, pos, trimEnd(text, pos, colon));
    pos = skipSpaces(text, colon + 1, end);
  }
  if (pos < end && (text[pos] == u'{' || text[pos] == u'['))
    highlightFlow(text, pos, end);
  else
    highlightScalar(text, pos, end);
}

// `{a: 1, b: [x, y]}`: each item between the brackets and commas is an entry of its own.
void YamlHighlighter::highlightFlow(const QString& text, int begin, int end) {
  int item = begin;
  for (int i = begin; i <= end; ++i) {
    if (i < end && isQuote(text[i])) {
      i = skipQuoted(text, i, end) - 1;
      continue;
    }
    if (i == end || text[i] == u'{' || text[i] == u'}' || text[i] == u'[' || text[i] == u']' ||
        text[i] == u',') {
      highlightEntry(text, item, i);
      item = i + 1;
    }
  }
}

void YamlHighlighter::highlightScalar(const QString& text, int begin, int end) {
  if (begin >= end) return;
  if (isQuote(text[begin])) {
    apply(Token::String, begin, skipQuoted(text, begin, end));
    return;
  }
  const QString value = text.mid(begin, end - begin);
  if (isKeyword(value))
    apply(Token::Keyword, begin, end);
  else if (isNumber(value))
    apply(Token::Number, begin, end);
}

}  // namespace studio::ui
