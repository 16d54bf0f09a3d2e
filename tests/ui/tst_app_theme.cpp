// The colour theme (studio/ui/shell/app_theme.h): what the system says (the XDG desktop portal,
// GTK_THEME, the platform's palette), the user's choice saved and read back, the dark palette's
// contrast, the charts repainting in it, and the portal followed live. The portal is a service of
// this test on a real D-Bus daemon of its own (dbus-daemon), answering Read and emitting
// SettingChanged as xdg-desktop-portal does; the real portal needs a desktop session to run.
#include <QApplication>
#include <QDBusAbstractAdaptor>
#include <QDBusConnection>
#include <QDBusError>
#include <QDBusVariant>
#include <QImage>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QStyle>
#include <QtTest>

#include "qcustomplot.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/shell/app_theme.h"

using namespace studio::ui;

Q_DECLARE_METATYPE(studio::ui::ColorScheme)

namespace {

// The part of org.freedesktop.portal.Settings the studio uses.
class FakePortalSettings : public QObject {
  Q_OBJECT
  Q_CLASSINFO("D-Bus Interface", "org.freedesktop.portal.Settings")

 public:
  uint value = 1;  // prefer dark
  int reads = 0;

 public slots:
  QDBusVariant Read(const QString& ns, const QString& key) {
    ++reads;
    if (ns != QLatin1String("org.freedesktop.appearance") || key != QLatin1String("color-scheme"))
      return QDBusVariant(QVariant());
    // The portal's Read answers a variant holding a variant.
    return QDBusVariant(QVariant::fromValue(QDBusVariant(value)));
  }

 signals:
  void SettingChanged(const QString& ns, const QString& key, const QDBusVariant& value);
};

double meanLightness(const QImage& img) {
  double sum = 0;
  int n = 0;
  for (int y = 0; y < img.height(); y += 3)
    for (int x = 0; x < img.width(); x += 3) {
      sum += QColor(img.pixel(x, y)).lightness();
      ++n;
    }
  return n ? sum / n : 0;
}

}  // namespace

