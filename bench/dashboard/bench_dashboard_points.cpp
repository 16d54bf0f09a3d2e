// A million-step run through the dashboard: events generated in memory as the engine writes
// them, parsed with EventStreamParser, ingested into a RunSeries and into RunDashboard, then
// drawn; each drawing time is set against plain QCustomPlot holding the same points in the same
// run (same window size, same plots, same graphs: setData + rescale + replot).
//
//   bench_dashboard_points [--points N] [--ranks R] [--size WxH] [--repeats K] [--screenshot PNG]
//
// Run it offscreen (QT_QPA_PLATFORM=offscreen); see bench/dashboard/README.md.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <sys/resource.h>
#include <memory>
#include <string>
#include <vector>

#include <QApplication>
#include <QGridLayout>
#include <QPixmap>
#include <QStringList>
#include <qcustomplot.h>

#include "studio/runs/events.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/dashboard/run_series.h"
#include "step_lines.h"

namespace {

using step_lines::appendStep;

using studio::ui::ChartKind;
using studio::ui::RunDashboard;

struct Options {
  long points = 1'000'000;
  int ranks = 2;
  int width = 1600;
  int height = 1000;
  int repeats = 5;
  QString screenshot;
};

// Wall and CPU seconds of the calling thread: on a machine shared with other jobs the wall
// clock also measures the others, the CPU time does not. Everything timed here runs on the
// GUI thread.
// Page faults are counted too: touching freshly mapped memory costs a fault per 4 KiB page,
// which on a VM is a visible part of filling graphs with millions of points.
struct Clock {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu = threadCpu();
  long faults = threadFaults();

  static double threadCpu() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
  }
  static long threadFaults() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt + usage.ru_majflt;
  }
};

struct Timing {
  double wall = 0;
  double cpu = 0;
  long faults = 0;
  void add(const Clock& since) {
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - since.wall).count();
    cpu += Clock::threadCpu() - since.cpu;
    faults += Clock::threadFaults() - since.faults;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<QCustomPlot*> dashboardPlots(const RunDashboard& dash) {
  std::vector<QCustomPlot*> plots;
  for (ChartKind kind : studio::ui::kAllCharts)
    if (dash.chartShown(kind)) plots.push_back(dash.plot(kind));
  return plots;
}

long pointsIn(const std::vector<QCustomPlot*>& plots) {
  long n = 0;
  for (const QCustomPlot* plot : plots)
    for (int i = 0; i < plot->graphCount(); ++i) n += plot->graph(i)->data()->size();
  return n;
}

// Replots every plot, `repeats` times; the median of one round.
Timing replotAll(const std::vector<QCustomPlot*>& plots, int repeats) {
  std::vector<double> walls, cpus;
  for (int r = 0; r < repeats; ++r) {
    Timing t;
    const Clock start;
    for (QCustomPlot* plot : plots) plot->replot(QCustomPlot::rpImmediateRefresh);
    t.add(start);
    walls.push_back(t.wall);
    cpus.push_back(t.cpu);
  }
  return {median(walls), median(cpus), 0};
}

// The middle 1% of the x range, as a user zooms into a long run.
void zoomIn(const std::vector<QCustomPlot*>& plots, double lower, double upper) {
  const double mid = (lower + upper) / 2.0;
  const double half = (upper - lower) / 200.0;
  for (QCustomPlot* plot : plots) plot->xAxis->setRange(mid - half, mid + half);
}

// The reference: one plain QCustomPlot per dashboard chart, in the same grid and window size,
// with one default graph per dashboard graph holding the same points.
struct Reference {
  QWidget window;
  std::vector<QCustomPlot*> plots;
  std::vector<std::vector<std::pair<QVector<double>, QVector<double>>>> data;

  explicit Reference(const std::vector<QCustomPlot*>& like) {
    auto* grid = new QGridLayout(&window);
    for (const QCustomPlot* source : like) {
      auto* plot = new QCustomPlot;
      grid->addWidget(plot, int(plots.size()) / 2, int(plots.size()) % 2);
      plots.push_back(plot);
      data.emplace_back();
      for (int i = 0; i < source->graphCount(); ++i) {
        QVector<double> keys, values;
        keys.reserve(source->graph(i)->data()->size());
        values.reserve(source->graph(i)->data()->size());
        for (auto it = source->graph(i)->data()->constBegin();
             it != source->graph(i)->data()->constEnd(); ++it) {
          keys.append(it->key);
          values.append(it->value);
        }
        data.back().emplace_back(std::move(keys), std::move(values));
      }
    }
  }

