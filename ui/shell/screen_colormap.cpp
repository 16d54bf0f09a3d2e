#include "studio/ui/shell/screen_colormap.h"

#include <QGuiApplication>

#if STUDIO_QT_XCB
#include <xcb/xcb.h>
#include <QPlatformSurfaceEvent>
#include <QWindow>
#include <cstdlib>
#endif

namespace studio::ui {

#if STUDIO_QT_XCB
namespace {

// Sets the colormap of each window the application creates, as it is created (before it is
// mapped).
class ScreenColormap : public QObject {
 public:
  ScreenColormap(xcb_connection_t* connection, QObject* parent)
      : QObject(parent), connection_(connection) {
    setObjectName(QStringLiteral("studio-screen-colormap"));
  }

  // `window` takes its screen's default colormap when it has that screen's default visual.
  void adopt(QWindow* window) const {
    if (window->type() == Qt::ForeignWindow) return;  // another program's
    const auto id = static_cast<xcb_window_t>(window->winId());
    xcb_get_window_attributes_reply_t* attributes = xcb_get_window_attributes_reply(
        connection_, xcb_get_window_attributes(connection_, id), nullptr);
    if (attributes == nullptr) return;
    // Visual ids are unique to their screen.
    for (auto it = xcb_setup_roots_iterator(xcb_get_setup(connection_)); it.rem;
         xcb_screen_next(&it))
      if (it.data->root_visual == attributes->visual) {
        if (it.data->default_colormap != attributes->colormap)
          xcb_change_window_attributes(connection_, id, XCB_CW_COLORMAP,
                                       &it.data->default_colormap);
        break;
      }
    std::free(attributes);
  }

  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::PlatformSurface &&
        static_cast<QPlatformSurfaceEvent*>(event)->surfaceEventType() ==
            QPlatformSurfaceEvent::SurfaceCreated)
      if (auto* window = qobject_cast<QWindow*>(watched)) adopt(window);
    return false;
  }

 private:
  xcb_connection_t* connection_;
};

}  // namespace

void useScreenColormap(QGuiApplication* app) {
  // The offscreen platform answers as an X11 application too, with no xcb connection.
  if (app == nullptr || QGuiApplication::platformName() != QLatin1String("xcb")) return;
  auto* x11 = app->nativeInterface<QNativeInterface::QX11Application>();
  if (x11 == nullptr || x11->connection() == nullptr ||
      app->findChild<QObject*>(QStringLiteral("studio-screen-colormap"),
                               Qt::FindDirectChildrenOnly))
    return;
  auto* filter = new ScreenColormap(x11->connection(), app);
  app->installEventFilter(filter);
  for (QWindow* window : QGuiApplication::allWindows())
    if (window->handle()) filter->adopt(window);
}
#else
void useScreenColormap(QGuiApplication*) {}
#endif

}  // namespace studio::ui
