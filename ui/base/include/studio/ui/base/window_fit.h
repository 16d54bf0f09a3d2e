#pragma once
// Top-level windows and dialogs open at a size that fits their content and the screen, over
// their parent (or centred on the screen). With no window manager (a bare X server, as in VNC or
// xpra sessions on a cluster's login node) nothing else sizes or places a window: a QDialog would
// map at Qt's default 500 x 360 in the top-left corner.
#include <QGuiApplication>
#include <QScreen>
#include <QWidget>
#include <algorithm>

namespace studio::ui {

// Resizes the top-level `w` to `preferred` (the size its content is designed for), at least its
// layout's size hint and at most 95% of the available screen, and moves it over its parent
// window when that is shown (else to the screen's centre), wholly on the screen.
inline void fitToScreen(QWidget* w, QSize preferred = {}) {
  QWidget* parent = w->parentWidget() ? w->parentWidget()->window() : nullptr;
  QScreen* screen = parent && parent->screen() ? parent->screen() : QGuiApplication::primaryScreen();
  if (screen == nullptr) return;
  const QRect avail = screen->availableGeometry();
  w->ensurePolished();
  QSize size = preferred.expandedTo(w->sizeHint()).expandedTo(w->minimumSizeHint());
  size = size.boundedTo(QSize(avail.width() * 95 / 100, avail.height() * 95 / 100));
  w->resize(size);
  QRect g(QPoint(0, 0), size);
  g.moveCenter(parent && parent->isVisible() ? parent->frameGeometry().center() : avail.center());
  g.moveLeft(std::clamp(g.left(), avail.left(), std::max(avail.left(), avail.right() - g.width() + 1)));
  g.moveTop(std::clamp(g.top(), avail.top(), std::max(avail.top(), avail.bottom() - g.height() + 1)));
  w->move(g.topLeft());
}

}  // namespace studio::ui
