// The studio's colour theme: light or dark, chosen by the user (View > Theme) or following the
// system. Qt 6.4 has no colour-scheme query of its own, so the system's preference is read where
// the desktops publish it:
//   1. the XDG desktop portal's org.freedesktop.appearance color-scheme (GNOME 42+, KDE Plasma
//      5.24+, and anything else that runs xdg-desktop-portal), read over the session bus
//      asynchronously and followed live through its SettingChanged signal;
//   2. GTK_THEME (e.g. "Adwaita:dark", "Yaru-dark"), as set in many remote-desktop sessions;
//   3. the palette the platform theme gave the application (KDE's, qt6ct's), by its lightness.
// Where the wanted scheme differs from the platform's palette, the Fusion style with a palette of
// that scheme is applied; otherwise the platform's own style and palette stay. Every chart, editor
// and list takes its colours from the palette and repaints on the change.
#pragma once

#include <QDBusVariant>
#include <QObject>
#include <QPalette>
#include <QString>

class QApplication;

namespace studio::ui {

enum class ThemeChoice { System, Light, Dark };
enum class ColorScheme { Unknown, Light, Dark };

// The portal's value: 1 prefers dark, 2 prefers light, 0 (no preference) and others Unknown.
ColorScheme schemeFromPortal(uint value);
// GTK_THEME's value: a ":dark" variant or a name ending in "-dark"/"_dark" is dark; a name with
// no such mark is light (the desktop named a theme); empty is Unknown.
ColorScheme schemeFromGtkTheme(const QString& gtkTheme);
// A palette's scheme: its window colour darker than mid-grey is dark.
ColorScheme schemeFromPalette(const QPalette& palette);
// The first known of the three, in that order; Light when none is.
ColorScheme resolveScheme(ColorScheme portal, ColorScheme gtkTheme, ColorScheme platform);

QString themeChoiceName(ThemeChoice choice);  // "system", "light", "dark"
bool parseThemeChoice(const QString& name, ThemeChoice* choice);

// The dark palette applied with the Fusion style: WCAG AA contrast (4.5:1) for text on its
// window, base and button colours, and for highlighted text.
QPalette darkPalette();
// WCAG contrast ratio of two colours (1 to 21).
double contrastRatio(const QColor& a, const QColor& b);

class AppTheme : public QObject {
  Q_OBJECT

 public:
  // Reads the saved choice (QSettings "appearance/theme") unless `choice` is given, the platform's
  // palette as it is now, and GTK_THEME; then asks the portal on the session bus (`bus`: a
  // connection name from QDBusConnection, empty for the session bus; none when it is not
  // connected). Applies the theme at once and again whenever the choice or the system changes.
  explicit AppTheme(QApplication* app, QObject* parent = nullptr, const QString& bus = QString());
  // Gives the application back the platform's style and palette.
  ~AppTheme() override;

  ThemeChoice choice() const { return choice_; }
  // Sets the choice and applies it; saved for later starts unless `save` is false (studio --theme).
  void setChoice(ThemeChoice choice, bool save = true);
  bool isDark() const { return dark_; }
  // What the system prefers, as last read (Unknown parts resolved: Light when none says).
  ColorScheme systemScheme() const;
  // The portal's answer so far (Unknown until it answers, and when there is none).
  ColorScheme portalScheme() const { return portal_; }

 signals:
  void darkChanged(bool dark);
  // The portal answered or announced a change (for tests and the status bar).
  void systemSchemeChanged(studio::ui::ColorScheme scheme);

 private slots:
  void onSettingChanged(const QString& ns, const QString& key, const QDBusVariant& value);

 private:
  void askPortal();
  void setPortalScheme(ColorScheme scheme);
  void apply();
  // The platform's own style and palette again.
  void restorePlatform();

  QApplication* app_;
  QString bus_;
  ThemeChoice choice_ = ThemeChoice::System;
  ColorScheme portal_ = ColorScheme::Unknown;
  ColorScheme gtk_ = ColorScheme::Unknown;
  ColorScheme platform_ = ColorScheme::Unknown;
  QPalette platformPalette_;
  QString platformStyle_;
  bool dark_ = false;
  bool overridden_ = false;  // Fusion and a palette of ours are applied
};

}  // namespace studio::ui
