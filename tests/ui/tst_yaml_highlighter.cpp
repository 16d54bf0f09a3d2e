// YamlHighlighter: which characters of a line get which format, read back from the layout of
// the document's block, and colour schemes that suit light and dark palettes.
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QtTest>

#include "studio/ui/editor/yaml_highlighter.h"

using studio::ui::YamlHighlighter;
using Token = YamlHighlighter::Token;

namespace {

constexpr int kPlain = -1;  // a span that must stay unformatted

// The highlighter's format at `pos` of the block, or an empty format.
QTextCharFormat formatAt(const QTextBlock& block, int pos) {
  for (const QTextLayout::FormatRange& r : block.layout()->formats())
    if (pos >= r.start && pos < r.start + r.length) return r.format;
  return {};
}

QPalette palette(const QColor& base, const QColor& text) {
  QPalette p;
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::Text, text);
  return p;
}

}  // namespace

class TestYamlHighlighter : public QObject {
  Q_OBJECT

 private slots:
  void span_data();
  void span();
  void schemes_data();
  void schemes();
  void paletteChangeRehighlights();
};

void TestYamlHighlighter::span_data() {
  QTest::addColumn<QString>("line");
  QTest::addColumn<int>("start");
  QTest::addColumn<int>("length");
  QTest::addColumn<int>("token");
  const auto row = [](const char* name, const char* line, int start, int length, int token) {
    QTest::newRow(name) << QString(line) << start << length << token;
  };
  const int key = int(Token::Key), number = int(Token::Number), keyword = int(Token::Keyword);
  const int string = int(Token::String), comment = int(Token::Comment);
  row("key", "learning_rate: 5.0e-6", 0, 13, key);
  row("colon after key is plain", "learning_rate: 5.0e-6", 13, 2, kPlain);
  row("float in scientific notation", "learning_rate: 5.0e-6", 15, 6, number);
  row("negative exponent upper case", "learning_rate: -1.5E-05", 15, 8, number);
  row("integer", "cutoff_len: 131072  # tokens", 12, 6, number);
  row("trailing comment", "cutoff_len: 131072  # tokens", 20, 8, comment);
  row("space before comment is plain", "cutoff_len: 131072  # tokens", 18, 2, kPlain);
  row("section header", "### model", 0, 9, int(Token::Section));
  row("indented section header", "  ### data", 2, 8, int(Token::Section));
  row("comment line", "# LLaMA-Factory example", 0, 23, comment);
  row("boolean", "bf16: true", 6, 4, keyword);
  row("capitalised boolean", "bf16: False", 6, 5, keyword);
  row("null", "ref_model: null", 11, 4, keyword);
  row("tilde", "ref_model: ~", 11, 1, keyword);
  row("plain string value", "stage: sft", 7, 3, kPlain);
  row("hyphenated plain value", "sequence_parallel_mode: zigzag-ring", 24, 11, kPlain);
  row("double-quoted string", "template: \"qwen\"", 10, 6, string);
  row("single-quoted string keeps #", "output_dir: 'saves/ #1'", 12, 11, string);
  row("hash inside a plain value", "dataset: a#b", 9, 3, kPlain);
  row("url in a value", "url: http://host:8080/x", 5, 18, kPlain);
  row("list dash", "  - long_docs", 2, 1, int(Token::Dash));
  row("list item string", "  - long_docs", 4, 9, kPlain);
  row("list item number", "- 42", 2, 2, number);
  row("indented key", "  min_lr_rate: 0.1", 2, 11, key);
  row("flow map key", "lr_scheduler_kwargs: {min_lr_rate: 0.1}", 22, 11, key);
  row("flow map value", "lr_scheduler_kwargs: {min_lr_rate: 0.1}", 35, 3, number);
  row("flow list item", "dataset: [a, \"b\"]", 13, 3, string);
  row("quoted key", "\"odd key\": 1", 0, 9, key);
}

void TestYamlHighlighter::span() {
  QFETCH(QString, line);
  QFETCH(int, start);
  QFETCH(int, length);
  QFETCH(int, token);

  // The line under test sits between others, as in a real file.
  QTextDocument doc;
  YamlHighlighter highlighter(&doc);
  doc.setPlainText(QStringLiteral("### model\n") + line + QStringLiteral("\nstage: sft\n"));
  highlighter.rehighlight();
  const QTextBlock block = doc.findBlockByNumber(1);
  QCOMPARE(block.text(), line);

  for (int pos = start; pos < start + length; ++pos) {
    const QTextCharFormat actual = formatAt(block, pos);
    if (token == kPlain) {
      QVERIFY2(!actual.hasProperty(QTextFormat::ForegroundBrush),
               qPrintable(QStringLiteral("position %1 is formatted").arg(pos)));
    } else {
      const QTextCharFormat expected = highlighter.format(Token(token));
      QVERIFY2(actual.foreground() == expected.foreground() &&
                   actual.fontWeight() == expected.fontWeight() &&
                   actual.fontItalic() == expected.fontItalic(),
               qPrintable(QStringLiteral("position %1 has the wrong format").arg(pos)));
    }
  }
}

void TestYamlHighlighter::schemes_data() {
  QTest::addColumn<QColor>("base");
  QTest::addColumn<QColor>("text");
  QTest::newRow("light") << QColor(Qt::white) << QColor(Qt::black);
  QTest::newRow("dark") << QColor(0x1e, 0x1e, 0x1e) << QColor(0xdd, 0xdd, 0xdd);
}

// Every token colour must stand out from the background it is drawn on.
void TestYamlHighlighter::schemes() {
  QFETCH(QColor, base);
  QFETCH(QColor, text);
  QTextDocument doc;
  YamlHighlighter highlighter(&doc);
  highlighter.setPalette(palette(base, text));
  for (Token t : {Token::Key, Token::Number, Token::Keyword, Token::String, Token::Comment,
                  Token::Section, Token::Dash}) {
    const QColor c = highlighter.format(t).foreground().color();
    QVERIFY2(
        qAbs(c.lightness() - base.lightness()) >= 80,
        qPrintable(QStringLiteral("token %1: %2 on %3").arg(int(t)).arg(c.name(), base.name())));
  }
  QVERIFY(highlighter.format(Token::Comment).fontItalic());
  QCOMPARE(highlighter.format(Token::Section).fontWeight(), int(QFont::Bold));
}

void TestYamlHighlighter::paletteChangeRehighlights() {
  QTextDocument doc;
  YamlHighlighter highlighter(&doc);
  highlighter.setPalette(palette(Qt::white, Qt::black));
  doc.setPlainText(QStringLiteral("cutoff_len: 4096\n"));
  const QColor light = formatAt(doc.firstBlock(), 0).foreground().color();
  highlighter.setPalette(palette(QColor(0x20, 0x20, 0x20), Qt::white));
  const QColor dark = formatAt(doc.firstBlock(), 0).foreground().color();
  QVERIFY(light != dark);
  QCOMPARE(dark, highlighter.format(Token::Key).foreground().color());
}

QTEST_MAIN(TestYamlHighlighter)
#include "tst_yaml_highlighter.moc"
