#include "studio/ui/runs/runs_model.h"

#include <cmath>

#include <QLocale>
#include <QPainter>
#include <QPixmap>
#include <QSet>

#include "studio/ui/runs/run_store.h"

namespace studio::ui {

QString spText(const RunInfo& run) {
  if (run.spSize <= 0) return {};
  if (run.spSize == 1 || run.spMode.isEmpty()) return QString::number(run.spSize);
  return QStringLiteral("%1 (%2)").arg(run.spSize).arg(run.spMode);
}

QString stepText(const RunInfo& run) {
  if (run.lastStep <= 0 && run.maxSteps <= 0) return {};
  if (run.maxSteps <= 0) return QString::number(run.lastStep);
  return QStringLiteral("%1/%2").arg(run.lastStep).arg(run.maxSteps);
}

RunsModel::RunsModel(RunStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store), rows_(store->runs()) {
  connect(store_, &RunStore::runsChanged, this, &RunsModel::sync);
}

int RunsModel::rowOf(const QString& dir) const {
  for (int row = 0; row < rows_.size(); ++row)
    if (rows_[row].dir == dir) return row;
  return -1;
}

void RunsModel::sync() {
  const QVector<RunInfo> target = store_->runs();
  QSet<QString> targetDirs;
  for (const RunInfo& r : target) targetDirs.insert(r.dir);
  for (int row = static_cast<int>(rows_.size()) - 1; row >= 0; --row) {
    if (targetDirs.contains(rows_[row].dir)) continue;
    beginRemoveRows({}, row, row);
    rows_.remove(row);
    endRemoveRows();
  }
  // The rows that stay, in their new order: a run's start time can become known (its start
  // event arrives) and move it.
  QSet<QString> kept;
  for (const RunInfo& r : rows_) kept.insert(r.dir);
  QVector<RunInfo> keptInOrder;
  for (const RunInfo& r : target)
    if (kept.contains(r.dir)) keptInOrder << r;
  reorder(keptInOrder);
  // Now rows_ is `target` less the new runs, in the same order: insert those where they belong.
  for (int i = 0; i < target.size(); ++i) {
    if (i >= rows_.size() || rows_[i].dir != target[i].dir) {
      beginInsertRows({}, i, i);
      rows_.insert(i, target[i]);
      endInsertRows();
    } else if (rows_[i] != target[i]) {
      rows_[i] = target[i];
      emit dataChanged(index(i, 0), index(i, ColumnCount - 1));
    }
  }
}

void RunsModel::reorder(const QVector<RunInfo>& target) {
  bool same = true;
  for (int i = 0; i < rows_.size() && same; ++i) same = rows_[i].dir == target[i].dir;
  if (same) return;
  emit layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
  QHash<QString, int> newRow;
  for (int i = 0; i < target.size(); ++i) newRow.insert(target[i].dir, i);
  const QModelIndexList from = persistentIndexList();
  QModelIndexList to;
  to.reserve(from.size());
  for (const QModelIndex& i : from) to << index(newRow.value(rows_[i.row()].dir), i.column());
  // Keep the old information for now; the caller emits dataChanged for what differs.
  QVector<RunInfo> reordered(target.size());
  for (const RunInfo& r : rows_) reordered[newRow.value(r.dir)] = r;
  rows_ = reordered;
  changePersistentIndexList(from, to);
  emit layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

int RunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QColor RunsModel::stateColor(RunState state) {
  switch (state) {
    case RunState::Starting:
      return QColor(0x3b, 0x82, 0xf6);  // blue
    case RunState::Running:
      return QColor(0x22, 0xc5, 0x5e);  // green
    case RunState::Finished:
      return QColor(0x6b, 0x72, 0x80);  // grey: nothing to do
    case RunState::Failed:
      return QColor(0xef, 0x44, 0x44);  // red
    case RunState::Stopped:
      return QColor(0xf5, 0x9e, 0x0b);  // amber
    case RunState::Lost:
      return QColor(0xa8, 0x55, 0xf7);  // purple: needs a look, not necessarily a failure
    case RunState::Queued:
      return QColor(0x93, 0xc5, 0xfd);  // pale blue: Starting's, still waiting
    case RunState::Unknown:
      break;
  }
  return QColor(0x9c, 0xa3, 0xaf);
}

QIcon RunsModel::stateIcon(RunState state) const {
  const int key = static_cast<int>(state);
  auto it = icons_.find(key);
  if (it != icons_.end()) return *it;
  QPixmap pixmap(16, 16);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(Qt::NoPen);
  painter.setBrush(stateColor(state));
  painter.drawEllipse(QRectF(3, 3, 10, 10));
  painter.end();
  return *icons_.insert(key, QIcon(pixmap));
}

QVariant RunsModel::display(const RunInfo& run, int column) const {
  switch (column) {
    case NameColumn:
      // A sweep's points read as one group: "SWEEP / NN-key=value,...".
      return run.sweep.isEmpty() ? run.name
                                 : run.sweep + QStringLiteral(" / ") +
                                       (run.sweepPoint.isEmpty() ? run.name : run.sweepPoint);
    case StateColumn:
      return run.stateText;
    case StageColumn:
      return run.stage;
    case SpColumn:
      return spText(run);
    case StepColumn:
      return stepText(run);
    case LossColumn:
      return std::isfinite(run.lastLoss) ? QString::number(run.lastLoss, 'f', 4) : QString();
    case StartedColumn:
      return run.started.isValid()
                 ? QLocale().toString(run.started.toLocalTime(), QLocale::ShortFormat)
                 : QString();
    case HostColumn:
      return run.host;
    default:
      return {};
  }
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const RunInfo& run = rows_[index.row()];
  switch (role) {
    case Qt::DisplayRole:
      return display(run, index.column());
    case Qt::ToolTipRole:
      if (index.column() == StateColumn && !run.reason.isEmpty())
        return QStringLiteral("%1: %2").arg(run.stateText, run.reason) +
               (run.readProblems.isEmpty() ? QString() : QLatin1Char('\n') + run.readProblems);
      if (index.column() == NameColumn)
        return run.readProblems.isEmpty() ? run.dir : run.dir + QLatin1Char('\n') + run.readProblems;
      return {};
    case Qt::DecorationRole:
      return index.column() == StateColumn ? QVariant(stateIcon(run.state)) : QVariant();
    case Qt::TextAlignmentRole:
      if (index.column() == StepColumn || index.column() == LossColumn)
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case DirRole:
      return run.dir;
    case StateRole:
      return static_cast<int>(run.state);
    case SortRole:
      switch (index.column()) {
        case SpColumn:
          return run.spSize;
        case StepColumn:
          return run.lastStep;
        case LossColumn:  // runs without a loss yet sort after every number
          return std::isfinite(run.lastLoss) ? run.lastLoss : std::numeric_limits<double>::max();
        case StartedColumn:
          return run.started;
        case StateColumn:
          return static_cast<int>(run.state);
        default:
          return display(run, index.column()).toString().toLower();
      }
    default:
      return {};
  }
}

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case NameColumn:
      return tr("Name");
    case StateColumn:
      return tr("State");
    case StageColumn:
      return tr("Stage");
    case SpColumn:
      return tr("SP");
    case StepColumn:
      return tr("Step");
    case LossColumn:
      return tr("Loss");
    case StartedColumn:
      return tr("Started");
    case HostColumn:
      return tr("Host");
    default:
      return {};
  }
}

}  // namespace studio::ui
