// shell_quote and friends, checked against the real shells on this machine: whatever the
// quoting looks like, the only thing that matters is that sh/bash/dash hand the exact bytes
// back to a program.
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "studio/remote/shell_quote.h"

using studio::remote::EnvVar;
using studio::remote::is_valid_env_name;
using studio::remote::shell_command;
using studio::remote::shell_command_in_dir;
using studio::remote::shell_env_assignment;
using studio::remote::shell_join;
using studio::remote::shell_quote;

namespace {

std::string to_std(const QByteArray& bytes) {
  return std::string(bytes.constData(), static_cast<size_t>(bytes.size()));
}

QByteArray to_bytes(const std::string& text) {
  return QByteArray(text.data(), static_cast<qsizetype>(text.size()));
}

// Every byte but NUL, in a fixed pseudo-random order, so failures reproduce.
QByteArray random_bytes(int size) {
  std::mt19937 gen(20240521);
  std::uniform_int_distribution<int> byte(1, 255);
  QByteArray out;
  for (int i = 0; i < size; ++i) out.append(static_cast<char>(byte(gen)));
  return out;
}

// Random code points as valid UTF-8: unlike raw bytes these survive QProcess's QString argv.
QByteArray random_utf8(int size) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> point(1, 0x10FFFF);
  QByteArray out;
  while (out.size() < size) {
    auto c = static_cast<char32_t>(point(gen));
    if (c >= 0xD800 && c <= 0xDFFF) continue;  // surrogates are not characters
    out += QString::fromUcs4(&c, 1).toUtf8();
  }
  return out;
}

bool survives_qstring(const QByteArray& bytes) {
  return QString::fromUtf8(bytes).toUtf8() == bytes;
}

struct Shell {
  QString name;
  QString path;
};

// /bin/sh always; bash and dash wherever they are installed.
std::vector<Shell> available_shells() {
  std::vector<Shell> shells{{"sh", "/bin/sh"}};
  for (const char* name : {"bash", "dash"}) {
    QString path = QStandardPaths::findExecutable(name);
    if (!path.isEmpty()) shells.push_back({name, path});
  }
  return shells;
}

struct ShellResult {
  QString error;  // empty when the shell ran to the end
  int exit_code = -1;
  QByteArray out;
};

enum class Feed { Argv, Stdin };

// Runs the script with `SHELL -c SCRIPT` (no shell of our own in between) or, for scripts whose
// bytes a QString argv would mangle, with `SHELL -s` and the script on stdin.
ShellResult run_shell(const Shell& shell, const QByteArray& script, Feed feed,
                      const QString& locale, const QString& cwd) {
  QProcess proc;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("LC_ALL", locale);
  // A decoy directory of the same name waits there for a cd that wrongly searches CDPATH.
  if (!cwd.isEmpty()) env.insert("CDPATH", cwd + "/cdpath");
  proc.setProcessEnvironment(env);
  if (!cwd.isEmpty()) proc.setWorkingDirectory(cwd);
  if (feed == Feed::Argv) {
    proc.start(shell.path, {"-c", QString::fromUtf8(script)});
  } else {
    proc.start(shell.path, {"-s"});
  }
  ShellResult result;
  if (!proc.waitForStarted(10000)) {
    result.error = "cannot start " + shell.path;
    return result;
  }
  if (feed == Feed::Stdin) proc.write(script);
  proc.closeWriteChannel();
  if (!proc.waitForFinished(30000)) {
    proc.kill();
    proc.waitForFinished();
    result.error = shell.name + " did not finish";
    return result;
  }
  result.exit_code = proc.exitCode();
  result.out = proc.readAllStandardOutput();
  if (proc.exitStatus() != QProcess::NormalExit) result.error = shell.name + " crashed";
  if (result.exit_code != 0) {
    result.error = shell.name + " exited " + QString::number(result.exit_code) + ": " +
                   QString::fromUtf8(proc.readAllStandardError());
  }
  return result;
}

