#include "studio/ui/chat/chat_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <limits>

#include "studio/data/chat_template.h"
#include "studio/ui/chat/chat_pane.h"

namespace studio::ui {
namespace {

// A spin box's label with its mnemonic, the box named for tests and screen readers.
void addSetting(QGridLayout* grid, int column, const QString& label, QWidget* box,
                const QString& name) {
  auto* l = new QLabel(label);
  l->setBuddy(box);
  box->setObjectName(name);
  box->setAccessibleName(QString(label).remove(QLatin1Char('&')).remove(QLatin1Char(':')));
  grid->addWidget(l, 0, column);
  grid->addWidget(box, 1, column);
}

QDoubleSpinBox* realBox(double min, double max, double step, double value) {
  auto* box = new QDoubleSpinBox;
  box->setRange(min, max);
  box->setDecimals(2);
  box->setSingleStep(step);
  box->setValue(value);
  return box;
}

QSpinBox* intBox(int min, int max, int value) {
  auto* box = new QSpinBox;
  box->setRange(min, max);
  box->setValue(value);
  return box;
}

}  // namespace

ChatPanel::ChatPanel(QWidget* parent)
    : QWidget(parent),
      left_(new ChatPane(tr("Left"))),
      right_(new ChatPane(tr("Right"))),
      prompt_(new QPlainTextEdit),
      send_(new QPushButton(tr("&Send"))),
      stop_(new QPushButton(tr("S&top"))),
      clear_(new QPushButton(tr("C&lear"))),
      compare_(new QCheckBox(tr("Compare side &by side"))),
      temperature_(realBox(0, 5, 0.1, 0)),
      topP_(realBox(0.01, 1, 0.05, 1)),
      topK_(intBox(0, 1000000, 0)),
      maxNewTokens_(intBox(1, 1000000, 256)),
      seed_(intBox(0, std::numeric_limits<int>::max(), 0)),
      repetitionPenalty_(realBox(0.01, 10, 0.05, 1)),
      system_(new QLineEdit),
      template_(new QComboBox),
      device_(new QComboBox) {
  setObjectName(QStringLiteral("chatPanel"));
  temperature_->setSpecialValueText(tr("0 (greedy)"));
  topK_->setSpecialValueText(tr("0 (off)"));
  prompt_->setObjectName(QStringLiteral("chatPrompt"));
  prompt_->setAccessibleName(tr("Prompt"));
  prompt_->setPlaceholderText(tr("Message (Ctrl+Return sends)"));
  prompt_->setTabChangesFocus(true);
  prompt_->setMaximumHeight(prompt_->fontMetrics().lineSpacing() * 5 + 12);
  system_->setObjectName(QStringLiteral("chatSystem"));
  system_->setAccessibleName(tr("System prompt"));
  system_->setPlaceholderText(tr("none (the template's default)"));
  template_->addItem(tr("(from the run's config)"), QString());
  for (const std::string& name : studio::data::template_names())
    template_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  device_->addItem(tr("auto (a GPU when there is one)"), QString());
  device_->addItem(QStringLiteral("cpu"), QStringLiteral("cpu"));
  device_->addItem(QStringLiteral("cuda"), QStringLiteral("cuda"));
  for (auto [button, name] : {std::pair{send_, "chatSend"}, std::pair{stop_, "chatStop"},
                              std::pair{clear_, "chatClear"}}) {
    button->setObjectName(QLatin1String(name));
    button->setAccessibleName(button->text().remove(QLatin1Char('&')));
  }
  send_->setToolTip(tr("Send the message to the model (to both when comparing): Ctrl+Return"));
  stop_->setToolTip(tr("End the answers being generated"));
  clear_->setToolTip(tr("Start new conversations"));
  compare_->setObjectName(QStringLiteral("chatCompare"));
  compare_->setAccessibleName(tr("Compare side by side"));
  compare_->setToolTip(tr("A second model (e.g. an earlier checkpoint) answers the same prompt"));
  right_->hide();

  auto* top = new QHBoxLayout;
  top->addWidget(compare_);
  top->addStretch(1);
  auto* panes = new QSplitter(Qt::Horizontal);
  panes->setObjectName(QStringLiteral("chatPanes"));
  panes->setChildrenCollapsible(false);
  panes->addWidget(left_);
  panes->addWidget(right_);
  auto* buttons = new QVBoxLayout;
  buttons->addWidget(send_);
  buttons->addWidget(stop_);
  buttons->addWidget(clear_);
  buttons->addStretch(1);
  auto* promptRow = new QHBoxLayout;
  promptRow->addWidget(prompt_, 1);
  promptRow->addLayout(buttons);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(panes, 1);
  layout->addWidget(createSettings());
  layout->addLayout(promptRow);

  for (ChatPane* pane : {left_, right_})
    connect(pane, &ChatPane::busyChanged, this, [this] {
      updateButtons();
      if (asked_ && !isBusy()) {
        asked_ = false;
        emit answersFinished();
      }
    });
  connect(send_, &QPushButton::clicked, this, &ChatPanel::send);
  connect(stop_, &QPushButton::clicked, this, &ChatPanel::stop);
  connect(clear_, &QPushButton::clicked, this, &ChatPanel::clear);
  connect(compare_, &QCheckBox::toggled, this, &ChatPanel::setCompare);
  connect(prompt_, &QPlainTextEdit::textChanged, this, &ChatPanel::updateButtons);
  for (QKeySequence keys :
       {QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)})
    new QShortcut(keys, prompt_, this, &ChatPanel::send, Qt::WidgetShortcut);
  connect(&listing_, &QFutureWatcherBase::finished, this, &ChatPanel::onListed);
  updateButtons();
}

