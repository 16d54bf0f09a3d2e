#pragma once
// The charts of the run dashboard.
#include <array>
#include <cstddef>

#include <QString>

namespace studio::ui {

enum class ChartKind {
  Loss,          // training loss, raw and smoothed, with eval loss markers
  TokensPerSec,  // throughput of all ranks together
  LearningRate,
  GradNorm,      // global gradient norm before clipping
  Memory,        // per-rank GPU memory, or the process's RSS on CPU runs
  GpuActivity,   // per-rank GPU utilisation and power as a share of its limit (NVML)
  Rewards,       // DPO: chosen, rejected and margin rewards
  Accuracy,      // DPO: rewards/accuracies
  Straggler,     // the slowest rank's busy time over the ranks' mean (runs of 2+ ranks)
};
inline constexpr std::size_t kChartCount = 9;
inline constexpr std::array<ChartKind, kChartCount> kAllCharts = {
    ChartKind::Loss,        ChartKind::TokensPerSec, ChartKind::LearningRate,
    ChartKind::GradNorm,    ChartKind::Memory,       ChartKind::GpuActivity,
    ChartKind::Rewards,     ChartKind::Accuracy,     ChartKind::Straggler};

// "Loss", "Tokens/sec", ...: the chart's title, also used in file dialogs.
QString chartTitle(ChartKind kind);
// A short lowercase name for file names and object names: "loss", "tokens-per-sec", ...
QString chartName(ChartKind kind);

}  // namespace studio::ui
