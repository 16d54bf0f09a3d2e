#include "studio/ui/chat/chat_session.h"

#include <QDir>
#include <QProcess>
#include <QTimer>

namespace studio::ui {

ChatSession::ChatSession(QObject* parent) : QObject(parent) {}

ChatSession::~ChatSession() {
  stop();
}

void ChatSession::start(const QString& modelDir, const ChatOptions& options) {
  stop();
  modelDir_ = modelDir;
  options_ = options;
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::SeparateChannels);
  connect(process_, &QProcess::readyReadStandardOutput, this, &ChatSession::readOutput);
  connect(process_, &QProcess::readyReadStandardError, this, &ChatSession::readErrors);
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    onFinished(code, status == QProcess::CrashExit);
  });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    // The other errors end in finished(); a process that never started does not.
    if (error == QProcess::FailedToStart)
      end(tr("cannot start %1: %2 (build it, or set the engine in the studio's settings)")
              .arg(QDir::toNativeSeparators(engine_), process_->errorString()));
  });
  process_->start(engine_, chatArguments(modelDir, options));
}

bool ChatSession::send(const QList<ChatMessage>& messages, const QString& system,
                       const ChatSampling& sampling) {
  if (!process_) return false;
  process_->write(chatRequestLine(messages, system, sampling));
  ++pending_;
  return true;
}

void ChatSession::cancel() {
  if (!process_ || pending_ == 0) return;
  cancelling_ = true;
  process_->write(chatCancelLine());
}

void ChatSession::stop() {
  QProcess* p = process_;
  process_ = nullptr;
  ready_ = false;
  pending_ = 0;
  cancelling_ = false;
  info_ = {};
  reader_ = {};
  stderrPartial_.clear();
  stderrTail_.clear();
  if (!p) return;
  p->disconnect(this);
  if (p->state() == QProcess::NotRunning) {
    p->deleteLater();
    return;
  }
  // The process is on its own now: it may outlive this session (~QProcess would wait for it),
  // and it deletes itself once the engine has ended.
  p->setParent(nullptr);
  connect(p, &QProcess::finished, p, &QObject::deleteLater);
  connect(p, &QProcess::errorOccurred, p, [p](QProcess::ProcessError error) {
    if (error == QProcess::FailedToStart) p->deleteLater();
  });
  // An answer in progress would hold the end of input back until it is complete.
  p->write(chatCancelLine());
  p->closeWriteChannel();
  QTimer::singleShot(kStopGraceMs, p, [p] { p->kill(); });
}

void ChatSession::readOutput() {
  bool tokens = false;
  for (const ChatEvent& event : reader_.feed(process_->readAllStandardOutput())) {
    tokens = tokens || event.kind == ChatEvent::Kind::Token;
    handle(event);
    if (!process_) return;  // a slot stopped the session
  }
  if (cancelling_ && tokens) process_->write(chatCancelLine());
}

void ChatSession::handle(const ChatEvent& event) {
  for (const QString& problem : event.problems)
    emit warning(tr("studio-train chat wrote a field this studio cannot read: %1").arg(problem));
  switch (event.kind) {
    case ChatEvent::Kind::Ready:
      ready_ = true;
      info_ = event.info;
      emit ready(info_);
      break;
    case ChatEvent::Kind::Token:
      emit token(event.text);
      break;
    case ChatEvent::Kind::Done:
      pending_ = qMax(0, pending_ - 1);
      cancelling_ = false;
      emit done(event.answer);
      break;
    case ChatEvent::Kind::Error:
      pending_ = qMax(0, pending_ - 1);
      cancelling_ = false;
      emit requestError(event.text);
      break;
    case ChatEvent::Kind::Unknown:
    case ChatEvent::Kind::NotJson:
      emit warning(tr("studio-train chat wrote a line this studio does not understand: %1")
                       .arg(event.text.left(200)));
      break;
  }
}

void ChatSession::readErrors() {
  const QList<QByteArray> lines = (stderrPartial_ + process_->readAllStandardError()).split('\n');
  stderrPartial_ = lines.back();
  for (qsizetype i = 0; i + 1 < lines.size(); ++i)
    if (!lines[i].trimmed().isEmpty()) stderrTail_ << QString::fromUtf8(lines[i]).trimmed();
  while (stderrTail_.size() > kStderrLines) stderrTail_.removeFirst();
}

void ChatSession::onFinished(int exitCode, bool crashed) {
  readOutput();
  if (!process_) return;
  readErrors();
  if (!stderrPartial_.trimmed().isEmpty())
    stderrTail_ << QString::fromUtf8(stderrPartial_).trimmed();
  const QString said = stderrTail_.isEmpty() ? tr("(nothing on stderr)") : stderrTail_.join('\n');
  if (crashed)
    end(tr("studio-train chat crashed:\n%1").arg(said));
  else if (exitCode != 0)
    end(tr("studio-train chat ended with exit code %1:\n%2").arg(exitCode).arg(said));
  else if (pending_ > 0)
    end(tr("studio-train chat ended before it answered:\n%1").arg(said));
  else
    end({});
}

void ChatSession::end(const QString& failure) {
  stop();
  if (!failure.isEmpty()) emit failed(failure);
}

}  // namespace studio::ui
