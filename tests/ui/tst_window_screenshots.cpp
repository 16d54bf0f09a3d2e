// Every window and dialog of the studio on a real X server (Xvfb and the xcb platform, as on a
// cluster's login node over VNC or xpra), opened as a user opens them: the main window, each page
// of the New run wizard on the demo project, the Hosts and Attach remote run dialogs, Qt's own
// dialogs, and the host-key and password questions. With no window manager, or under the one
// STUDIO_TEST_WINDOW_MANAGER names (openbox: the common desktop case, frames and all), started by
// the test on its display. Each window is checked: what the screen shows of it is the widget's own
// rendering (QWidget::grab()), read two ways: the X server's pixels (the root window, as a VNC
// server reads them) and the screen as xwd reconstructs it (one read per visual and colormap); it
// is painted (not one uniform colour), wholly on the screen, at least its layout's minimum size,
// and no label, button or field is cut off by its parent or shorter than its text. With
// STUDIO_SCREENSHOT_DIR set the screenshots are written there (scripts/screenshots.sh:
// docs/screenshots); a window whose screen differs from its rendering leaves the three images
// under the build tree's tests/ui/window-screenshots-failed/.
#include <QAbstractButton>
#include <QAbstractScrollArea>
#include <QScrollBar>
#include <QAccessible>
#include <QApplication>
#include <QComboBox>
#include <QCursor>
#include <QDockWidget>
#include <QDir>
#include <QGroupBox>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QProcess>
#include <QScopeGuard>
#include <QScreen>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTabWidget>
#include <QSet>
#include <QTemporaryDir>
#include <QWizard>
#include <QtEndian>
#include <QtTest>
#include <csignal>
#include <functional>
#include <memory>

#include <sys/prctl.h>

#include "studio/remote/host_key.h"
#include "studio/remote/ssh_auth.h"
#include "studio/ui/dashboard/failure_panel.h"
#include "studio/ui/dashboard/rank_time_view.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/remote/gui_prompts.h"
#include "studio/ui/main_window.h"
#include "studio/ui/shell/app_theme.h"
#include "studio/ui/shell/comparison_dialog.h"
#include "studio/ui/shell/runs_panel.h"
#include "studio/ui/wizard/memory_page.h"
#include "studio/ui/wizard/parallelism_page.h"
#include "studio/ui/wizard/review_page.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/ui/wizard/sweep_dialog.h"
#include "studio/ui/wizard/sp_layout_view.h"

using studio::ui::MainWindow;