QString describe_mismatch(const QByteArray& got, const QByteArray& want) {
  qsizetype i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return QString("output differs at byte %1 (got %2 bytes, want %3): got ...%4, want ...%5")
      .arg(i)
      .arg(got.size())
      .arg(want.size())
      .arg(QString::fromLatin1(got.mid(i, 24).toHex()))
      .arg(QString::fromLatin1(want.mid(i, 24).toHex()));
}

// Runs SCRIPT in every shell, locale and feed that can carry it and compares stdout with WANT.
// Returns the first failure, or an empty string.
QString check_everywhere(const QByteArray& script, const QByteArray& want,
                         const QString& cwd = {}) {
  std::vector<Feed> feeds{Feed::Stdin};
  if (survives_qstring(script)) feeds.push_back(Feed::Argv);
  for (const Shell& shell : available_shells()) {
    for (const QString& locale : {QString("C"), QString("C.UTF-8")}) {
      for (Feed feed : feeds) {
        ShellResult r = run_shell(shell, script, feed, locale, cwd);
        QString where = QString("%1 (%2, LC_ALL=%3): ")
                            .arg(shell.path, feed == Feed::Argv ? "-c" : "-s", locale);
        if (!r.error.isEmpty()) return where + r.error;
        if (r.out != want) return where + describe_mismatch(r.out, want);
      }
    }
  }
  return {};
}

QByteArray printf_script(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"printf", "%s\\0"};
  argv.insert(argv.end(), args.begin(), args.end());
  return to_bytes(shell_join(argv));
}

QByteArray nul_joined(const std::vector<std::string>& args) {
  QByteArray out;
  for (const std::string& a : args) out += to_bytes(a) + '\0';
  return out;
}

void add_nasty_rows() {
  QTest::addColumn<QByteArray>("arg");
  QTest::newRow("empty") << QByteArray();
  QTest::newRow("plain") << QByteArray("abc");
  QTest::newRow("bare punctuation") << QByteArray("abc/def-1.2_x=y:z,+@%");
  QTest::newRow("space") << QByteArray("a b  c");
  QTest::newRow("only spaces") << QByteArray("   ");
  QTest::newRow("single quote") << QByteArray("it's");
  QTest::newRow("only a quote") << QByteArray("'");
  QTest::newRow("quote runs") << QByteArray("''a'''b''");
  QTest::newRow("double quote") << QByteArray("say \"hi\"");
  QTest::newRow("dollar") << QByteArray("$HOME ${PATH} $(id) $((1+1)) $1 $@ $*");
  QTest::newRow("backticks") << QByteArray("`id` `");
  QTest::newRow("backslashes") << QByteArray("a\\b\\\\c\\'\\");
  QTest::newRow("operators") << QByteArray("a;b|c&d&&e||f>g<h>>i<<j(k)l");
  QTest::newRow("newline") << QByteArray("line1\nline2\n");
  QTest::newRow("tab and CR") << QByteArray("a\tb\rc");
  QTest::newRow("globs") << QByteArray("* ? [a-z] [!x] **/*.txt");
  QTest::newRow("braces") << QByteArray("{a,b} {1..3} {}");
  QTest::newRow("leading tilde") << QByteArray("~");
  QTest::newRow("tilde path") << QByteArray("~root/x");
  QTest::newRow("tilde after equals") << QByteArray("--dir=~/x");
  QTest::newRow("leading hash") << QByteArray("#comment");
  QTest::newRow("history bang") << QByteArray("!! !$ !-1");
  QTest::newRow("leading dash") << QByteArray("-n");
  QTest::newRow("dash e") << QByteArray("-e\\n");
  QTest::newRow("percent") << QByteArray("%s%d%%\\0");
  QTest::newRow("assignment look") << QByteArray("FOO=bar");
  QTest::newRow("zsh equals") << QByteArray("=ls");
  QTest::newRow("reserved word") << QByteArray("if");
  QTest::newRow("utf8") << QByteArray("ünïcödé ✓ 日本語 🚀");
  QTest::newRow("control bytes") << QByteArray("\x01\x02\x1b[31m\x7f");
  QTest::newRow("high bytes") << QByteArray("\x80\xff\xfe\xc3");
  QTest::newRow("random utf8 10k") << random_utf8(10 * 1024);
  QTest::newRow("random bytes 10k") << random_bytes(10 * 1024);
}

}  // namespace