  // setData of every graph, rescale, replot: what a plain QCustomPlot program does.
  Timing firstReplot() {
    Timing t;
    const Clock start;
    for (std::size_t p = 0; p < plots.size(); ++p) {
      for (const auto& [keys, values] : data[p]) plots[p]->addGraph()->setData(keys, values, true);
      plots[p]->rescaleAxes();
      plots[p]->replot(QCustomPlot::rpImmediateRefresh);
    }
    t.add(start);
    return t;
  }

  // addData of the last `count` points of each source graph, rescale, replot: a live update.
  Timing appendFrom(const std::vector<QCustomPlot*>& like, int count) {
    std::vector<std::vector<std::pair<QVector<double>, QVector<double>>>> added;
    for (const QCustomPlot* source : like) {
      added.emplace_back();
      for (int i = 0; i < source->graphCount(); ++i) {
        const auto& data = *source->graph(i)->data();
        QVector<double> keys, values;
        for (auto it = data.constEnd() - std::min(count, data.size()); it != data.constEnd(); ++it) {
          keys.append(it->key);
          values.append(it->value);
        }
        added.back().emplace_back(std::move(keys), std::move(values));
      }
    }
    Timing t;
    const Clock start;
    for (std::size_t p = 0; p < plots.size(); ++p) {
      for (std::size_t g = 0; g < added[p].size(); ++g)
        plots[p]->graph(int(g))->addData(added[p][g].first, added[p][g].second, true);
      plots[p]->rescaleAxes();
      plots[p]->replot(QCustomPlot::rpImmediateRefresh);
    }
    t.add(start);
    return t;
  }
};

bool parseOptions(const QStringList& args, Options& o) {
  for (int i = 1; i < args.size(); ++i) {
    const QString& a = args[i];
    const QString value = i + 1 < args.size() ? args[i + 1] : QString();
    bool ok = true;
    if (a == "--points") o.points = value.toLong(&ok);
    else if (a == "--ranks") o.ranks = value.toInt(&ok);
    else if (a == "--repeats") o.repeats = value.toInt(&ok);
    else if (a == "--screenshot") o.screenshot = value;
    else if (a == "--size") {
      const QStringList wh = value.split('x');
      ok = wh.size() == 2;
      if (ok) o.width = wh[0].toInt(&ok);
      if (ok) o.height = wh[1].toInt(&ok);
    } else {
      std::fprintf(stderr, "unknown option %s\n", qPrintable(a));
      return false;
    }
    if (!ok || value.isEmpty()) {
      std::fprintf(stderr, "%s needs a valid value, got '%s'\n", qPrintable(a), qPrintable(value));
      return false;
    }
    ++i;
  }
  return o.points > 0 && o.ranks >= 0 && o.repeats > 0;
}

void printRow(const char* what, const Timing& dash, const Timing& ref) {
  std::printf("%-34s %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f %8ld %8ld\n", what, dash.wall * 1e3,
              dash.cpu * 1e3, ref.wall * 1e3, ref.cpu * 1e3, dash.wall / ref.wall,
              dash.cpu / ref.cpu, dash.faults, ref.faults);
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  Options o;
  if (!parseOptions(app.arguments(), o)) {
    std::fprintf(stderr, "usage: bench_dashboard_points [--points N] [--ranks R] [--size WxH] "
                         "[--repeats K] [--screenshot PNG]\n");
    return 2;
  }

  // --- parse and ingest, in chunks of lines as a tailer delivers them ------------------------
  constexpr long kChunkLines = 10000;
  studio::EventStreamParser parser;
  studio::ui::RunSeries series;
  RunDashboard dash;
  Timing parse, ingestSeries, ingestDashboard;
  std::size_t bytes = 0;
  std::string text;
  std::vector<studio::Event> events;
  for (long first = 1; first <= o.points; first += kChunkLines) {
    text.clear();
    for (long step = first; step < std::min(first + kChunkLines, o.points + 1); ++step)
      appendStep(text, step, o.ranks, o.points);
    bytes += text.size();
    events.clear();
    Clock c0;
    parser.feed(text, events);
    parse.add(c0);
    Clock c1;
    series.ingest(events);
    ingestSeries.add(c1);
    Clock c2;
    dash.feed(QStringLiteral("bench/run"), events);
    ingestDashboard.add(c2);
  }
  if (series.size() != std::size_t(o.points) || parser.bad_lines() != 0) {
    std::fprintf(stderr, "expected %ld rows, got %zu (%llu bad lines)\n", o.points, series.size(),
                 static_cast<unsigned long long>(parser.bad_lines()));
    return 1;
  }

  // --- the dashboard on screen: first full replot, replot, zoomed replot ---------------------
  dash.resize(o.width, o.height);
  dash.show();
  // Lay the charts out at their size, but leave the coalescing timer alone: processing all
  // events would replot before the clock starts.
  QApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  Timing first;
  {
    const Clock c;
    dash.flush();  // moves every point into the graphs, rescales and replots once
    first.add(c);
  }
  const std::vector<QCustomPlot*> plots = dashboardPlots(dash);
  const long graphPoints = pointsIn(plots);
  const Timing again = replotAll(plots, o.repeats);
  const QCPRange full = plots.front()->xAxis->range();
  zoomIn(plots, full.lower, full.upper);
  const Timing zoomed = replotAll(plots, o.repeats);
  dash.hide();

  // --- the reference, same points, same layout ------------------------------------------------
  Reference reference(plots);
  reference.window.resize(o.width, o.height);
  reference.window.show();
  QApplication::processEvents();
  const Timing refFirst = reference.firstReplot();
  const Timing refAgain = replotAll(reference.plots, o.repeats);
  zoomIn(reference.plots, full.lower, full.upper);
  const Timing refZoomed = replotAll(reference.plots, o.repeats);
  reference.window.hide();

  // --- a live update: the next kLiveSteps steps arrive ------------------------------------------
  constexpr int kLiveSteps = 10000;
  text.clear();
  for (long step = o.points + 1; step <= o.points + kLiveSteps; ++step)
    appendStep(text, step, o.ranks, o.points);
  events.clear();
  parser.feed(text, events);
  dash.show();
  dash.fitToData();  // follow the data again, as before the zoom
  dash.feed(QStringLiteral("bench/run"), events);
  Timing live;
  {
    const Clock c;
    dash.flush();  // appends to the graphs, fits the axes, replots
    live.add(c);
  }
  if (!o.screenshot.isEmpty()) dash.grab().save(o.screenshot, "PNG");
  dash.hide();
  reference.window.show();
  const Timing refLive = reference.appendFrom(plots, kLiveSteps);

  std::printf("bench_dashboard_points: %ld step events (%d GPU ranks each), %.1f MB of JSONL, "
              "%zu charts, %ld graph points, window %dx%d, platform %s, Qt %s\n",
              o.points, o.ranks, double(bytes) / 1e6, plots.size(), graphPoints, o.width,
              o.height, qPrintable(QGuiApplication::platformName()), qVersion());
  std::printf("%-34s %10.1f %10.1f   (%.0f events/s, %.1f MB/s)\n", "parse (EventStreamParser) ms",
              parse.wall * 1e3, parse.cpu * 1e3, double(o.points) / parse.wall,
              double(bytes) / 1e6 / parse.wall);
  std::printf("%-34s %10.1f %10.1f\n", "ingest into RunSeries ms", ingestSeries.wall * 1e3,
              ingestSeries.cpu * 1e3);
  std::printf("%-34s %10.1f %10.1f\n", "ingest into RunDashboard (feed) ms",
              ingestDashboard.wall * 1e3, ingestDashboard.cpu * 1e3);
  std::printf("%-34s %10s %10s %10s %10s %8s %8s %8s %8s\n", "drawing, all charts (ms)",
              "dash wall", "dash cpu", "ref wall", "ref cpu", "wall x", "cpu x", "dash pf",
              "ref pf");
  printRow("first full replot (data + draw)", first, refFirst);
  printRow("replot, nothing changed (median)", again, refAgain);
  printRow("replot after zoom to 1% (median)", zoomed, refZoomed);
  printRow("10000 more steps (append + draw)", live, refLive);
  return 0;
}