namespace {

QProcess* g_xvfb = nullptr;
QProcess* g_windowManager = nullptr;
QString g_windowManagerProblem;

// `p`, once started, ends with the test however the test ends (a crash, CTest's timeout).
void endsWithTest(QProcess* p) {
  p->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
}

// Xvfb, 1600 x 1000 (the screen the issue names), on a display it picks itself (-displayfd: two
// of these tests started at once never share one); DISPLAY and QT_QPA_PLATFORM=xcb point Qt at it.
// False when no server starts.
bool startXvfb() {
  auto* p = new QProcess;
  p->setProcessChannelMode(QProcess::ForwardedErrorChannel);
  endsWithTest(p);
  p->start(QStringLiteral("Xvfb"),
           {QStringLiteral("-displayfd"), QStringLiteral("1"), QStringLiteral("-screen"),
            QStringLiteral("0"), QStringLiteral("1600x1000x24"), QStringLiteral("-nolisten"),
            QStringLiteral("tcp")});
  // It writes the display's number once it accepts connections.
  QByteArray display;
  while (!display.endsWith('\n') && p->waitForReadyRead(10000))
    display += p->readAllStandardOutput();
  if (!display.endsWith('\n')) {
    p->kill();
    p->waitForFinished();
    delete p;
    return false;
  }
  g_xvfb = p;
  qputenv("DISPLAY", ":" + display.trimmed());
  qputenv("QT_QPA_PLATFORM", "xcb");
  return true;
}

// The window manager STUDIO_TEST_WINDOW_MANAGER names, on that display, once it manages the screen
// (it has set the root window's _NET_SUPPORTING_WM_CHECK). "" when none is asked for or it runs,
// else what went wrong.
QString startWindowManager() {
  const QString wm = qEnvironmentVariable("STUDIO_TEST_WINDOW_MANAGER");
  if (wm.isEmpty()) return {};
  g_windowManager = new QProcess;
  g_windowManager->setStandardOutputFile(QProcess::nullDevice());
  g_windowManager->setProcessChannelMode(QProcess::ForwardedErrorChannel);
  endsWithTest(g_windowManager);
  g_windowManager->start(wm, {});
  if (!g_windowManager->waitForStarted(5000))
    return wm + QStringLiteral(" does not start (scripts/setup.sh installs openbox)");
  for (int i = 0; i < 100 && g_windowManager->state() == QProcess::Running; ++i) {
    QProcess xprop;
    xprop.start(QStringLiteral("xprop"),
                {QStringLiteral("-root"), QStringLiteral("_NET_SUPPORTING_WM_CHECK")});
    if (!xprop.waitForFinished(5000))
      return QStringLiteral("xprop does not run (scripts/setup.sh installs x11-utils)");
    if (xprop.readAllStandardOutput().contains("window id")) return {};
    QThread::msleep(100);
  }
  return wm + QStringLiteral(" never managed the screen");
}

// studio-train: this build's, else $STUDIO_TRAIN (a build without the engine); "" when neither.
QString engineProgram() {
#ifdef STUDIO_TRAIN_EXE
  return QStringLiteral(STUDIO_TRAIN_EXE);
#else
  return qEnvironmentVariable("STUDIO_TRAIN");
#endif
}

// What the X server holds in `rect` of the screen: the root window's pixels, as a VNC server
// reads them.
QImage serverPixels(const QRect& rect) {
  return QGuiApplication::primaryScreen()
      ->grabWindow(0, rect.x(), rect.y(), rect.width(), rect.height())
      .toImage()
      .convertToFormat(QImage::Format_RGB32);
}

// What the X server shows in `w`'s frame.
QImage screenGrab(QWidget* w) {
  return serverPixels(w->frameGeometry());
}

// The screen as `xwd -root` reads it: the reproduction, and the way of every grabber built
// on xwd's multi-visual code (Java's Robot among them), which reads the screen one visual and
// colormap at a time, each through the lowest window that has them and holds the others wholly.
// Null with `error` set when xwd fails or writes other than 8-bit red, green and blue channels.
QImage xwdScreen(QString* error) {
  QProcess xwd;
  xwd.start(QStringLiteral("xwd"), {QStringLiteral("-root"), QStringLiteral("-silent")});
  if (!xwd.waitForFinished(20000) || xwd.exitStatus() != QProcess::NormalExit ||
      xwd.exitCode() != 0) {
    *error = QStringLiteral("xwd -root fails (scripts/setup.sh installs x11-apps): ") +
             QString::fromLocal8Bit(xwd.readAllStandardError()).trimmed();
    return {};
  }
  const QByteArray data = xwd.readAllStandardOutput();
  // XWDFileHeader: 25 big-endian 32-bit fields, then the window's name, the colours, the pixels
  // (ZPixmap; 32 bits a pixel from one read of the root window, 24 packed from the multi-visual
  // one).
  enum {
    kHeaderSize,
    kFormat = 2,
    kWidth = 4,
    kHeight,
    kByteOrder = 7,
    kBitsPerPixel = 11,
    kBytesPerLine,
    kRedMask = 14,
    kGreenMask,
    kBlueMask,
    kColours = 19,
    kFields = 25
  };
  if (data.size() < kFields * 4) {
    *error = QStringLiteral("xwd wrote %1 bytes").arg(data.size());
    return {};
  }
  auto field = [&data](int i) { return qFromBigEndian<quint32>(data.constData() + 4 * i); };
  const qint64 width = field(kWidth), height = field(kHeight), stride = field(kBytesPerLine);
  const int bytes = int(field(kBitsPerPixel) / 8);
  const qint64 start = qint64(field(kHeaderSize)) + 12 * qint64(field(kColours));
  if (field(kFormat) != 2 || (bytes != 3 && bytes != 4) || field(kRedMask) != 0xff0000 ||
      field(kGreenMask) != 0xff00 || field(kBlueMask) != 0xff || stride < bytes * width ||
      start + height * stride > data.size()) {
    *error = QStringLiteral("xwd's image is not of 8-bit RGB pixels (format %1, %2 bits a pixel)")
                 .arg(field(kFormat))
                 .arg(field(kBitsPerPixel));
    return {};
  }
  QImage img(int(width), int(height), QImage::Format_RGB32);
  const bool msbFirst = field(kByteOrder) != 0;
  for (int y = 0; y < img.height(); ++y) {
    const auto* row = reinterpret_cast<const uchar*>(data.constData() + start + y * stride);
    auto* out = reinterpret_cast<QRgb*>(img.scanLine(y));
    for (int x = 0; x < img.width(); ++x) {
      const uchar* p = row + x * bytes;
      quint32 pixel = 0;
      for (int i = 0; i < bytes; ++i)
        pixel |= quint32(p[msbFirst ? i : bytes - 1 - i]) << (8 * (bytes - 1 - i));
      out[x] = 0xff000000u | pixel;
    }
  }
  return img;
}

// "" when `screen` shows `rendered` (two images of one window) within `compared`: at most 0.5% of
// those pixels differ by more than 32 in a channel (a text cursor's blink). Else how much differs.
QString differences(const QImage& screen, const QImage& rendered, const QRegion& compared) {
  if (screen.size() != rendered.size())
    return QStringLiteral("%1 x %2 on the screen, %3 x %4 rendered")
        .arg(screen.width())
        .arg(screen.height())
        .arg(rendered.width())
        .arg(rendered.height());
  qint64 total = 0, differing = 0, black = 0;
  for (const QRect& r : compared)
    for (int y = r.top(); y <= r.bottom(); ++y)
      for (int x = r.left(); x <= r.right(); ++x) {
        const QRgb a = screen.pixel(x, y), b = rendered.pixel(x, y);
        ++total;
        if (std::max({std::abs(qRed(a) - qRed(b)), std::abs(qGreen(a) - qGreen(b)),
                      std::abs(qBlue(a) - qBlue(b))}) <= 32)
          continue;
        ++differing;
        if ((a & 0xffffff) == 0) ++black;
      }
  if (differing * 200 <= total) return {};
  return QStringLiteral(
             "%1% of its %2 pixels differ from the widget's own rendering, %3% of them black")
      .arg(100.0 * differing / total, 0, 'f', 1)
      .arg(total)
      .arg(100 * black / differing);
}

// Whether the top-level `t` belongs to the window `w` (a dialog or wizard opened over it): with or
// without a window manager it is stacked above `w`.
bool ownedBy(const QWidget* t, const QWidget* w) {
  for (const QWidget* p = t->parentWidget(); p; p = p->parentWidget())
    if (p->window() == w) return true;
  return false;
}

// "" when the screen shows the window `w` as the widget renders itself, both as the X server holds
// it and as xwd reads it; else each reader's difference. The parts of `w` under its own dialogs
// are left out. With `failedDir`, the three images of a failure are saved there as `name`-*.png.
QString screenProblem(QWidget* w, const QString& name = {}, const QString& failedDir = {}) {
  const QRect client(w->mapToGlobal(QPoint(0, 0)), w->size());
  QRegion compared = QRegion(client) & QGuiApplication::primaryScreen()->geometry();
  for (QWidget* t : QApplication::topLevelWidgets())
    if (t != w && t->isVisible() && ownedBy(t, w)) compared -= t->frameGeometry();
  compared.translate(-client.topLeft());
  const QImage rendered = w->grab().toImage().convertToFormat(QImage::Format_RGB32);
  QString error;
  const QImage xwd = xwdScreen(&error);
  if (xwd.isNull()) return error;
  const struct {
    QString reader, file;
    QImage image;
  } screens[] = {
      {QStringLiteral("the X server's pixels"), QStringLiteral("server"), serverPixels(client)},
      {QStringLiteral("xwd -root"), QStringLiteral("xwd"), xwd.copy(client)}};
  QStringList problems;
  for (const auto& screen : screens) {
    const QString d = differences(screen.image, rendered, compared);
    if (d.isEmpty()) continue;
    problems << screen.reader + QStringLiteral(": ") + d;
    if (!failedDir.isEmpty() && QDir().mkpath(failedDir)) {
      screen.image.save(
          QDir(failedDir).filePath(QStringLiteral("%1-%2.png").arg(name, screen.file)));
      rendered.save(QDir(failedDir).filePath(name + QStringLiteral("-rendered.png")));
    }
  }
  return problems.join(QStringLiteral("; "));
}

// "" when `img` looks painted: many colours, none covering 99% of it, not mostly black (an
// unpainted window is one colour, black on a bare X server).
QString paintedProblem(const QImage& img) {
  if (img.isNull() || img.width() < 50 || img.height() < 50)
    return QStringLiteral("grabbed %1 x %2").arg(img.width()).arg(img.height());
  QHash<QRgb, int> counts;
  int total = 0;
  for (int y = 0; y < img.height(); y += 2)
    for (int x = 0; x < img.width(); x += 2) {
      ++counts[img.pixel(x, y)];
      ++total;
    }
  int most = 0;
  for (int c : counts) most = std::max(most, c);
  const int black = counts.value(qRgb(0, 0, 0));
  if (counts.size() < 16) return QStringLiteral("only %1 colours").arg(counts.size());
  if (most > total * 99 / 100) return QStringLiteral("one colour covers %1%").arg(100 * most / total);
  if (black > total * 3 / 10) return QStringLiteral("%1% black").arg(100 * black / total);
  return {};
}

bool insideScrolledContent(const QWidget* w, const QWidget* top) {
  for (const QWidget* p = w; p && p != top; p = p->parentWidget())
    if (auto* area = qobject_cast<const QAbstractScrollArea*>(p->parentWidget()))
      if (p == area->viewport()) return true;
  return false;
}

QString describe(const QWidget* w) {
  QString text;
  if (auto* l = qobject_cast<const QLabel*>(w)) text = l->text();
  else if (auto* b = qobject_cast<const QAbstractButton*>(w)) text = b->text();
  return QStringLiteral("%1 '%2' \"%3\"")
      .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName(), text.left(60));
}

