#include "studio/ui/shell/app_theme.h"

#include <QApplication>
#include <QDBusConnection>
#include <QDBusMessage>
#include <QDBusPendingCallWatcher>
#include <QDBusPendingReply>
#include <QSettings>
#include <QStyle>
#include <QStyleFactory>

#include <cmath>

namespace studio::ui {

namespace {

const QString kPortalService = QStringLiteral("org.freedesktop.portal.Desktop");
const QString kPortalPath = QStringLiteral("/org/freedesktop/portal/desktop");
const QString kPortalSettings = QStringLiteral("org.freedesktop.portal.Settings");
const QString kAppearance = QStringLiteral("org.freedesktop.appearance");
const QString kColorScheme = QStringLiteral("color-scheme");
const QString kSettingsKey = QStringLiteral("appearance/theme");

// A D-Bus variant's value, unwrapped however deep (the portal's Read answers a variant in a variant).
QVariant unwrap(QVariant v) {
  while (v.canConvert<QDBusVariant>() && v.userType() == qMetaTypeId<QDBusVariant>())
    v = v.value<QDBusVariant>().variant();
  return v;
}

ColorScheme schemeFromVariant(const QVariant& value) {
  const QVariant v = unwrap(value);
  bool ok = false;
  const uint n = v.toUInt(&ok);
  return ok ? schemeFromPortal(n) : ColorScheme::Unknown;
}

double channel(double c) {
  c /= 255.0;
  return c <= 0.03928 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

double luminance(const QColor& c) {
  return 0.2126 * channel(c.red()) + 0.7152 * channel(c.green()) + 0.0722 * channel(c.blue());
}

}  // namespace

ColorScheme schemeFromPortal(uint value) {
  switch (value) {
    case 1: return ColorScheme::Dark;
    case 2: return ColorScheme::Light;
    default: return ColorScheme::Unknown;
  }
}

ColorScheme schemeFromGtkTheme(const QString& gtkTheme) {
  const QString t = gtkTheme.trimmed().toLower();
  if (t.isEmpty()) return ColorScheme::Unknown;
  if (t.endsWith(QLatin1String(":dark")) || t.endsWith(QLatin1String("-dark")) ||
      t.endsWith(QLatin1String("_dark")) || t.contains(QLatin1String("-dark-")))
    return ColorScheme::Dark;
  return ColorScheme::Light;
}

ColorScheme schemeFromPalette(const QPalette& palette) {
  return palette.color(QPalette::Window).lightness() < 128 ? ColorScheme::Dark : ColorScheme::Light;
}

ColorScheme resolveScheme(ColorScheme portal, ColorScheme gtkTheme, ColorScheme platform) {
  for (ColorScheme s : {portal, gtkTheme, platform})
    if (s != ColorScheme::Unknown) return s;
  return ColorScheme::Light;
}

QString themeChoiceName(ThemeChoice choice) {
  switch (choice) {
    case ThemeChoice::Light: return QStringLiteral("light");
    case ThemeChoice::Dark: return QStringLiteral("dark");
    case ThemeChoice::System: break;
  }
  return QStringLiteral("system");
}

bool parseThemeChoice(const QString& name, ThemeChoice* choice) {
  for (ThemeChoice c : {ThemeChoice::System, ThemeChoice::Light, ThemeChoice::Dark})
    if (name.compare(themeChoiceName(c), Qt::CaseInsensitive) == 0) {
      *choice = c;
      return true;
    }
  return false;
}

double contrastRatio(const QColor& a, const QColor& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

QPalette darkPalette() {
  const QColor window(0x2d, 0x2d, 0x30), base(0x1e, 0x1e, 0x1e), text(0xe6, 0xe6, 0xe6);
  const QColor button(0x3a, 0x3a, 0x3d), disabled(0x8a, 0x8a, 0x8a);
  QPalette p;
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x27, 0x27, 0x29));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, button);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(0xff, 0x7b, 0x72));
  p.setColor(QPalette::ToolTipBase, button);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x9a, 0x9a, 0x9a));
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x6f, 0xd1));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x8a, 0xb4, 0xf8));
  p.setColor(QPalette::LinkVisited, QColor(0xc5, 0x8a, 0xf9));
  p.setColor(QPalette::Light, QColor(0x55, 0x55, 0x58));
  p.setColor(QPalette::Midlight, QColor(0x44, 0x44, 0x47));
  p.setColor(QPalette::Mid, QColor(0x5a, 0x5a, 0x5e));
  p.setColor(QPalette::Dark, QColor(0x1a, 0x1a, 0x1b));
  p.setColor(QPalette::Shadow, QColor(0x0a, 0x0a, 0x0a));
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  p.setColor(QPalette::Disabled, QPalette::Highlight, QColor(0x44, 0x44, 0x47));
  p.setColor(QPalette::Disabled, QPalette::HighlightedText, disabled);
  return p;
}