ChatPanel::~ChatPanel() = default;

QWidget* ChatPanel::createSettings() {
  auto* settings = new QWidget;
  auto* grid = new QGridLayout(settings);
  grid->setContentsMargins(0, 0, 0, 0);
  addSetting(grid, 0, tr("T&emperature:"), temperature_, QStringLiteral("chatTemperature"));
  addSetting(grid, 1, tr("Top-&p:"), topP_, QStringLiteral("chatTopP"));
  addSetting(grid, 2, tr("Top-&k:"), topK_, QStringLiteral("chatTopK"));
  addSetting(grid, 3, tr("Max &new tokens:"), maxNewTokens_, QStringLiteral("chatMaxNewTokens"));
  addSetting(grid, 4, tr("See&d:"), seed_, QStringLiteral("chatSeed"));
  addSetting(grid, 5, tr("Repet&ition penalty:"), repetitionPenalty_,
             QStringLiteral("chatRepetitionPenalty"));
  addSetting(grid, 6, tr("Templ&ate:"), template_, QStringLiteral("chatTemplate"));
  addSetting(grid, 7, tr("Devi&ce:"), device_, QStringLiteral("chatDevice"));
  auto* systemLabel = new QLabel(tr("S&ystem prompt:"));
  systemLabel->setBuddy(system_);
  grid->addWidget(systemLabel, 2, 0);
  grid->addWidget(system_, 2, 1, 1, 7);
  grid->setColumnStretch(8, 1);
  return settings;
}

void ChatPanel::setEngineProgram(const QString& path) {
  left_->setEngineProgram(path);
  right_->setEngineProgram(path);
}

void ChatPanel::setRunFolder(const QString& dir) {
  runDir_ = dir;
  listModels();
}

void ChatPanel::listModels() {
  const QString dir = runDir_;
  listing_.setFuture(QtConcurrent::run([dir] { return Listing{dir, listRunModels(dir)}; }));
}

void ChatPanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (!runDir_.isEmpty()) listModels();
}

void ChatPanel::onListed() {
  const Listing listing = listing_.result();
  if (listing.runDir != runDir_) return;  // an earlier run's listing
  const QList<RunModel>& models = listing.models;
  QString latest, first;
  if (!models.isEmpty()) latest = models.front().isFinal() ? models.front().dir : models.back().dir;
  for (const RunModel& m : models)
    if (!m.isFinal() && first.isEmpty()) first = m.dir;
  left_->setModels(models, latest);
  right_->setModels(models, first.isEmpty() ? latest : first);
  updateButtons();
  emit modelsListed(listing.runDir, static_cast<int>(models.size()));
}

void ChatPanel::setCompare(bool on) {
  if (compare_->isChecked() != on) compare_->setChecked(on);  // toggled() comes back here
  if (right_->isVisibleTo(this) == on) return;
  right_->setVisible(on);
  if (!on) right_->stopEngine();
  updateButtons();
}

bool ChatPanel::compare() const {
  return compare_->isChecked();
}

ChatSampling ChatPanel::sampling() const {
  ChatSampling s;
  s.maxNewTokens = maxNewTokens_->value();
  s.temperature = temperature_->value();
  s.topP = topP_->value();
  s.topK = topK_->value();
  s.repetitionPenalty = repetitionPenalty_->value();
  s.seed = seed_->value();
  return s;
}

QString ChatPanel::systemPrompt() const {
  return system_->text();
}

ChatOptions ChatPanel::options() const {
  return {template_->currentData().toString(), device_->currentData().toString()};
}

bool ChatPanel::isBusy() const {
  return left_->isBusy() || right_->isBusy();
}

bool ChatPanel::send() {
  const QString text = prompt_->toPlainText();
  QList<ChatPane*> panes{left_};
  if (compare()) panes << right_;
  if (text.trimmed().isEmpty() || isBusy()) return false;
  for (ChatPane* pane : panes)
    if (pane->model().isEmpty()) return false;
  asked_ = true;
  for (ChatPane* pane : panes) {
    pane->setOptions(options());
    pane->ask(text, systemPrompt(), sampling());
  }
  prompt_->clear();
  updateButtons();
  return true;
}

void ChatPanel::stop() {
  left_->cancel();
  right_->cancel();
}

void ChatPanel::clear() {
  left_->clear();
  right_->clear();
}

void ChatPanel::updateButtons() {
  const bool busy = isBusy();
  const bool models = !left_->model().isEmpty() && (!compare() || !right_->model().isEmpty());
  send_->setEnabled(!busy && models && !prompt_->toPlainText().trimmed().isEmpty());
  stop_->setEnabled(busy);
  clear_->setEnabled(!busy);
}

}  // namespace studio::ui