// Every clipped control of the window `top`: outside an ancestor's rectangle, or narrower (or,
// wrapped, shorter) than its content needs. Controls inside scroll areas scroll, and are left out.
QStringList clippedControls(QWidget* top) {
  QStringList out;
  const QRect screen = QGuiApplication::primaryScreen()->geometry();
  if (!screen.contains(top->frameGeometry()))
    out << QStringLiteral("the window %1 is not wholly on the screen %2")
               .arg(QVariant(top->frameGeometry()).toString(), QVariant(screen).toString());
  const QSize min = top->minimumSizeHint();
  if (top->width() < min.width() || top->height() < min.height())
    out << QStringLiteral("the window is %1 x %2, its layout needs %3 x %4")
               .arg(top->width()).arg(top->height()).arg(min.width()).arg(min.height());
  for (QWidget* w : top->findChildren<QWidget*>()) {
    const bool control = qobject_cast<QLabel*>(w) || qobject_cast<QAbstractButton*>(w) ||
                         qobject_cast<QLineEdit*>(w) || qobject_cast<QComboBox*>(w);
    if (!control || !w->isVisibleTo(top) || w->width() <= 0 || insideScrolledContent(w, top))
      continue;
    if (w->window() != top) continue;
    // Within every ancestor up to the window.
    for (QWidget* p = w->parentWidget(); p; p = p->parentWidget()) {
      const QRect r(w->mapTo(p, QPoint(0, 0)), w->size());
      if (!p->rect().adjusted(-1, -1, 1, 1).contains(r)) {
        out << describe(w) + QStringLiteral(" is cut off by its parent ") +
                   QString::fromLatin1(p->metaObject()->className());
        break;
      }
      if (p == top) break;
    }
    if (auto* l = qobject_cast<QLabel*>(w)) {
      if (l->text().isEmpty() || l->pixmap().isNull() == false) continue;
      if (l->wordWrap()) {
        if (l->heightForWidth(l->width()) > l->height() + 1)
          out << describe(w) + QStringLiteral(" needs %1 px of height, has %2")
                                   .arg(l->heightForWidth(l->width())).arg(l->height());
      } else if (l->minimumSizeHint().width() > l->width() + 1) {
        out << describe(w) + QStringLiteral(" needs %1 px of width, has %2")
                                 .arg(l->minimumSizeHint().width()).arg(l->width());
      }
    } else if (auto* b = qobject_cast<QAbstractButton*>(w)) {
      if (!b->text().isEmpty() && b->minimumSizeHint().width() > b->width() + 1)
        out << describe(w) + QStringLiteral(" needs %1 px of width, has %2")
                                 .arg(b->minimumSizeHint().width()).arg(b->width());
    }
  }
  return out;
}

bool tabFocusable(QWidget* w, QWidget* top) {
  return w && w != top && w->window() == top && w->isVisibleTo(top) && w->isEnabled() &&
         (w->focusPolicy() & Qt::TabFocus) && !w->focusProxy();
}

// What a screen reader says a control is called: its accessible name, else its text or its
// buddy label's (Qt's accessibility fills the name from those).
QString accessibleName(QWidget* w) {
  QAccessibleInterface* iface = QAccessible::queryAccessibleInterface(w);
  return iface ? iface->text(QAccessible::Name).trimmed() : QString();
}

// The window's controls that Tab reaches, in the order it reaches them.
QList<QWidget*> tabOrder(QWidget* top) {
  QList<QWidget*> order;
  QWidget* w = top;
  for (int i = 0; i < 5000; ++i) {
    w = w->nextInFocusChain();
    if (!w || w == top) break;
    if (tabFocusable(w, top) && !order.contains(w)) order << w;
  }
  return order;
}

QString rectText(const QRect& r) {
  return QStringLiteral("(%1,%2 %3x%4)").arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height());
}

// Where a control sits in reading order: its place on the screen as if every scroll area it is
// in were scrolled to its start. A control scrolled out of view still comes after the ones above
// it (Qt scrolls it into view when it takes the focus); it is not "back up the screen".
QRect readingRect(QWidget* w) {
  QPoint p = w->mapToGlobal(QPoint(0, 0));
  for (QWidget* up = w->parentWidget(); up; up = up->parentWidget())
    if (auto* area = qobject_cast<QAbstractScrollArea*>(up); area && area->viewport()->isAncestorOf(w))
      p += QPoint(area->horizontalScrollBar()->value(), area->verticalScrollBar()->value());
  return QRect(p, w->size());
}