AppTheme::AppTheme(QApplication* app, QObject* parent, const QString& bus)
    : QObject(parent), app_(app), bus_(bus) {
  platformPalette_ = QApplication::palette();
  platformStyle_ = app_->style() ? app_->style()->name() : QString();
  platform_ = schemeFromPalette(platformPalette_);
  gtk_ = schemeFromGtkTheme(qEnvironmentVariable("GTK_THEME"));
  ThemeChoice saved = ThemeChoice::System;
  parseThemeChoice(QSettings().value(kSettingsKey).toString(), &saved);
  choice_ = saved;
  apply();
  askPortal();
}

AppTheme::~AppTheme() {
  if (overridden_) restorePlatform();
}

void AppTheme::restorePlatform() {
  if (!platformStyle_.isEmpty()) QApplication::setStyle(platformStyle_);
  QApplication::setPalette(platformPalette_);
  overridden_ = false;
}

void AppTheme::setChoice(ThemeChoice choice, bool save) {
  if (save) QSettings().setValue(kSettingsKey, themeChoiceName(choice));
  if (choice == choice_) return;
  choice_ = choice;
  apply();
}

ColorScheme AppTheme::systemScheme() const { return resolveScheme(portal_, gtk_, platform_); }

void AppTheme::askPortal() {
  QDBusConnection bus = bus_.isEmpty() ? QDBusConnection::sessionBus() : QDBusConnection(bus_);
  if (!bus.isConnected()) return;  // no session bus (a bare X server): GTK_THEME and the palette
  qRegisterMetaType<QDBusVariant>();  // QtDBus finds the slot's argument types by name
  bus.connect(kPortalService, kPortalPath, kPortalSettings, QStringLiteral("SettingChanged"), this,
              SLOT(onSettingChanged(QString,QString,QDBusVariant)));
  QDBusMessage read = QDBusMessage::createMethodCall(kPortalService, kPortalPath, kPortalSettings,
                                                     QStringLiteral("Read"));
  read << kAppearance << kColorScheme;
  // Asynchronous: a portal that is slow to start never holds the GUI thread.
  auto* watcher = new QDBusPendingCallWatcher(bus.asyncCall(read, 5000), this);
  connect(watcher, &QDBusPendingCallWatcher::finished, this, [this](QDBusPendingCallWatcher* w) {
    w->deleteLater();
    const QDBusMessage reply = w->reply();
    // No portal, or one without the setting: the other sources decide.
    if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty()) return;
    setPortalScheme(schemeFromVariant(reply.arguments().constFirst()));
  });
}

void AppTheme::onSettingChanged(const QString& ns, const QString& key, const QDBusVariant& value) {
  if (ns != kAppearance || key != kColorScheme) return;
  setPortalScheme(schemeFromVariant(value.variant()));
}

void AppTheme::setPortalScheme(ColorScheme scheme) {
  portal_ = scheme;
  emit systemSchemeChanged(systemScheme());
  apply();
}

void AppTheme::apply() {
  bool dark = false;
  switch (choice_) {
    case ThemeChoice::Light: dark = false; break;
    case ThemeChoice::Dark: dark = true; break;
    case ThemeChoice::System: dark = systemScheme() == ColorScheme::Dark; break;
  }
  const bool platformDark = platform_ == ColorScheme::Dark;
  if (dark != platformDark) {
    // Fusion draws every control from the palette, so the whole window follows it.
    if (!overridden_ || !app_->style() ||
        app_->style()->name().compare(QLatin1String("fusion"), Qt::CaseInsensitive) != 0)
      QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QApplication::setPalette(dark ? darkPalette() : QApplication::style()->standardPalette());
    overridden_ = true;
  } else if (overridden_) {
    restorePlatform();
  }
  if (dark != dark_) {
    dark_ = dark;
    emit darkChanged(dark_);
  }
}

}  // namespace studio::ui
