#pragma once
// Step lines exactly as the engine writes them ("event" first, then the keys in alphabetical
// order, docs/events.md), generated fast enough for files of gigabytes: the dashboard benchmark
// (bench/dashboard) and the studio's load test (tests/ui/tst_studio_load.cpp).
#include <charconv>
#include <cmath>
#include <string>

namespace step_lines {

inline void appendNumber(std::string& out, double v) {
  char buffer[32];
  out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
}

// A step line as the engine writes it ("event" first, then the keys in alphabetical order):
// a decaying noisy loss, a cosine learning rate, and per-rank memory that breathes.
inline void appendStep(std::string& out, long step, int ranks, long total) {
  const double noise = double((step * 2654435761u) % 1000) / 1000.0 - 0.5;
  const double t0 = 1717171717.0;
  const double elapsed = 0.5 * double(step);
  out += "{\"event\":\"step\",\"elapsed\":";
  appendNumber(out, elapsed);
  out += ",\"epoch\":";
  appendNumber(out, double(step) / double(total) * 3.0);
  out += ",\"gpus\":[";
  for (int r = 0; r < ranks; ++r) {
    const double allocated = 52000.0 + 400.0 * std::sin(double(step) / 50.0 + r) + 10.0 * r;
    if (r > 0) out += ',';
    out += "{\"allocated_mib\":";
    appendNumber(out, allocated);
    out += ",\"device\":" + std::to_string(r) + ",\"peak_mib\":";
    appendNumber(out, allocated + 4096.0);
    out += ",\"rank\":" + std::to_string(r) + ",\"reserved_mib\":61440.0,\"total_mib\":81559.0}";
  }
  out += "],\"grad_norm\":";
  appendNumber(out, 0.5 + 0.25 * noise);
  out += ",\"loss\":";
  appendNumber(out, 1.5 + 6.0 * std::exp(-double(step) / (double(total) / 20.0)) + 0.3 * noise);
  out += ",\"lr\":";
  appendNumber(out, 1e-5 * 0.5 * (1.0 + std::cos(M_PI * double(step) / double(total))));
  out += ",\"step\":" + std::to_string(step) + ",\"time\":";
  appendNumber(out, t0 + elapsed);
  out += ",\"tokens\":262144,\"tokens_per_sec\":";
  appendNumber(out, 21845.0 + 500.0 * noise);
  out += "}\n";
}

}  // namespace step_lines
