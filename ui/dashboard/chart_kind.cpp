#include "studio/ui/dashboard/chart_kind.h"

#include <QCoreApplication>

namespace studio::ui {

QString chartTitle(ChartKind kind) {
  switch (kind) {
    case ChartKind::Loss: return QCoreApplication::translate("RunDashboard", "Loss");
    case ChartKind::TokensPerSec: return QCoreApplication::translate("RunDashboard", "Tokens/sec");
    case ChartKind::LearningRate: return QCoreApplication::translate("RunDashboard", "Learning rate");
    case ChartKind::GradNorm: return QCoreApplication::translate("RunDashboard", "Gradient norm");
    case ChartKind::Memory: return QCoreApplication::translate("RunDashboard", "Memory");
    case ChartKind::GpuActivity:
      return QCoreApplication::translate("RunDashboard", "GPU utilisation and power");
    case ChartKind::Rewards: return QCoreApplication::translate("RunDashboard", "Rewards (DPO, reward model)");
    case ChartKind::Accuracy: return QCoreApplication::translate("RunDashboard", "Reward accuracy");
    case ChartKind::Straggler:
      return QCoreApplication::translate("RunDashboard", "Straggler (slowest rank / mean)");
  }
  return {};
}

QString chartName(ChartKind kind) {
  switch (kind) {
    case ChartKind::Loss: return QStringLiteral("loss");
    case ChartKind::TokensPerSec: return QStringLiteral("tokens-per-sec");
    case ChartKind::LearningRate: return QStringLiteral("learning-rate");
    case ChartKind::GradNorm: return QStringLiteral("grad-norm");
    case ChartKind::Memory: return QStringLiteral("memory");
    case ChartKind::GpuActivity: return QStringLiteral("gpu-activity");
    case ChartKind::Rewards: return QStringLiteral("rewards");
    case ChartKind::Accuracy: return QStringLiteral("accuracy");
    case ChartKind::Straggler: return QStringLiteral("straggler");
  }
  return {};
}

}  // namespace studio::ui