class TestShellQuote : public QObject {
  Q_OBJECT

 private slots:
  void exact_quoting_data() {
    QTest::addColumn<QByteArray>("arg");
    QTest::addColumn<QByteArray>("quoted");
    QTest::newRow("plain") << QByteArray("abc") << QByteArray("abc");
    QTest::newRow("bare punctuation")
        << QByteArray("abc/def-1.2_x=y:z,+@%") << QByteArray("abc/def-1.2_x=y:z,+@%");
    QTest::newRow("option") << QByteArray("--lr=3e-4") << QByteArray("--lr=3e-4");
    QTest::newRow("empty") << QByteArray() << QByteArray("''");
    QTest::newRow("space") << QByteArray("a b") << QByteArray("'a b'");
    QTest::newRow("quote") << QByteArray("a'b") << QByteArray("'a'\\''b'");
    QTest::newRow("tilde") << QByteArray("~") << QByteArray("'~'");
    QTest::newRow("hash") << QByteArray("#x") << QByteArray("'#x'");
    QTest::newRow("assignment") << QByteArray("A=b") << QByteArray("'A=b'");
    QTest::newRow("zsh equals") << QByteArray("=x") << QByteArray("'=x'");
    QTest::newRow("keyword") << QByteArray("done") << QByteArray("'done'");
    QTest::newRow("inner percent") << QByteArray("50%") << QByteArray("50%");
    QTest::newRow("utf8") << QByteArray("é") << QByteArray("'é'");
  }

  void exact_quoting() {
    QFETCH(QByteArray, arg);
    QFETCH(QByteArray, quoted);
    QCOMPARE(to_bytes(shell_quote(to_std(arg))), quoted);
  }

  void real_shells_print_the_argument_data() { add_nasty_rows(); }

  void real_shells_print_the_argument() {
    QFETCH(QByteArray, arg);
    std::vector<std::string> args{to_std(arg)};
    QString failure = check_everywhere(printf_script(args), nul_joined(args));
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
  }

  void all_arguments_in_one_line() {
    std::vector<std::string> args;
    for (const QByteArray& a :
         {QByteArray("a b"), QByteArray("it's"), QByteArray(), QByteArray("$x`y`"),
          QByteArray("\n"), QByteArray("~"), QByteArray("#"), QByteArray("-"), random_bytes(512)}) {
      args.push_back(to_std(a));
    }
    QString failure = check_everywhere(printf_script(args), nul_joined(args));
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
  }

  void command_position_stays_a_command_data() {
    QTest::addColumn<QByteArray>("word");
    for (const char* w : {"if", "done", "time", "{", "!", "FOO=bar", "=true", "[[", "case"}) {
      QTest::newRow(w) << QByteArray(w);
    }
  }

  // Bare, these would be keywords, assignments or syntax; quoted, each is a command name that
  // does not exist, so the shell must report 127.
  void command_position_stays_a_command() {
    QFETCH(QByteArray, word);
    QByteArray script = "PATH=/nonexistent; " + to_bytes(shell_join({to_std(word)})) +
                        " 2>/dev/null; printf '%s' \"$?\"";
    QString failure = check_everywhere(script, "127");
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
  }

  void nul_is_rejected() {
    std::string with_nul("a\0b", 3);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_quote(with_nul));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_join({"ok", with_nul}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_env_assignment({"A", with_nul}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_command_in_dir(with_nul, {"pwd"}));
    try {
      shell_quote(with_nul);
    } catch (const std::invalid_argument& e) {
      QVERIFY2(std::string(e.what()).find("NUL byte at offset 1") != std::string::npos, e.what());
    }
  }

