#pragma once
// A failed run opens on its cause: above the charts, the rank, step and phase it failed in
// (studio/runs/failure_cause.h reading the end event's reason), what to change, and the last
// lines that rank wrote to the run's train.log (read on QtConcurrent's pool, never on the GUI
// thread). A config error offers to open the config at the failing line. Hidden while the run
// has not failed.
#include <QFutureWatcher>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "studio/runs/failure_cause.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace studio::ui {

class FailurePanel : public QWidget {
  Q_OBJECT

 public:
  // Lines of the failing rank's log shown at most.
  static constexpr int kLogLines = 20;

  explicit FailurePanel(QWidget* parent = nullptr);
  ~FailurePanel() override;

  // The run's end (state and reason), its folder ("" for events fed without one) and the last
  // step it logged (-1: none). Shows the panel when the state is "failed", hides it otherwise;
  // the same run and reason again changes nothing.
  void showEnd(const QString& runDir, const QString& state, const QString& reason, double lastStep);

  const FailureCause& cause() const { return cause_; }
  QString headline() const;
  QString changesText() const;
  // The log lines shown (after the read finished: logRead()).
  QString logText() const;

 Q_SIGNALS:
  // The config error's "Open the config" button: the file (as the reason names it, resolved
  // against the run folder when relative), 1-based line and column.
  void openConfigRequested(QString path, int line, int column);
  // The failing rank's log lines arrived (or the log could not be read: the text says why).
  void logRead();

 private:
  void readLog();

  FailureCause cause_;
  QString runDir_, reason_;
  double lastStep_ = -1;
  QLabel* headline_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* changes_ = nullptr;
  QLabel* logTitle_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QPushButton* openConfig_ = nullptr;
  QFutureWatcher<QStringList> reading_;
};

}  // namespace studio::ui
