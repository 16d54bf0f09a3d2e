#include "studio/ui/chat/chat_pane.h"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QScrollBar>
#include <QTextBrowser>
#include <QTextCursor>
#include <QVBoxLayout>

#include "studio/ui/chat/chat_session.h"

namespace studio::ui {
namespace {

// The picker's item data of the Browse... entry; model entries hold their folder.
const QString kBrowseItem = QStringLiteral("\x01browse");

// What the transcript's lines are, for their look.
enum LineKind { Speaker, Text, Stats, Note, Error };

QString stopReason(const QString& stop) {
  if (stop == QLatin1String("eos")) return ChatPane::tr("end of sequence");
  if (stop == QLatin1String("stop_word")) return ChatPane::tr("stop word");
  if (stop == QLatin1String("length")) return ChatPane::tr("max new tokens reached");
  if (stop == QLatin1String("cancelled")) return ChatPane::tr("stopped");
  return stop;
}

QString templateSource(const QString& source) {
  if (source == QLatin1String("--template")) return ChatPane::tr("chosen here");
  if (source == QLatin1String("config.yaml")) return ChatPane::tr("from the run's config.yaml");
  if (source == QLatin1String("guessed")) return ChatPane::tr("guessed from the tokenizer");
  return source;
}

}  // namespace

ChatPane::ChatPane(const QString& side, QWidget* parent)
    : QWidget(parent),
      picker_(new QComboBox),
      status_(new QLabel),
      transcript_(new QTextBrowser),
      session_(new ChatSession(this)) {
  setObjectName(QStringLiteral("chatPane") + side);
  setAccessibleName(tr("%1 chat").arg(side));
  picker_->setObjectName(QStringLiteral("modelPicker"));
  picker_->setAccessibleName(tr("%1 model").arg(side));
  picker_->setPlaceholderText(tr("No model in this run yet"));
  picker_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  picker_->setMinimumContentsLength(24);
  status_->setObjectName(QStringLiteral("modelStatus"));
  status_->setAccessibleName(tr("%1 model status").arg(side));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  transcript_->setObjectName(QStringLiteral("transcript"));
  transcript_->setAccessibleName(tr("%1 conversation").arg(side));
  transcript_->setOpenLinks(false);

  auto* pickerRow = new QHBoxLayout;
  auto* label = new QLabel(tr("&Model:"));
  label->setBuddy(picker_);
  pickerRow->addWidget(label);
  pickerRow->addWidget(picker_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(pickerRow);
  layout->addWidget(status_);
  layout->addWidget(transcript_, 1);

  flush_.setSingleShot(true);
  flush_.setInterval(kFlushMs);
  connect(&flush_, &QTimer::timeout, this, &ChatPane::flushTokens);
  connect(picker_, &QComboBox::currentIndexChanged, this, &ChatPane::onPicked);
  connect(picker_, &QComboBox::activated, this, [this](int index) {
    if (picker_->itemData(index).toString() == kBrowseItem) browse();
  });
  connect(session_, &ChatSession::ready, this, &ChatPane::onReady);
  connect(session_, &ChatSession::token, this, [this](const QString& text) {
    pendingTokens_ += text;
    if (!flush_.isActive()) flush_.start();
  });
  connect(session_, &ChatSession::done, this, &ChatPane::onDone);
  connect(session_, &ChatSession::requestError, this, [this](const QString& message) {
    onNoAnswer(tr("The engine refused the message: %1").arg(message));
  });
  connect(session_, &ChatSession::failed, this, [this](const QString& message) {
    showIdleStatus();
    onNoAnswer(message);
  });
  connect(session_, &ChatSession::warning, this,
          [this](const QString& message) { appendLine(message, Note); });
  rebuildPicker();
  showIdleStatus();
}

ChatPane::~ChatPane() = default;

void ChatPane::setEngineProgram(const QString& path) {
  session_->setEngineProgram(path);
}

void ChatPane::setModels(const QList<RunModel>& models, const QString& preferred) {
  runModels_ = models;
  rebuildPicker();
  const QStringList offered = modelFolders();
  if (offered.contains(model_)) return;
  setModel(offered.contains(preferred) ? preferred : offered.value(0));
}

void ChatPane::selectModel(const QString& dir) {
  const QString absolute = QDir(dir).absolutePath();
  if (!modelFolders().contains(absolute)) {
    browsed_ << absolute;
    rebuildPicker();
  }
  setModel(absolute);
}

QStringList ChatPane::modelFolders() const {
  QStringList dirs;
  for (const RunModel& m : runModels_) dirs << m.dir;
  for (const QString& dir : browsed_)
    if (!dirs.contains(dir)) dirs << dir;
  return dirs;
}

void ChatPane::rebuildPicker() {
  const QSignalBlocker block(picker_);
  picker_->clear();
  for (const RunModel& m : runModels_) {
    picker_->addItem(m.label(), m.dir);
    picker_->setItemData(picker_->count() - 1, QDir::toNativeSeparators(m.dir), Qt::ToolTipRole);
  }
  for (const QString& dir : modelFolders().mid(runModels_.size())) {
    picker_->addItem(QDir::toNativeSeparators(dir), dir);
    picker_->setItemData(picker_->count() - 1, QDir::toNativeSeparators(dir), Qt::ToolTipRole);
  }
  picker_->addItem(tr("Browse..."), kBrowseItem);
  picker_->setCurrentIndex(picker_->findData(model_));  // -1 (the placeholder) when not listed
}

void ChatPane::onPicked(int index) {
  const QString dir = picker_->itemData(index).toString();
  if (dir != kBrowseItem) setModel(dir);  // activated() opens the dialog for Browse...
}

void ChatPane::browse() {
  const QString start = model_.isEmpty() ? QDir::homePath() : QFileInfo(model_).absolutePath();
  const QString dir = QFileDialog::getExistingDirectory(
      this, tr("Model folder (config.json and *.safetensors)"), start);
  if (dir.isEmpty()) {
    const QSignalBlocker block(picker_);
    picker_->setCurrentIndex(picker_->findData(model_));
    return;
  }
  selectModel(dir);
}

void ChatPane::setModel(const QString& dir) {
  {
    const QSignalBlocker block(picker_);
    picker_->setCurrentIndex(picker_->findData(dir));
  }
  if (dir == model_) return;
  model_ = dir;
  session_->stop();  // an answer still coming is dropped with its conversation
  history_.clear();
  transcript_->clear();
  pendingTokens_.clear();
  setBusy(false);
  showIdleStatus();
}

void ChatPane::showIdleStatus() {
  status_->setToolTip({});
  status_->setText(
      model_.isEmpty()
          ? tr("Pick a model: a run's final model, a checkpoint, or Browse... for "
               "any Hugging Face model folder.")
          : tr("%1 loads with the next message.").arg(QDir::toNativeSeparators(model_)));
}

QString ChatPane::modelLabel(const QString& dir) const {
  for (const RunModel& m : runModels_)
    if (m.dir == dir) return m.label();
  return QFileInfo(dir).fileName();
}

bool ChatPane::ask(const QString& prompt, const QString& system, const ChatSampling& sampling) {
  if (busy_ || model_.isEmpty()) return false;
  history_ << ChatMessage{QStringLiteral("user"), prompt};
  appendLine(tr("You"), Speaker);
  appendLine(prompt, Text);
  appendLine(modelLabel(model_), Speaker);
  appendLine(QString(), Text);  // the answer streams into this line
  setBusy(true);
  if (!session_->isRunning() || session_->modelDir() != model_ || session_->options() != options_) {
    status_->setText(tr("Loading %1...").arg(QDir::toNativeSeparators(model_)));
    session_->start(model_, options_);
  }
  // A start that failed at once has said why (failed()) and ended the answer.
  if (busy_ && !session_->send(history_, system, sampling))
    onNoAnswer(tr("The engine is not running."));
  return true;
}

void ChatPane::cancel() {
  if (busy_) session_->cancel();
}

void ChatPane::clear() {
  if (busy_) return;
  history_.clear();
  transcript_->clear();
}

void ChatPane::stopEngine() {
  if (busy_) onNoAnswer(tr("Stopped before the answer was complete."));
  session_->stop();
  showIdleStatus();
}

void ChatPane::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  picker_->setEnabled(!busy);
  emit busyChanged(busy);
}

void ChatPane::onReady(const ChatModelInfo& info) {
  status_->setText(tr("%1, %2 parameters, template %3 (%4), %5 %6, loaded in %7 s")
                       .arg(info.architecture, QLocale().toString(info.parameters),
                            info.templateName, templateSource(info.templateSource), info.device,
                            info.dtype, QLocale().toString(info.loadSeconds, 'f', 1)));
  status_->setToolTip(QDir::toNativeSeparators(info.model));
}

void ChatPane::onDone(const ChatAnswer& answer) {
  flushTokens();
  history_ << ChatMessage{QStringLiteral("assistant"), answer.text};
  appendLine(tr("%1 tokens in %2 s (%3 tokens/s), prompt %4 tokens, stop: %5")
                 .arg(answer.newTokens)
                 .arg(QLocale().toString(answer.seconds, 'f', 2),
                      QLocale().toString(answer.tokensPerSec, 'f', 1))
                 .arg(answer.promptTokens)
                 .arg(stopReason(answer.stop)),
             Stats);
  setBusy(false);
  emit answered(answer);
}

void ChatPane::onNoAnswer(const QString& message) {
  flushTokens();
  appendLine(message, Error);
  if (!busy_) return;
  // The question stays in the transcript but leaves the history: the next message must not
  // follow a user turn that has no answer.
  if (!history_.isEmpty() && history_.back().role == QLatin1String("user")) history_.removeLast();
  setBusy(false);
}

void ChatPane::flushTokens() {
  flush_.stop();
  if (pendingTokens_.isEmpty()) return;
  QScrollBar* bar = transcript_->verticalScrollBar();
  const bool follow = bar->value() >= bar->maximum();
  QTextCursor cursor(transcript_->document());
  cursor.movePosition(QTextCursor::End);
  cursor.insertText(pendingTokens_, QTextCharFormat());
  pendingTokens_.clear();
  if (follow) bar->setValue(bar->maximum());
}

void ChatPane::appendLine(const QString& text, int kind) {
  QScrollBar* bar = transcript_->verticalScrollBar();
  const bool follow = bar->value() >= bar->maximum();
  QTextBlockFormat block;
  QTextCharFormat format;
  const QPalette& palette = transcript_->palette();
  switch (kind) {
    case Speaker:
      block.setTopMargin(8);
      format.setFontWeight(QFont::Bold);
      break;
    case Stats:
    case Note:
      format.setForeground(palette.color(QPalette::PlaceholderText));
      format.setFontItalic(true);
      break;
    case Error:
      // The palette's link colour stands out in light and dark themes alike.
      format.setForeground(palette.color(QPalette::Link));
      format.setFontItalic(true);
      break;
    default:
      break;
  }
  QTextCursor cursor(transcript_->document());
  cursor.movePosition(QTextCursor::End);
  if (transcript_->document()->isEmpty()) {
    cursor.setBlockFormat(block);
    cursor.setBlockCharFormat(format);
  } else {
    cursor.insertBlock(block, format);
  }
  cursor.insertText(text, format);
  if (follow) bar->setValue(bar->maximum());
}

}  // namespace studio::ui