// Keyboard and accessibility basics of the window `top`: every control Tab can reach has an
// accessible name, and Tab moves in reading order: it goes from a control to one wholly above it
// and not to its right (back up the same column, or up and to the left) only once, where the
// cycle wraps from the last control to the first.
QStringList accessibilityProblems(QWidget* top) {
  QStringList out;
  const QList<QWidget*> order = tabOrder(top);
  for (QWidget* w : top->findChildren<QWidget*>())
    if (tabFocusable(w, top) && !order.contains(w))
      out << describe(w) + QStringLiteral(" is never reached by Tab");
  for (QWidget* w : order)
    if (accessibleName(w).isEmpty())
      out << describe(w) + QStringLiteral(" has no accessible name (a text, a buddy label or "
                                          "setAccessibleName)");
  QStringList backwards;
  for (int i = 1; i <= order.size() && order.size() > 1; ++i) {
    QWidget* from = order[i - 1];
    QWidget* to = order[i % order.size()];
    const QRect a = readingRect(from);
    const QRect b = readingRect(to);
    if (b.bottom() < a.top() && b.left() <= a.left() + 2)
      backwards << QStringLiteral("Tab goes back up from %1 %2 to %3 %4")
                       .arg(describe(from), rectText(a), describe(to), rectText(b));
  }
  if (backwards.size() > 1) out << backwards;
  // Alt+letter: each mnemonic of the window's shown buttons, buddied labels, checkable group boxes
  // and menu bar belongs to one control (two make both ambiguous: Qt then does nothing).
  QMultiHash<QString, QString> owners;
  auto add = [&](const QString& text, const QString& who) {
    const QKeySequence mnemonic = QKeySequence::mnemonic(text);
    if (!mnemonic.isEmpty()) owners.insert(mnemonic.toString(), who);
  };
  if (auto* main = qobject_cast<QMainWindow*>(top))
    for (QAction* a : main->menuBar()->actions())
      if (a->isVisible()) add(a->text(), QStringLiteral("menu ") + a->text());
  for (QWidget* w : top->findChildren<QWidget*>()) {
    if (w->window() != top || !w->isVisibleTo(top)) continue;
    if (auto* b = qobject_cast<QAbstractButton*>(w)) add(b->text(), describe(w));
    else if (auto* l = qobject_cast<QLabel*>(w); l && l->buddy()) add(l->text(), describe(w));
    else if (auto* g = qobject_cast<QGroupBox*>(w); g && g->isCheckable()) add(g->title(), describe(w));
  }
  for (const QString& key : owners.uniqueKeys())
    if (owners.count(key) > 1)
      out << QStringLiteral("%1 is the mnemonic of %2").arg(key, QStringList(owners.values(key)).join(QStringLiteral(" and ")));
  return out;
}

}  // namespace

