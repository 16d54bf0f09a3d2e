#pragma once
// Shared by the launch tests: a getenv over a table, an environment variable set for one
// test, and OUTPUT_DIR readers.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <QByteArray>
#include <QStringList>
#include <QtGlobal>

#include "studio/runs/events.h"
#include "studio/launch/dist_env.h"

namespace launch_test {

// getenv over "NAME=value" entries.
class FakeEnv {
 public:
  explicit FakeEnv(const QStringList& entries) {
    for (const QString& e : entries) {
      const int eq = e.indexOf('=');
      vars_[e.left(eq).toStdString()] = e.mid(eq + 1).toStdString();
    }
  }
  studio::launch::Getenv getenv() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

// Sets (or unsets, with nullopt) a variable of this process until the end of the scope. Through
// qputenv/qunsetenv, which hold Qt's environment lock: QtTest's watchdog thread reads the
// environment at the start of every test function, and a bare setenv racing with that getenv
// crashed tst_launcher in CI.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (qEnvironmentVariableIsSet(name)) old_ = qgetenv(name).toStdString();
    if (value)
      qputenv(name, QByteArray::fromStdString(*value));
    else
      qunsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      qputenv(name_.c_str(), QByteArray::fromStdString(*old_));
    else
      qunsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Every event of OUTPUT_DIR/events.jsonl, and the number of lines that were not events.
inline std::vector<studio::Event> read_events(const std::string& dir,
                                              std::uint64_t* bad = nullptr) {
  studio::EventFileReader reader(studio::events_path(dir));
  auto polled = reader.poll();
  if (bad) *bad = reader.parser().bad_lines();
  return polled.events;
}

inline std::vector<const studio::Event*> end_events(const std::vector<studio::Event>& events) {
  std::vector<const studio::Event*> out;
  for (const auto& e : events)
    if (e.kind == studio::EventKind::End) out.push_back(&e);
  return out;
}

}  // namespace launch_test
