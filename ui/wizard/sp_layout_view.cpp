#include "studio/ui/wizard/sp_layout_view.h"

#include <QPainter>

#include <algorithm>
#include <cmath>

namespace studio::ui {
namespace {

constexpr int kMargin = 8;
constexpr int kBarHeight = 26;
constexpr int kCaption = 18;
constexpr int kGpuHeight = 30;
constexpr int kGpuGap = 4;
constexpr int kLine = 18;
constexpr int kMaxNodesDrawn = 8;  // more nodes repeat the same rows: the caption says how many

QString bytes_text(int64_t bytes) {
  const double b = double(bytes);
  if (b >= 1024.0 * 1024 * 1024) return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 2);
  if (b >= 1024.0 * 1024) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024), 0, 'f', 1);
  if (b >= 1024.0) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(bytes);
}

}  // namespace

SpLayoutView::SpLayoutView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("spLayout"));
  setAccessibleName(tr("Sequence-parallel layout"));
  setMinimumHeight(180);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void SpLayoutView::setPicture(const studio::SpPicture& picture, int64_t layers) {
  picture_ = picture;
  layers_ = layers;
  setAccessibleDescription(trafficLines().join(QLatin1Char('\n')));
  updateGeometry();
  update();
}

void SpLayoutView::clearPicture() {
  picture_.reset();
  update();
}

QColor SpLayoutView::rankColor(int sp_rank) const {
  const int n = picture_ ? std::max(1, picture_->sp) : 1;
  // Evenly spaced hues, mid saturation and value: distinct neighbours on light and dark themes.
  return QColor::fromHsv((sp_rank * 360 / n + 200) % 360, 150, 215);
}

QRect SpLayoutView::sequenceBar() const {
  return QRect(kMargin, kMargin + kCaption, width() - 2 * kMargin, kBarHeight);
}

QRect SpLayoutView::headsBar() const {
  const QRect seq = sequenceBar();
  return QRect(seq.left(), seq.bottom() + 1 + kCaption, seq.width(), kBarHeight);
}

QRect SpLayoutView::gridArea() const {
  const bool heads = picture_ && picture_->ulysses > 1;
  const int top = (heads ? headsBar() : sequenceBar()).bottom() + 1 + kCaption;
  const int nodes = picture_ ? std::min(picture_->nodes, kMaxNodesDrawn) : 1;
  return QRect(kMargin, top, width() - 2 * kMargin, nodes * (kGpuHeight + kGpuGap));
}

QRect SpLayoutView::spanRect(int sp_rank, int k) const {
  if (!picture_ || sp_rank < 0 || sp_rank >= picture_->sp) return {};
  const auto& spans = picture_->ranks[size_t(sp_rank)].tokens;
  if (k < 0 || k >= int(spans.size())) return {};
  const QRect bar = sequenceBar();
  const int x0 = bar.left() + int(std::lround(spans[size_t(k)].begin * bar.width()));
  const int x1 = bar.left() + int(std::lround(spans[size_t(k)].end * bar.width()));
  return QRect(x0, bar.top(), std::max(1, x1 - x0), bar.height());
}

QRect SpLayoutView::headsRect(int sp_rank) const {
  if (!picture_ || picture_->ulysses <= 1 || sp_rank < 0 || sp_rank >= picture_->sp) return {};
  const auto& r = picture_->ranks[size_t(sp_rank)];
  const QRect bar = headsBar();
  // Within its ring rank's share of the bar: ring ranks side by side, their Ulysses head groups.
  const double ring_w = double(bar.width()) / picture_->ring;
  const double left = bar.left() + r.ring_index * ring_w + r.ulysses_index * ring_w / picture_->ulysses;
  return QRect(int(std::lround(left)), bar.top(),
               std::max(1, int(std::lround(ring_w / picture_->ulysses))), bar.height());
}

QRect SpLayoutView::gpuRect(int global_rank) const {
  if (!picture_ || global_rank < 0 || global_rank >= int(picture_->ranks.size())) return {};
  const QRect area = gridArea();
  const int per_node = picture_->gpus_per_node;
  const int node = global_rank / per_node, col = global_rank % per_node;
  if (node >= kMaxNodesDrawn) return {};
  const double w = double(area.width() - (per_node - 1) * kGpuGap) / per_node;
  const int x = area.left() + int(std::lround(col * (w + kGpuGap)));
  return QRect(x, area.top() + node * (kGpuHeight + kGpuGap), std::max(1, int(std::lround(w))),
               kGpuHeight);
}

QStringList SpLayoutView::trafficLines() const {
  QStringList out;
  if (!picture_) return out;
  if (!picture_->problem.empty()) out << tr("Not possible: %1.").arg(QString::fromStdString(picture_->problem));
  for (const studio::SpTransfer& t : picture_->per_layer)
    out << tr("%1: %2 x %3 per layer forward, x %4 layers; backward: %5.")
               .arg(QString::fromStdString(t.what), bytes_text(t.bytes))
               .arg(t.times)
               .arg(layers_)
               .arg(QString::fromStdString(t.backward));
  if (picture_->sp == 1) out << tr("No sequence parallelism: every GPU holds whole sequences.");
  return out;
}