class TestWindowScreenshots : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  std::unique_ptr<MainWindow> window_;
  QString shots_;
  QString engine_;
  QString windowManager_;  // STUDIO_TEST_WINDOW_MANAGER: "" for a bare X server
  QString failedDir_;

  // Waits for `w` on the screen, checks that the screen shows it as it renders itself, grabs it,
  // saves it as `name` when asked, and checks it.
  void check(QWidget* w, const QString& name) {
    QVERIFY2(QTest::qWaitForWindowExposed(w, 10000), qPrintable(name + " never appeared"));
    // What is pending (a dock just hidden, a layout just changed) is laid out first: the picture
    // is of the window as the user then sees it, not of the moment before.
    for (int i = 0; i < 3; ++i) {
      QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
      QCoreApplication::processEvents();
    }
    // Its frames reach the server at once; the wait covers a busy machine and what the pages
    // update asynchronously.
    if (!QTest::qWaitFor([w] { return screenProblem(w).isEmpty(); }, 5000)) {
      const QString problem = screenProblem(w, name, failedDir_);
      QVERIFY2(problem.isEmpty(),
               qPrintable(name + QStringLiteral(": on the screen: ") + problem +
                          QStringLiteral(" (images in ") + failedDir_ + QLatin1Char(')')));
    }
    const QImage img = screenGrab(w);
    if (!shots_.isEmpty()) QVERIFY(img.save(QDir(shots_).filePath(name + QStringLiteral(".png"))));
    const QString painted = paintedProblem(img);
    QVERIFY2(painted.isEmpty(), qPrintable(name + QStringLiteral(": not painted: ") + painted));
    const QStringList clipped = clippedControls(w);
    QVERIFY2(clipped.isEmpty(), qPrintable(name + QStringLiteral(": clipped:\n  ") + clipped.join(QStringLiteral("\n  "))));
    const QStringList keyboard = accessibilityProblems(w);
    QVERIFY2(keyboard.isEmpty(), qPrintable(name + QStringLiteral(": keyboard and accessibility:\n  ") +
                                            keyboard.join(QStringLiteral("\n  "))));
  }

  // Runs `open`, which shows a modal dialog and waits in its event loop; the dialog is checked
  // (and saved as `name`) from inside that loop, then closed. False when it was never checked.
  bool checkModal(const QString& name, const std::function<void()>& open) {
    bool checked = false;
    QTimer::singleShot(0, this, [&] {
      QWidget* dialog = nullptr;
      QTRY_VERIFY(dialog = QApplication::activeModalWidget());
      // Closed however the check ends, so that a failing check does not leave `open` waiting.
      const auto close = qScopeGuard([dialog] { dialog->close(); });
      check(dialog, name);
      checked = !QTest::currentTestFailed();
    });
    open();
    return checked;
  }

  // File > New Run from Demo, as a user opens it; null when it did not open.
  studio::ui::RunWizard* demoWizard() {
    QSignalSpy opened(window_.get(), &MainWindow::demoWizardOpened);
    QAction* demo = menuAction(QStringLiteral("New Run from &Demo"));
    if (!demo) return nullptr;
    demo->trigger();
    if (opened.count() == 0 && !opened.wait(120000)) return nullptr;
    return window_->wizard();
  }

  QAction* menuAction(const QString& text) {
    for (QAction* menu : window_->menuBar()->actions())
      if (menu->menu())
        for (QAction* a : menu->menu()->actions())
          if (a->text() == text) return a;
    return nullptr;
  }

 private slots:
  void initTestCase() {
    QVERIFY2(g_xvfb, "Xvfb could not start (scripts/setup.sh installs it)");
    QVERIFY2(g_windowManagerProblem.isEmpty(), qPrintable(g_windowManagerProblem));
    QCOMPARE(QGuiApplication::platformName(), QStringLiteral("xcb"));
    shots_ = qEnvironmentVariable("STUDIO_SCREENSHOT_DIR");
    if (!shots_.isEmpty()) QVERIFY(QDir().mkpath(shots_));
    windowManager_ = qEnvironmentVariable("STUDIO_TEST_WINDOW_MANAGER");
    failedDir_ = QStringLiteral(STUDIO_BINARY_DIR "/tests/ui/window-screenshots-failed/") +
                 (windowManager_.isEmpty() ? QStringLiteral("bare") : windowManager_);
    QDir(failedDir_).removeRecursively();
    // The pointer out of the way: no window gets a hover or a tooltip from it.
    QCursor::setPos(QGuiApplication::primaryScreen()->geometry().bottomRight());
    QVERIFY(tmp_.isValid());
    engine_ = engineProgram();
    studio::ui::StudioPaths paths;
    paths.engine = engine_;
    paths.resources = QStringLiteral(STUDIO_SOURCE_DIR "/resources");
    paths.runsRoot = tmp_.filePath(QStringLiteral("runs"));
    paths.dataDir = tmp_.filePath(QStringLiteral("data"));
    window_ = std::make_unique<MainWindow>(paths);
    window_->show();
  }

  // The first start: 1480 x 920 on the 1600 x 1000 screen, and the dashboard's loss,
  // tokens/s, per-GPU memory, learning-rate and gradient-norm charts all in view.
  void mainWindow() {
    check(window_.get(), QStringLiteral("main-window"));
    // The window manager's frame around it, when one runs: the test covers that case indeed.
    QTRY_COMPARE(window_->frameGeometry() != window_->geometry(), !windowManager_.isEmpty());
    QCOMPARE(window_->size(), QSize(1480, 920));
    QWidget* dashboard = window_->dashboard();
    auto* area = dashboard->findChild<QAbstractScrollArea*>();
    QVERIFY(area);
    for (const char* chart : {"loss", "tokens-per-sec", "memory", "learning-rate", "grad-norm"}) {
      QWidget* panel = dashboard->findChild<QWidget*>(QLatin1String(chart));
      QVERIFY2(panel, chart);
      const QRect r(panel->mapTo(area->viewport(), QPoint(0, 0)), panel->size());
      QVERIFY2(area->viewport()->rect().contains(r),
               qPrintable(QStringLiteral("%1 is below the fold: %2 in a viewport of %3")
                              .arg(QLatin1String(chart), QVariant(r).toString(),
                                   QVariant(area->viewport()->rect()).toString())));
    }
    // The other tabs, whose controls Tab reaches once they are shown.
    window_->showTab(MainWindow::ConfigTab);
    check(window_.get(), QStringLiteral("main-window-config"));
    window_->showTab(MainWindow::ChatTab);
    check(window_.get(), QStringLiteral("main-window-chat"));
    window_->showTab(MainWindow::DashboardTab);
  }

  // Every action of the main window from the keyboard: each menu of the menu bar and each item
  // of every menu has a mnemonic of its own within its menu (Alt+letter, then the letter), and
  // every action the window holds (the runs list's buttons, the docks' toggles) is in a menu or
  // has a shortcut.
  void everyActionFromTheKeyboard() {
    QStringList problems;
    QSet<QAction*> inMenus;
    std::function<void(QMenu*, const QString&)> walk = [&](QMenu* menu, const QString& path) {
      QHash<QString, QString> letters;
      for (QAction* a : menu->actions()) {
        if (a->isSeparator() || !a->isVisible()) continue;
        inMenus.insert(a);
        const QString name = path + QStringLiteral(" > ") + QString(a->text()).remove(QLatin1Char('&'));
        const QKeySequence m = QKeySequence::mnemonic(a->text());
        if (m.isEmpty())
          problems << name + QStringLiteral(" has no mnemonic");
        else if (letters.contains(m.toString()))
          problems << name + QStringLiteral(" and ") + letters[m.toString()] +
                          QStringLiteral(" share ") + m.toString();
        else
          letters.insert(m.toString(), name);
        if (a->menu()) walk(a->menu(), name);
      }
    };
    QHash<QString, QString> top;
    for (QAction* a : window_->menuBar()->actions()) {
      const QKeySequence m = QKeySequence::mnemonic(a->text());
      if (m.isEmpty()) problems << QStringLiteral("the %1 menu has no mnemonic").arg(a->text());
      else if (top.contains(m.toString())) problems << a->text() + QStringLiteral(" and ") + top[m.toString()] + QStringLiteral(" share ") + m.toString();
      else top.insert(m.toString(), a->text());
      inMenus.insert(a);
      if (a->menu()) walk(a->menu(), QString(a->text()).remove(QLatin1Char('&')));
    }
    for (QAction* a : window_->findChildren<QAction*>()) {
      if (a->isSeparator() || a->text().isEmpty() || inMenus.contains(a)) continue;
      if (qobject_cast<QMenu*>(a->parent())) continue;  // a menu's own action, walked above
      if (a->shortcut().isEmpty())
        problems << QStringLiteral("'%1' is in no menu and has no shortcut").arg(a->text());
    }
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
  }

  // File > New Run from Demo: the demo model is created, the wizard opens on it; each page.
  void wizardPages() {
    if (!QFileInfo(engine_).isExecutable())
      QSKIP("the demo model is made by studio-train: build the engine or set STUDIO_TRAIN");
    studio::ui::RunWizard* wizard = demoWizard();
    QVERIFY(wizard);
    QVERIFY2(wizard->width() >= 1100 && wizard->height() >= 800,
             qPrintable(QStringLiteral("%1 x %2").arg(wizard->width()).arg(wizard->height())));
    for (int index = 1;; ++index) {
      QWizardPage* page = wizard->currentPage();
      QVERIFY(page);
      const QString name = QStringLiteral("wizard-%1-%2")
                               .arg(index, 2, 10, QLatin1Char('0'))
                               .arg(page->title().toLower().replace(QLatin1Char(' '), QLatin1Char('-')));
      check(wizard, name);
      if (QTest::currentTestFailed()) return;
      if (wizard->nextId() == -1) break;
      const int before = wizard->currentId();
      wizard->next();
      QVERIFY2(wizard->currentId() != before, qPrintable(name + QStringLiteral(" does not validate")));
    }
    QVERIFY(wizard->close());
  }

  void hostsDialog() {
    QAction* hosts = menuAction(QStringLiteral("&Hosts..."));
    QVERIFY(hosts);
    hosts->trigger();
    QWidget* dialog = nullptr;
    QTRY_VERIFY(dialog = QApplication::activeModalWidget());
    check(dialog, QStringLiteral("dialog-hosts"));
    dialog->close();
  }

  void attachRemoteRunDialog() {
    QAction* attach = menuAction(QStringLiteral("Attach &Remote Run..."));
    QVERIFY(attach);
    attach->trigger();
    QWidget* dialog = nullptr;
    QTRY_VERIFY(dialog = QApplication::activeModalWidget());
    check(dialog, QStringLiteral("dialog-attach-remote-run"));
    dialog->close();
  }

  // Two runs of the demo (the wizard's launch is not needed: studio-train trains them here)
  // compared: their losses and the config keys that differ.
  void comparisonDialog() {
    if (!QFileInfo(engine_).isExecutable())
      QSKIP("the compared runs are trained by studio-train: build the engine or set STUDIO_TRAIN");
    QStringList dirs;
    for (const char* lr : {"3.0e-3", "1.0e-3"}) {
      const QString out = tmp_.filePath(QStringLiteral("runs/demo-lr-%1").arg(QLatin1String(lr)));
      QProcess train;
      train.setWorkingDirectory(QStringLiteral(STUDIO_SOURCE_DIR));
      train.setProcessChannelMode(QProcess::MergedChannels);
      train.start(
          engine_,
          {QStringLiteral("train"), QStringLiteral("resources/demo/sft_demo.yaml"),
           QStringLiteral("--set"),
           QStringLiteral("model_name_or_path=") + tmp_.filePath(QStringLiteral("data/demo/model")),
           QStringLiteral("--set"), QStringLiteral("output_dir=") + out, QStringLiteral("--set"),
           QStringLiteral("max_steps=20"), QStringLiteral("--set"),
           QStringLiteral("logging_steps=1"), QStringLiteral("--set"),
           QStringLiteral("learning_rate=") + QLatin1String(lr)});
      QVERIFY(train.waitForFinished(240000));
      QVERIFY2(train.exitCode() == 0, train.readAll().right(2000).constData());
      dirs << out;
    }
    studio::ui::ComparisonDialog* dialog = window_->compareRuns(dirs);
    QVERIFY(dialog);
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isLoaded(), 20000);
    QVERIFY(dialog->comparison().differing.contains(QStringLiteral("learning_rate")));
    check(dialog, QStringLiteral("dialog-comparison"));
    check(window_.get(), QStringLiteral("main-window-comparison"));
    dialog->close();
  }

  // studio-train with `args` in the source folder (the demo config's paths are relative to it),
  // `env` added, its output in `log` when given; the exit code.
  int engine(const QStringList& args, const QStringList& env = {}, const QString& log = {}) {
    QProcess p;
    p.setWorkingDirectory(QStringLiteral(STUDIO_SOURCE_DIR));
    auto e = QProcessEnvironment::systemEnvironment();
    for (const QString& kv : env) e.insert(kv.section(QLatin1Char('='), 0, 0), kv.section(QLatin1Char('='), 1));
    p.setProcessEnvironment(e);
    if (!log.isEmpty()) {
      p.setStandardOutputFile(log, QIODevice::Append);
      p.setStandardErrorFile(log, QIODevice::Append);
    }
    p.start(engine_, args);
    if (!p.waitForFinished(300000)) return -1;
    return p.exitCode();
  }
  QString demoModel() const { return tmp_.filePath(QStringLiteral("data/demo/model")); }
  // The demo config with the demo model made here and `extra` lines, written to `path`.
  QString demoConfig(const QString& path, const QStringList& extra) const {
    QFile in(QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/sft_demo.yaml"));
    if (!in.open(QIODevice::ReadOnly)) return {};
    QStringList lines;
    for (const QString& line : QString::fromUtf8(in.readAll()).split(QLatin1Char('\n'))) {
      const QString key = line.section(QLatin1Char(':'), 0, 0).trimmed();
      bool replaced = key == QLatin1String("model_name_or_path") ||
                      key == QLatin1String("dataset_dir");
      for (const QString& e : extra) replaced = replaced || e.section(QLatin1Char(':'), 0, 0) == key;
      if (!replaced) lines << line;
    }
    lines << QStringLiteral("model_name_or_path: ") + demoModel()
          << QStringLiteral("dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data") << extra;
    QFile out(path);
    if (!out.open(QIODevice::WriteOnly)) return {};
    out.write(lines.join(QLatin1Char('\n')).toUtf8() + '\n');
    return path;
  }

  // Planning a long-context run by looking: Qwen2.5-7B at 128k tokens on 2 nodes x 8 GPUs
  // under usp, the Parallelism page's layout, and the Memory page's length planner.
  void planningPages() {
    const QString config = tmp_.filePath(QStringLiteral("plan-7b.yaml"));
    QFile f(config);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("model_name_or_path: " STUDIO_SOURCE_DIR "/resources/model-shapes/qwen2.5-7b\n"
            "stage: sft\ndo_train: true\nfinetuning_type: full\ndataset: demo_sft\n"
            "dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data\ntemplate: qwen\n"
            "cutoff_len: 131072\nbf16: true\nper_device_train_batch_size: 1\n"
            "gradient_checkpointing: true\nsequence_parallel_size: 8\n"
            "sequence_parallel_mode: usp\nzero_stage: 3\n");
    f.write(("output_dir: " + tmp_.filePath(QStringLiteral("runs/plan-7b")) + "\n").toUtf8());
    f.close();
    QVERIFY(window_->openConfigInWizard(config));
    studio::ui::RunWizard* wizard = window_->wizard();
    QVERIFY(wizard);
    studio::ui::ParallelismPage* parallelism = wizard->parallelismPage();
    while (wizard->currentPage() != parallelism) {
      const int before = wizard->currentId();
      wizard->next();
      QVERIFY2(wizard->currentId() != before, "a page before Parallelism does not validate");
    }
    parallelism->nodesBox()->setValue(2);
    parallelism->gpusBox()->setValue(8);
    QTRY_VERIFY(parallelism->layoutView()->picture().has_value() &&
                parallelism->layoutView()->picture()->world == 16);
    check(wizard, QStringLiteral("wizard-parallelism-2x8-usp"));
    studio::ui::MemoryPage* memory = wizard->memoryPage();
    while (wizard->currentPage() != memory) {
      const int before = wizard->currentId();
      wizard->next();
      QVERIFY2(wizard->currentId() != before, "a page before Memory does not validate");
    }
    memory->tabs()->setCurrentIndex(1);
    auto* plan = memory->findChild<QTableWidget*>(QStringLiteral("planTable"));
    QVERIFY(plan);
    QTRY_VERIFY_WITH_TIMEOUT(plan->rowCount() > 0, 20000);
    check(wizard, QStringLiteral("wizard-memory-length-planner"));
    QVERIFY(wizard->close());
  }

  // Where each rank's time goes: a 4-process demo run (SP 2 x dp 2) whose rank 3 is made 1 s
  // slower at step 6; the straggler chart and the bars of step 6 under the charts.
  void timePerRank() {
    if (!QFileInfo(engine_).isExecutable()) QSKIP("the run is trained by studio-train");
    const QString out = tmp_.filePath(QStringLiteral("runs/demo-sp2-dp2-slow-rank3"));
    const QString config = demoConfig(tmp_.filePath(QStringLiteral("time.yaml")),
                                      {QStringLiteral("output_dir: ") + out,
                                       QStringLiteral("max_steps: 12"), QStringLiteral("logging_steps: 1"),
                                       QStringLiteral("sequence_parallel_size: 2")});
    QCOMPARE(engine({QStringLiteral("train"), config, QStringLiteral("--nproc"), QStringLiteral("4")},
                    {QStringLiteral("STUDIO_INJECT_FAULT=slow@6#3")}),
             0);
    QVERIFY(window_->openRun(out));
    studio::ui::RunDashboard* dash = window_->dashboard();
    QTRY_VERIFY_WITH_TIMEOUT(dash->series(QDir::cleanPath(out)) &&
                                 dash->series(QDir::cleanPath(out))->rankTimes().size() == 12,
                             20000);
    dash->flush();
    studio::ui::RankTimeView* view = dash->rankTimeView();
    QVERIFY(view->isVisible());
    view->selectStep(6);
    QVERIFY2(view->summary().contains(QStringLiteral("slowest rank 3")), qPrintable(view->summary()));
    // Room for the charts and the bars: the Log dock closed while the picture is taken.
    auto* log = window_->findChild<QDockWidget*>(QStringLiteral("logDock"));
    QVERIFY(log);
    log->hide();
    const auto reopen = qScopeGuard([log] { log->show(); });
    QTest::qWait(200);  // the room the Log leaves laid out, then the bars scrolled to
    dash->revealRankTimes();
    check(window_.get(), QStringLiteral("dashboard-time-per-rank"));
  }

  // A failed run opens on its cause: a 2-process demo run out of memory on rank 1 at step 4.
  void failedRun() {
    if (!QFileInfo(engine_).isExecutable()) QSKIP("the run is trained by studio-train");
    const QString out = tmp_.filePath(QStringLiteral("runs/demo-sp2-oom"));
    QVERIFY(QDir().mkpath(out));
    const QString config = demoConfig(out + QStringLiteral("/config.yaml"),
                                      {QStringLiteral("output_dir: ") + out,
                                       QStringLiteral("overwrite_output_dir: true"),
                                       QStringLiteral("max_steps: 12"), QStringLiteral("logging_steps: 1"),
                                       QStringLiteral("sequence_parallel_size: 2")});
    QVERIFY(engine({QStringLiteral("train"), config, QStringLiteral("--nproc"), QStringLiteral("2")},
                   {QStringLiteral("STUDIO_INJECT_FAULT=oom@4#1")}, out + QStringLiteral("/train.log")) != 0);
    QVERIFY(window_->openRun(out));
    studio::ui::FailurePanel* panel = window_->dashboard()->failurePanel();
    QTRY_VERIFY_WITH_TIMEOUT(panel->isVisible() && !panel->logText().isEmpty(), 20000);
    QVERIFY2(panel->headline().contains(QStringLiteral("on rank 1 at step 4")), qPrintable(panel->headline()));
    check(window_.get(), QStringLiteral("dashboard-failed-run"));
  }

  // A sweep: learning rate x SP size over the demo, 2 processes a point, two points at a time;
  // the runs list groups its points, Compare Sweep lists them with the swept keys as columns.
  void sweep() {
    if (!QFileInfo(engine_).isExecutable()) QSKIP("the sweep is trained by studio-train");
    const QString out = tmp_.filePath(QStringLiteral("runs/lr-sp"));
    const QString base = demoConfig(tmp_.filePath(QStringLiteral("sweep-base.yaml")),
                                    {QStringLiteral("max_steps: 20"), QStringLiteral("logging_steps: 2")});
    QCOMPARE(engine({QStringLiteral("sweep"), base, QStringLiteral("--sweep"),
                     QStringLiteral("learning_rate=1e-3,3e-3"), QStringLiteral("--sweep"),
                     QStringLiteral("sequence_parallel_size=1,2"), QStringLiteral("--nproc"),
                     QStringLiteral("2"), QStringLiteral("--parallel"), QStringLiteral("2"),
                     QStringLiteral("--out"), out}),
             0);
    const QString first = out + QStringLiteral("/00-learning_rate=1e-3,sequence_parallel_size=1");
    QVERIFY(window_->openRun(first));
    auto* runs = window_->findChild<studio::ui::RunsPanel*>();
    QVERIFY(runs);
    QTRY_VERIFY_WITH_TIMEOUT(runs->sweepRuns(first).size() == 4, 20000);
    QTRY_VERIFY(runs->compareSweepAction()->isEnabled());
    runs->compareSweepAction()->trigger();
    studio::ui::ComparisonDialog* dialog = nullptr;
    QTRY_VERIFY(dialog = window_->findChild<studio::ui::ComparisonDialog*>());
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isLoaded(), 20000);
    QCOMPARE(dialog->comparison().swept,
             (QStringList{QStringLiteral("learning_rate"), QStringLiteral("sequence_parallel_size")}));
    check(dialog, QStringLiteral("dialog-sweep-comparison"));
    check(window_.get(), QStringLiteral("main-window-sweep"));
    dialog->close();
    dialog->deleteLater();

    // The wizard's Sweep...: keys and values, the points each checked, in both themes.
    studio::ui::RunWizard* wizard = demoWizard();
    QVERIFY(wizard);
    QTRY_VERIFY_WITH_TIMEOUT(wizard->reviewPage()->sweepButton()->isEnabled(), 20000);
    wizard->reviewPage()->sweepButton()->click();
    studio::ui::SweepDialog* sweepDialog = wizard->sweepDialog();
    QVERIFY(sweepDialog);
    sweepDialog->setAxes({QStringLiteral("learning_rate=1e-3,3e-3,1e-2"),
                          QStringLiteral("per_device_train_batch_size=8,16")});
    sweepDialog->parallelBox()->setValue(2);
    QTRY_VERIFY_WITH_TIMEOUT(!sweepDialog->isChecking(), 20000);
    QCOMPARE(sweepDialog->pointsList()->count(), 6);
    QVERIFY(sweepDialog->startButton()->isEnabled());
    check(sweepDialog, QStringLiteral("dialog-sweep-start"));
    auto* dark = window_->findChild<QAction*>(QStringLiteral("theme-dark"));
    QVERIFY(dark);
    dark->trigger();
    const auto light = qScopeGuard([this] {
      if (auto* system = window_->findChild<QAction*>(QStringLiteral("theme-system"))) system->trigger();
    });
    QTest::qWait(200);
    check(sweepDialog, QStringLiteral("dialog-sweep-start-dark"));
    sweepDialog->close();
    wizard->close();
  }

  // Qt's own dialogs as the studio opens them from its menus: the About box and the file
  // dialogs (Qt's widget dialogs on a bare X server, where no desktop provides native ones).
  void standardDialogs_data() {
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("name");
    QTest::newRow("about") << "&About SeqStudio" << "dialog-about";
    QTest::newRow("open config") << "Open Config in &Wizard..." << "dialog-open-config";
    QTest::newRow("open run folder") << "&Open Run..." << "dialog-open-run-folder";
    QTest::newRow("export normalised YAML") << "&Export Normalised YAML..." << "dialog-export-yaml";
  }
  void standardDialogs() {
    QFETCH(QString, action);
    QFETCH(QString, name);
    QAction* a = menuAction(action);
    QVERIFY2(a, qPrintable(action));
    QVERIFY(checkModal(name, [a] { a->trigger(); }));
  }

  // The dark theme (View > Theme > Dark): every control drawn in it, the charts too.
  void darkTheme() {
    auto* dark = window_->findChild<QAction*>(QStringLiteral("theme-dark"));
    QVERIFY(dark);
    dark->trigger();
    QVERIFY(window_->theme()->isDark());
    QTest::qWait(200);
    check(window_.get(), QStringLiteral("main-window-dark"));
    const QImage img = screenGrab(window_.get());
    qint64 sum = 0;
    for (int y = 0; y < img.height(); y += 4)
      for (int x = 0; x < img.width(); x += 4) sum += QColor(img.pixel(x, y)).lightness();
    const double mean = double(sum) / ((img.height() + 3) / 4) / ((img.width() + 3) / 4);
    QVERIFY2(mean < 90, qPrintable(QStringLiteral("the dark window's mean lightness is %1").arg(mean)));
    // The time per rank and a failed run's cause in the dark theme.
    const QString slow = tmp_.filePath(QStringLiteral("runs/demo-sp2-dp2-slow-rank3"));
    if (QFileInfo::exists(slow + QStringLiteral("/events.jsonl"))) {
      QVERIFY(window_->openRun(slow));
      studio::ui::RunDashboard* dash = window_->dashboard();
      QTRY_VERIFY_WITH_TIMEOUT(dash->rankTimeView()->isVisible(), 20000);
      dash->rankTimeView()->selectStep(6);
      auto* log = window_->findChild<QDockWidget*>(QStringLiteral("logDock"));
      QVERIFY(log);
      log->hide();
      const auto reopen = qScopeGuard([log] { log->show(); });
      QTest::qWait(200);
      dash->revealRankTimes();
      check(window_.get(), QStringLiteral("dashboard-time-per-rank-dark"));
    }
    const QString failed = tmp_.filePath(QStringLiteral("runs/demo-sp2-oom"));
    if (QFileInfo::exists(failed + QStringLiteral("/events.jsonl"))) {
      QVERIFY(window_->openRun(failed));
      QTRY_VERIFY_WITH_TIMEOUT(window_->dashboard()->failurePanel()->isVisible(), 20000);
      window_->dashboard()->revealChart(studio::ui::ChartKind::Loss);
      check(window_.get(), QStringLiteral("dashboard-failed-run-dark"));
    }
    auto* system = window_->findChild<QAction*>(QStringLiteral("theme-system"));
    QVERIFY(system);
    system->trigger();
    QVERIFY(!window_->theme()->isDark());
  }

  // The questions an SSH connection asks (modal: grabbed from inside their own event loop).
  void connectionQuestions_data() {
    QTest::addColumn<QString>("question");
    QTest::newRow("unknown host key") << "dialog-host-key";
    QTest::newRow("password") << "dialog-password";
  }
  void connectionQuestions() {
    QFETCH(QString, question);
    studio::ui::GuiPrompts prompts;
    prompts.setDialogParent(window_.get());
    QVERIFY(checkModal(question, [&] {
      if (question == QLatin1String("dialog-host-key")) {
        studio::remote::HostKeyInfo info{"gpu-node-07.cluster.example", 22, "ssh-ed25519",
                                         "SHA256:mVZ6n1v0Jp3rVxPr9wQm4yHc1bDqGm0o1bJkzq5yq7E"};
        QCOMPARE(prompts.askHostKey(info), studio::remote::HostKeyDecision::RejectKey);
      } else {
        studio::remote::SecretRequest request;
        request.kind = studio::remote::SecretRequest::Kind::Password;
        request.subject = "alice@gpu-node-07.cluster.example:22";
        QVERIFY(!prompts.askSecret(request).has_value());
      }
    }));
  }

  void cleanupTestCase() {
    window_.reset();
    for (QProcess* p : {g_windowManager, g_xvfb})
      if (p) {
        p->terminate();
        p->waitForFinished(3000);
      }
  }
};

int main(int argc, char** argv) {
  // A first start: settings, data (the demo model) and runs of its own.
  QTemporaryDir home;
  qputenv("XDG_CONFIG_HOME", home.filePath(QStringLiteral("config")).toLocal8Bit());
  qputenv("XDG_DATA_HOME", home.filePath(QStringLiteral("data")).toLocal8Bit());
  // Before the application connects to a display; initTestCase says when either failed.
  if (startXvfb()) g_windowManagerProblem = startWindowManager();
  QApplication app(argc, argv);
  TestWindowScreenshots test;
  return QTest::qExec(&test, argc, argv);
}

#include "tst_window_screenshots.moc"
