#pragma once
// Run folders written the way the engine writes them, for the studio_runs tests.
#include <string>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>

#include "studio/runs/events.h"
#include "studio/ui/runs/process_probe.h"

namespace runs_test {

inline std::string path(const QString& dir, const char* name) {
  return QFile::encodeName(QDir(dir).filePath(QString::fromUtf8(name))).toStdString();
}

inline void writeStatus(const QString& dir, studio::RunState state, qint64 pid,
                        const QString& host = studio::ui::localHostName(),
                        const std::string& reason = {}) {
  studio::RunStatus st;
  st.state = state;
  st.pid = pid;
  st.host = host.toStdString();
  st.reason = reason;
  if (state != studio::RunState::Running)
    st.exit_code = state == studio::RunState::Finished ? 0 : 1;
  const std::string error = st.write(path(dir, studio::kStatusFileName));
  if (!error.empty()) qFatal("%s", error.c_str());
}

inline studio::StartEvent startEvent(double time, int sp = 1, const char* mode = "zigzag-ring",
                                     int world = 1, long long maxSteps = -1) {
  studio::StartEvent s;
  s.time = time;
  s.stage = "sft";
  s.sequence_parallel_size = sp;
  s.sequence_parallel_mode = mode;
  s.world_size = world;
  s.config = {{"max_steps", maxSteps}, {"stage", "sft"}};
  return s;
}

inline studio::StepEvent stepEvent(long long step, double loss, double time) {
  studio::StepEvent s;
  s.step = step;
  s.loss = loss;
  s.time = time;
  return s;
}

// Appends raw bytes to a file of the run folder.
inline void appendRaw(const QString& dir, const char* name, const QByteArray& bytes) {
  QFile f(QDir(dir).filePath(QString::fromUtf8(name)));
  if (!f.open(QIODevice::Append) || f.write(bytes) != bytes.size())
    qFatal("cannot append to %s", qPrintable(f.fileName()));
}

// Appends events the way the engine does.
template <class... Events>
void appendEvents(const QString& dir, const Events&... events) {
  studio::EventWriter w;
  std::string error = w.open(path(dir, studio::kEventsFileName));
  if (error.empty()) ((error = error.empty() ? w.write(events) : error), ...);
  if (error.empty()) error = w.close();
  if (!error.empty()) qFatal("%s", error.c_str());
}

// A live process that is not a run's engine (`sleep 30`), killed when the test is done with it.
class Sleeper {
 public:
  Sleeper() {
    process_.start(QStringLiteral("sleep"), {QStringLiteral("30")});
    if (!process_.waitForStarted()) qFatal("cannot start sleep");
  }
  ~Sleeper() {
    process_.kill();
    process_.waitForFinished();
  }
  qint64 pid() const { return process_.processId(); }
  bool running() const { return process_.state() == QProcess::Running; }

 private:
  QProcess process_;
};

}  // namespace runs_test