  void empty_commands_are_rejected() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_command({}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_command_in_dir("/tmp", {}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_command_in_dir("", {"pwd"}));
    QCOMPARE(shell_join({}), std::string());
  }

  void env_names_data() {
    QTest::addColumn<QByteArray>("name");
    QTest::addColumn<bool>("valid");
    QTest::newRow("upper") << QByteArray("PATH") << true;
    QTest::newRow("lower digits") << QByteArray("cuda_visible_devices2") << true;
    QTest::newRow("underscore") << QByteArray("_") << true;
    QTest::newRow("leading underscore") << QByteArray("_A1") << true;
    QTest::newRow("empty") << QByteArray() << false;
    QTest::newRow("leading digit") << QByteArray("1A") << false;
    QTest::newRow("dash") << QByteArray("A-B") << false;
    QTest::newRow("dot") << QByteArray("A.B") << false;
    QTest::newRow("space") << QByteArray("A B") << false;
    QTest::newRow("equals") << QByteArray("A=B") << false;
    QTest::newRow("dollar") << QByteArray("$A") << false;
    QTest::newRow("semicolon") << QByteArray("A;rm") << false;
    QTest::newRow("non-ascii") << QByteArray("Ä") << false;
    QTest::newRow("nul") << QByteArray("A\0B", 3) << false;
  }

  void env_names() {
    QFETCH(QByteArray, name);
    QFETCH(bool, valid);
    QCOMPARE(is_valid_env_name(to_std(name)), valid);
    EnvVar var{to_std(name), "value"};
    if (valid) {
      QCOMPARE(shell_env_assignment(var), to_std(name) + "=value");
      return;
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_env_assignment(var));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shell_command({"true"}, {var}));
  }

  void env_prefix_reaches_only_the_command() {
    std::string nasty = "a b'c\"$HOME`id`\n;|&*~#";
    std::string inner = "printf '%s\\0' \"$A\" \"$B\"";
    std::string line = shell_command({"sh", "-c", inner}, {{"A", nasty}, {"B", "X=y"}});
    QCOMPARE(line.rfind("A='", 0), size_t{0});
    QByteArray script = to_bytes(line + "; printf '%s' \"${A-unset}\"");
    QByteArray want = nul_joined({nasty, "X=y"}) + "unset";
    QString failure = check_everywhere(script, want);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
  }

  void command_in_dir_data() {
    QTest::addColumn<QByteArray>("name");
    QTest::addColumn<bool>("relative");
    QByteArray nasty("run 'x' \"y\" $z `w`;&|*?\t\n~#ü");
    QTest::newRow("absolute nasty") << nasty << false;
    QTest::newRow("relative nasty") << nasty << true;
    QTest::newRow("relative leading dash") << QByteArray("-P") << true;
    QTest::newRow("relative single dash") << QByteArray("-") << true;
    QTest::newRow("relative tilde") << QByteArray("~") << true;
  }

  // Runs pwd -P and an env var through "cd DIR && export ... && exec ...": the shell must land in
  // DIR itself, not in a CDPATH match, $OLDPWD or an option.
  void command_in_dir() {
    QFETCH(QByteArray, name);
    QFETCH(bool, relative);
    QTemporaryDir root;
    QVERIFY(root.isValid());
    QString root_path = QFileInfo(root.path()).canonicalFilePath();
    QString sub = QString::fromUtf8(name);
    QVERIFY(QDir(root_path).mkdir(sub));
    QVERIFY(QDir(root_path).mkpath("cdpath/" + sub));
    QByteArray abs = QFile::encodeName(root_path + "/" + sub);
    std::string dir = relative ? to_std(name) : to_std(abs);
    std::string value = "v'a\"l $x";
    std::string line =
        shell_command_in_dir(dir, {"sh", "-c", "pwd -P; printf '%s' \"$V\""}, {{"V", value}});
    QString failure = check_everywhere(to_bytes(line), abs + "\n" + to_bytes(value), root_path);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
  }
};

QTEST_MAIN(TestShellQuote)
#include "tst_shell_quote.moc"
