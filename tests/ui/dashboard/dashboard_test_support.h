#pragma once
// Recorded events files and small event builders shared by the dashboard tests.
#include <initializer_list>
#include <string>
#include <vector>

#include <QFile>
#include <QString>

#include "studio/runs/events.h"

namespace dash_test {

// sft-cpu: the demo SFT run (CPU, 12 logged steps, 2 evals, rss_mib). dpo-cpu: the demo DPO
// run (CPU, 6 steps). dpo-gpu2: hand-written DPO run on 2 ranks with gpus, a null loss, three
// garbage lines, a 5 KB log line, a kill after step 6 and a resume from checkpoint-4.
inline QString dataPath(const QString& name) {
  return QStringLiteral(DASHBOARD_TEST_DATA_DIR "/") + name + QStringLiteral(".events.jsonl");
}

inline QByteArray readBytes(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Parses a recorded file in small uneven chunks, as a tail or an SFTP reader sees it.
inline std::vector<studio::Event> parseInChunks(const QByteArray& bytes,
                                                studio::EventStreamParser& parser) {
  std::vector<studio::Event> events;
  int chunk = 7;
  for (int at = 0; at < bytes.size(); at += chunk, chunk = chunk * 3 % 61 + 5)
    parser.feed(std::string_view(bytes.constData() + at,
                                 static_cast<std::size_t>(std::min(chunk, int(bytes.size()) - at))),
                events);
  return events;
}

inline std::vector<studio::Event> loadEvents(const QString& name) {
  studio::EventStreamParser parser;
  return parseInChunks(readBytes(dataPath(name)), parser);
}

// One parsed line, for events built in a test.
inline studio::Event parsed(const nlohmann::json& object) {
  studio::Event event;
  std::string error;
  if (!studio::parse_event_line(object.dump(), event, error)) throw std::runtime_error(error);
  return event;
}

// Event lines as written (NaN and Infinity included, which a json object cannot carry to dump()).
inline std::vector<studio::Event> parsedLines(std::initializer_list<const char*> lines) {
  std::vector<studio::Event> out;
  for (const char* line : lines) {
    studio::Event event;
    std::string error;
    if (!studio::parse_event_line(line, event, error)) throw std::runtime_error(error);
    out.push_back(std::move(event));
  }
  return out;
}

inline studio::Event stepEvent(std::int64_t step, double loss, double time = studio::kNoValue) {
  nlohmann::json j = {{"event", "step"}, {"step", step}, {"loss", loss}};
  if (!std::isnan(time)) j["time"] = time;
  return parsed(j);
}

}  // namespace dash_test
