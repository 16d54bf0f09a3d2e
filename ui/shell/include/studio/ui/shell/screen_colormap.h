// The studio's windows on X11 take the screen's default colormap.
//
// Qt's xcb platform gives every window a colormap of its own making for the window's visual, the
// screen's default visual included (QXcbVirtualDesktop::colormapForVisual, Qt 6.4). The X server
// shows such windows like any other, but a screen read that honours colormaps -- `xwd -root`, and
// every grabber built on xwd's multi-visual code, Java's Robot among them -- then takes the
// studio's windows for a visual of their own and reads a window lying wholly over another of them
// (the New run wizard, every dialog over the main window) through the lower one, where it is
// obscured: black, while the X server holds the painted dialog. With the screen's colormap (the
// same colours: the visual is TrueColor) they share the root window's visual and colormap, and
// the screen is read as the X server holds it.
#pragma once

class QGuiApplication;

namespace studio::ui {

// Gives every window of `app` whose visual is its screen's default visual, those there now and
// each one created later, the screen's default colormap. Once per application; nothing on other
// platforms than xcb.
void useScreenColormap(QGuiApplication* app);

}  // namespace studio::ui