QSize SpLayoutView::sizeHint() const {
  const int nodes = picture_ ? std::min(picture_->nodes, kMaxNodesDrawn) : 1;
  const int lines = int(trafficLines().size()) + 1;
  return QSize(480, 2 * kMargin + 3 * kCaption + 2 * kBarHeight + nodes * (kGpuHeight + kGpuGap) +
                        lines * kLine);
}

void SpLayoutView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  const QColor text = palette().color(QPalette::WindowText);
  const QColor frame = palette().color(QPalette::Mid);
  p.fillRect(rect(), palette().color(QPalette::Base));
  if (!picture_) {
    p.setPen(text);
    p.drawText(rect(), Qt::AlignCenter, tr("The layout appears once the model is read."));
    return;
  }
  const studio::SpPicture& pic = *picture_;
  const QFontMetrics fm(font());
  // The sequence of one group, cut by SP rank.
  p.setPen(text);
  p.drawText(QRect(kMargin, kMargin, width(), kCaption), Qt::AlignLeft | Qt::AlignVCenter,
             tr("One sequence of %1 tokens: what each of the %2 SP ranks of a group holds (%3 each)")
                 .arg(pic.tokens)
                 .arg(pic.sp)
                 .arg(pic.tokens_per_rank));
  for (int s = 0; s < pic.sp; ++s)
    for (int k = 0; k < int(pic.ranks[size_t(s)].tokens.size()); ++k) {
      const QRect r = spanRect(s, k);
      p.fillRect(r, rankColor(s));
      p.setPen(frame);
      p.drawRect(r.adjusted(0, 0, -1, -1));
      const QString label = QString::number(s);
      if (fm.horizontalAdvance(label) + 4 < r.width()) {
        p.setPen(Qt::black);
        p.drawText(r, Qt::AlignCenter, label);
      }
    }
  if (pic.ulysses > 1) {
    const QRect bar = headsBar();
    p.setPen(text);
    p.drawText(QRect(kMargin, bar.top() - kCaption, width(), kCaption), Qt::AlignLeft | Qt::AlignVCenter,
               tr("During attention, after the all-to-all: the heads each rank attends over "
                  "(whole sequence of its ring rank)"));
    for (int s = 0; s < pic.sp; ++s) {
      const QRect r = headsRect(s);
      p.fillRect(r, rankColor(s));
      p.setPen(frame);
      p.drawRect(r.adjusted(0, 0, -1, -1));
      const auto& rk = pic.ranks[size_t(s)];
      const QString label = tr("heads %1-%2").arg(rk.heads_begin).arg(rk.heads_end - 1);
      p.setPen(Qt::black);
      if (fm.horizontalAdvance(label) + 4 < r.width())
        p.drawText(r, Qt::AlignCenter, label);
      else if (fm.horizontalAdvance(QString::number(s)) + 4 < r.width())
        p.drawText(r, Qt::AlignCenter, QString::number(s));
    }
  }
  // The GPUs: a row per node, each box its SP rank's colour, labelled rank / replica.
  const QRect grid = gridArea();
  p.setPen(text);
  p.drawText(QRect(kMargin, grid.top() - kCaption, width(), kCaption), Qt::AlignLeft | Qt::AlignVCenter,
             tr("%1 node(s) x %2 GPUs: %3 data-parallel replica(s) of the SP group%4")
                 .arg(pic.nodes)
                 .arg(pic.gpus_per_node)
                 .arg(pic.replicas)
                 .arg(pic.nodes > kMaxNodesDrawn
                          ? tr(" (the first %1 nodes drawn)").arg(kMaxNodesDrawn)
                          : QString()));
  for (const studio::SpRankPicture& r : pic.ranks) {
    const QRect box = gpuRect(r.global_rank);
    if (box.isEmpty()) continue;
    p.fillRect(box, rankColor(r.sp_rank));
    p.setPen(frame);
    p.drawRect(box.adjusted(0, 0, -1, -1));
    const QString label = tr("%1 | sp %2 | dp %3").arg(r.global_rank).arg(r.sp_rank).arg(r.global_rank / std::max(1, pic.sp));
    p.setPen(Qt::black);
    p.drawText(box, Qt::AlignCenter,
               fm.horizontalAdvance(label) + 4 < box.width() ? label : QString::number(r.global_rank));
  }
  // What travels.
  int y = grid.bottom() + kMargin;
  p.setPen(text);
  for (const QString& line : trafficLines()) {
    p.drawText(QRect(kMargin, y, width() - 2 * kMargin, kLine), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(line, Qt::ElideRight, width() - 2 * kMargin));
    y += kLine;
  }
}

}  // namespace studio::ui