class TestAppTheme : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qRegisterMetaType<studio::ui::ColorScheme>("studio::ui::ColorScheme");
    QSettings().remove(QStringLiteral("appearance/theme"));
  }

  void gtkTheme_data() {
    QTest::addColumn<QString>("value");
    QTest::addColumn<int>("scheme");
    QTest::newRow("unset") << "" << int(ColorScheme::Unknown);
    QTest::newRow("Adwaita:dark") << "Adwaita:dark" << int(ColorScheme::Dark);
    QTest::newRow("Yaru-dark") << "Yaru-dark" << int(ColorScheme::Dark);
    QTest::newRow("Arc-Dark-solid") << "Arc-Dark-solid" << int(ColorScheme::Dark);
    QTest::newRow("Breeze_Dark") << "Breeze_Dark" << int(ColorScheme::Dark);
    QTest::newRow("Adwaita") << "Adwaita" << int(ColorScheme::Light);
    QTest::newRow("Adwaita:light") << "Adwaita:light" << int(ColorScheme::Light);
    QTest::newRow("Darkly (no dark mark)") << "Darkly" << int(ColorScheme::Light);
  }
  void gtkTheme() {
    QFETCH(QString, value);
    QFETCH(int, scheme);
    QCOMPARE(int(schemeFromGtkTheme(value)), scheme);
  }

  void portalValue_data() {
    QTest::addColumn<uint>("value");
    QTest::addColumn<int>("scheme");
    QTest::newRow("no preference") << 0u << int(ColorScheme::Unknown);
    QTest::newRow("prefer dark") << 1u << int(ColorScheme::Dark);
    QTest::newRow("prefer light") << 2u << int(ColorScheme::Light);
    QTest::newRow("unknown value") << 7u << int(ColorScheme::Unknown);
  }
  void portalValue() {
    QFETCH(uint, value);
    QFETCH(int, scheme);
    QCOMPARE(int(schemeFromPortal(value)), scheme);
  }

  // The portal first, then GTK_THEME, then the platform's palette; light when none knows.
  void resolution_data() {
    QTest::addColumn<int>("portal");
    QTest::addColumn<int>("gtk");
    QTest::addColumn<int>("platform");
    QTest::addColumn<int>("scheme");
    const int U = int(ColorScheme::Unknown), L = int(ColorScheme::Light), D = int(ColorScheme::Dark);
    QTest::newRow("portal wins over a light GTK theme") << D << L << L << D;
    QTest::newRow("portal light over a dark palette") << L << U << D << L;
    QTest::newRow("GTK_THEME when no portal") << U << D << L << D;
    QTest::newRow("the palette when nothing else") << U << U << D << D;
    QTest::newRow("nothing known") << U << U << U << L;
  }
  void resolution() {
    QFETCH(int, portal);
    QFETCH(int, gtk);
    QFETCH(int, platform);
    QFETCH(int, scheme);
    QCOMPARE(int(resolveScheme(ColorScheme(portal), ColorScheme(gtk), ColorScheme(platform))), scheme);
  }

  void choiceNames() {
    for (ThemeChoice c : {ThemeChoice::System, ThemeChoice::Light, ThemeChoice::Dark}) {
      ThemeChoice back = ThemeChoice::System;
      QVERIFY(parseThemeChoice(themeChoiceName(c).toUpper(), &back));
      QCOMPARE(int(back), int(c));
    }
    ThemeChoice unchanged = ThemeChoice::Light;
    QVERIFY(!parseThemeChoice(QStringLiteral("solarized"), &unchanged));
    QCOMPARE(int(unchanged), int(ThemeChoice::Light));
  }

  // WCAG AA (4.5:1) for every text role on the surfaces it is drawn on.
  void darkPaletteContrast_data() {
    QTest::addColumn<int>("fg");
    QTest::addColumn<int>("bg");
    QTest::addColumn<int>("group");
    QTest::newRow("window text") << int(QPalette::WindowText) << int(QPalette::Window) << int(QPalette::Active);
    QTest::newRow("text on base") << int(QPalette::Text) << int(QPalette::Base) << int(QPalette::Active);
    QTest::newRow("text on alternate base") << int(QPalette::Text) << int(QPalette::AlternateBase) << int(QPalette::Active);
    QTest::newRow("button text") << int(QPalette::ButtonText) << int(QPalette::Button) << int(QPalette::Active);
    QTest::newRow("highlighted text") << int(QPalette::HighlightedText) << int(QPalette::Highlight) << int(QPalette::Active);
    QTest::newRow("tool tip") << int(QPalette::ToolTipText) << int(QPalette::ToolTipBase) << int(QPalette::Active);
    QTest::newRow("placeholder on base") << int(QPalette::PlaceholderText) << int(QPalette::Base) << int(QPalette::Active);
    QTest::newRow("link on base") << int(QPalette::Link) << int(QPalette::Base) << int(QPalette::Active);
    QTest::newRow("inactive window text") << int(QPalette::WindowText) << int(QPalette::Window) << int(QPalette::Inactive);
  }
  void darkPaletteContrast() {
    QFETCH(int, fg);
    QFETCH(int, bg);
    QFETCH(int, group);
    const QPalette p = darkPalette();
    const QColor f = p.color(QPalette::ColorGroup(group), QPalette::ColorRole(fg));
    const QColor b = p.color(QPalette::ColorGroup(group), QPalette::ColorRole(bg));
    const double ratio = contrastRatio(f, b);
    QVERIFY2(ratio >= 4.5, qPrintable(QStringLiteral("%1 on %2: %3:1")
                                          .arg(f.name(), b.name()).arg(ratio, 0, 'f', 2)));
    if (bg != int(QPalette::Highlight)) QVERIFY(b.lightness() < 80);  // a dark surface
  }

  // Dark and Light by choice: the application's palette and style, a dashboard chart's pixels,
  // the saved choice read back by the next start, and the platform's look restored at the end.
  void choiceAppliesAndIsSaved() {
    auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
    const QColor platformWindow = QApplication::palette().color(QPalette::Window);
    QVERIFY(platformWindow.lightness() >= 128);  // offscreen: a light platform
    RunDashboard dashboard;
    dashboard.resize(1200, 800);
    dashboard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dashboard));
    QWidget* loss = dashboard.findChild<QWidget*>(QStringLiteral("loss"));
    QVERIFY(loss);
    auto* plot = loss->findChild<QCustomPlot*>();
    QVERIFY(plot);
    const double lightBefore = meanLightness(plot->grab().toImage());
    QVERIFY2(lightBefore > 180, qPrintable(QString::number(lightBefore)));
    {
      AppTheme theme(app, nullptr, QStringLiteral("no-such-bus"));
      QCOMPARE(int(theme.choice()), int(ThemeChoice::System));
      QVERIFY(!theme.isDark());
      QSignalSpy dark(&theme, &AppTheme::darkChanged);
      theme.setChoice(ThemeChoice::Dark);
      QCOMPARE(dark.count(), 1);
      QVERIFY(dark.at(0).at(0).toBool());
      QVERIFY(theme.isDark());
      QCOMPARE(QApplication::palette().color(QPalette::Window), darkPalette().color(QPalette::Window));
      QCOMPARE(QApplication::style()->name().toLower(), QStringLiteral("fusion"));
      QCoreApplication::processEvents();
      const double darkChart = meanLightness(plot->grab().toImage());
      QVERIFY2(darkChart < 80, qPrintable(QStringLiteral("the loss chart's mean lightness in the dark "
                                                         "theme is %1").arg(darkChart)));
      QCOMPARE(QSettings().value(QStringLiteral("appearance/theme")).toString(), QStringLiteral("dark"));
    }
    // The platform's palette again once the theme is gone.
    QCOMPARE(QApplication::palette().color(QPalette::Window), platformWindow);
    {
      // The next start reads the saved choice and applies it at once.
      AppTheme theme(app, nullptr, QStringLiteral("no-such-bus"));
      QCOMPARE(int(theme.choice()), int(ThemeChoice::Dark));
      QVERIFY(theme.isDark());
      // A session's choice (studio --theme light) is not saved.
      theme.setChoice(ThemeChoice::Light, /*save=*/false);
      QVERIFY(!theme.isDark());
      QCOMPARE(QApplication::palette().color(QPalette::Window), platformWindow);
      QCOMPARE(QSettings().value(QStringLiteral("appearance/theme")).toString(), QStringLiteral("dark"));
      theme.setChoice(ThemeChoice::System);
    }
    QCOMPARE(QSettings().value(QStringLiteral("appearance/theme")).toString(), QStringLiteral("system"));
    QCoreApplication::processEvents();
    const double lightAfter = meanLightness(plot->grab().toImage());
    QVERIFY2(lightAfter > 180, qPrintable(QString::number(lightAfter)));
  }

  // GTK_THEME=...:dark with no portal: Follow System is dark.
  void gtkThemeFollowed() {
    qputenv("GTK_THEME", "Adwaita:dark");
    {
      AppTheme theme(qobject_cast<QApplication*>(QCoreApplication::instance()), nullptr,
                     QStringLiteral("no-such-bus"));
      QCOMPARE(int(theme.choice()), int(ThemeChoice::System));
      QVERIFY(theme.isDark());
      QCOMPARE(int(theme.systemScheme()), int(ColorScheme::Dark));
    }
    qunsetenv("GTK_THEME");
  }

  // The portal on a session bus: read at start without blocking, followed when it changes.
  void portalFollowedLive() {
    QProcess daemon;
    daemon.start(QStringLiteral("dbus-daemon"),
                 {QStringLiteral("--session"), QStringLiteral("--nofork"), QStringLiteral("--print-address=1")});
    QVERIFY2(daemon.waitForStarted(5000), "dbus-daemon did not start (scripts/setup.sh installs it)");
    QVERIFY(daemon.waitForReadyRead(5000));
    const QString address = QString::fromLatin1(daemon.readLine()).trimmed();
    QVERIFY2(!address.isEmpty(), "dbus-daemon printed no address");
    {
      QDBusConnection portalBus = QDBusConnection::connectToBus(address, QStringLiteral("portal"));
      QVERIFY2(portalBus.isConnected(), qPrintable(portalBus.lastError().message()));
      FakePortalSettings settings;
      QVERIFY(portalBus.registerObject(QStringLiteral("/org/freedesktop/portal/desktop"), &settings,
                                       QDBusConnection::ExportAllSlots | QDBusConnection::ExportAllSignals));
      QVERIFY(portalBus.registerService(QStringLiteral("org.freedesktop.portal.Desktop")));
      QDBusConnection clientBus = QDBusConnection::connectToBus(address, QStringLiteral("client"));
      QVERIFY(clientBus.isConnected());

      AppTheme theme(qobject_cast<QApplication*>(QCoreApplication::instance()), nullptr,
                     QStringLiteral("client"));
      QSignalSpy system(&theme, &AppTheme::systemSchemeChanged);
      QSignalSpy dark(&theme, &AppTheme::darkChanged);
      QVERIFY(!theme.isDark());  // the answer comes later: the constructor did not wait for it
      QVERIFY(system.wait(5000));
      QCOMPARE(settings.reads, 1);
      QCOMPARE(int(theme.portalScheme()), int(ColorScheme::Dark));
      QVERIFY(theme.isDark());
      QCOMPARE(dark.count(), 1);

      // The user switches the desktop to light: the studio follows.
      emit settings.SettingChanged(QStringLiteral("org.freedesktop.appearance"),
                                   QStringLiteral("color-scheme"), QDBusVariant(2u));
      QTRY_VERIFY_WITH_TIMEOUT(!theme.isDark(), 5000);
      QCOMPARE(int(theme.portalScheme()), int(ColorScheme::Light));
      // Another setting changing is not a colour-scheme change.
      emit settings.SettingChanged(QStringLiteral("org.gnome.desktop.interface"),
                                   QStringLiteral("color-scheme"), QDBusVariant(1u));
      QTest::qWait(300);
      QVERIFY(!theme.isDark());
      // A user's choice of Light stays light when the desktop turns dark again.
      theme.setChoice(ThemeChoice::Light);
      emit settings.SettingChanged(QStringLiteral("org.freedesktop.appearance"),
                                   QStringLiteral("color-scheme"), QDBusVariant(1u));
      QTRY_COMPARE_WITH_TIMEOUT(int(theme.portalScheme()), int(ColorScheme::Dark), 5000);
      QVERIFY(!theme.isDark());
      theme.setChoice(ThemeChoice::System);
      QVERIFY(theme.isDark());
    }
    QDBusConnection::disconnectFromBus(QStringLiteral("portal"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client"));
    daemon.kill();
    daemon.waitForFinished(3000);
  }
};

QTEST_MAIN(TestAppTheme)
#include "tst_app_theme.moc"
