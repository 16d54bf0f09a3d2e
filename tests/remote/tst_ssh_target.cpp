// parse_ssh_target: the accepted forms, the refused ones with their messages, and the round trip
// through to_string().
#include <QtTest>

#include <string>

#include "studio/remote/ssh_target.h"

using studio::remote::is_ipv6_address;
using studio::remote::parse_ssh_target;
using studio::remote::SshTarget;

namespace {

std::string to_std(const QByteArray& bytes) {
  return std::string(bytes.constData(), static_cast<size_t>(bytes.size()));
}

}  // namespace

class TestSshTarget : public QObject {
  Q_OBJECT

 private slots:
  void valid_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QByteArray>("user");
    QTest::addColumn<QByteArray>("host");
    QTest::addColumn<int>("port");  // 0: none given
    QTest::addColumn<QByteArray>("canonical");
    auto row = [](const char* name, const char* text, const char* user, const char* host, int port,
                  const char* canonical) {
      QTest::newRow(name) << QByteArray(text) << QByteArray(user) << QByteArray(host) << port
                          << QByteArray(canonical);
    };
    row("host", "gpu1", "", "gpu1", 0, "gpu1");
    row("fqdn", "gpu1.cluster.example.org", "", "gpu1.cluster.example.org", 0,
        "gpu1.cluster.example.org");
    row("trailing dot", "node.example.", "", "node.example.", 0, "node.example.");
    row("host port", "gpu1:2222", "", "gpu1", 2222, "gpu1:2222");
    row("user host", "alice@gpu1", "alice", "gpu1", 0, "alice@gpu1");
    row("user host port", "alice@gpu1:22", "alice", "gpu1", 22, "alice@gpu1:22");
    row("scheme", "ssh://gpu1", "", "gpu1", 0, "gpu1");
    row("scheme full", "ssh://bob@10.0.0.7:65535", "bob", "10.0.0.7", 65535, "bob@10.0.0.7:65535");
    row("scheme upper case", "SSH://gpu1", "", "gpu1", 0, "gpu1");
    row("ipv4", "127.0.0.1", "", "127.0.0.1", 0, "127.0.0.1");
    row("ipv6 loopback", "[::1]", "", "::1", 0, "[::1]");
    row("ipv6 port", "[::1]:2222", "", "::1", 2222, "[::1]:2222");
    row("ipv6 user", "user@[::1]", "user", "::1", 0, "user@[::1]");
    row("ipv6 scheme", "ssh://root@[2001:db8::42]:22", "root", "2001:db8::42", 22,
        "root@[2001:db8::42]:22");
    row("ipv6 full", "[2001:0db8:0000:0000:0000:ff00:0042:8329]", "",
        "2001:0db8:0000:0000:0000:ff00:0042:8329", 0, "[2001:0db8:0000:0000:0000:ff00:0042:8329]");
    row("ipv6 zone", "[fe80::1%eth0]:22", "", "fe80::1%eth0", 22, "[fe80::1%eth0]:22");
    row("ipv6 mapped v4", "[::ffff:192.0.2.1]", "", "::ffff:192.0.2.1", 0, "[::ffff:192.0.2.1]");
    row("port 1", "h:1", "", "h", 1, "h:1");
    row("port leading zeros", "h:0022", "", "h", 22, "h:22");
    row("underscore host", "my_node-01", "", "my_node-01", 0, "my_node-01");
    row("user with dots", "first.last@h", "first.last", "h", 0, "first.last@h");
    row("user with at", "a@corp.example@h", "a@corp.example", "h", 0, "a@corp.example@h");
    row("utf8 user", "jürgen@h", "jürgen", "h", 0, "jürgen@h");
  }

  void valid() {
    QFETCH(QByteArray, text);
    QFETCH(QByteArray, user);
    QFETCH(QByteArray, host);
    QFETCH(int, port);
    QFETCH(QByteArray, canonical);
    std::string error;
    auto target = parse_ssh_target(to_std(text), error);
    QVERIFY2(target.has_value(), error.c_str());
    QVERIFY(error.empty());
    QCOMPARE(target->user, to_std(user));
    QCOMPARE(target->host, to_std(host));
    QCOMPARE(target->port.value_or(0), port);
    QCOMPARE(target->port.has_value(), port != 0);
    QCOMPARE(target->to_string(), to_std(canonical));

    auto again = parse_ssh_target(target->to_string(), error);
    QVERIFY2(again.has_value(), error.c_str());
    QVERIFY(*again == *target);
  }

  void invalid_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QByteArray>("message");  // a part of the error that must be there
    auto row = [](const char* name, const QByteArray& text, const char* message) {
      QTest::newRow(name) << text << QByteArray(message);
    };
    row("empty", "", "empty SSH target");
    row("scheme only", "ssh://", "empty host");
    row("user only", "alice@", "empty host after 'alice@'");
    row("empty user", "@gpu1", "empty user name");
    row("port only", ":22", "empty host before ':'");
    row("empty port", "gpu1:", "empty port");
    row("port zero", "gpu1:0", "port '0' is out of range 1-65535");
    row("port too big", "gpu1:65536", "port '65536' is out of range");
    row("port huge", "gpu1:99999999999999999999999", "out of range");
    row("port text", "gpu1:ssh", "port 'ssh' is not a number");
    row("port negative", "gpu1:-22", "not a number");
    row("port plus", "gpu1:+22", "not a number");
    row("port then junk", "gpu1:22x", "not a number");
    row("space inside", "gpu 1", "contains whitespace at offset 3");
    row("leading space", " gpu1", "whitespace");
    row("trailing newline", "gpu1\n", "whitespace");
    row("tab", "a@\tb", "whitespace");
    row("control", QByteArray("gpu\x01", 4), "control character");
    row("nul", QByteArray("gpu\0x", 5), "control character");
    row("path", "ssh://gpu1/home/x", "a path, query or fragment after the host ('/home/x')");
    row("root path", "ssh://gpu1:22/", "path");
    row("query", "ssh://gpu1?x=1", "query");
    row("fragment", "ssh://gpu1#x", "fragment");
    row("scp style", "gpu1:/data", "port '/data' is not a number");
    row("slash in host", "gpu1/x", "contains '/'");
    row("other scheme", "http://gpu1", "unsupported scheme 'http://'");
    row("dollar", "gp$u", "contains '$'");
    row("semicolon", "gpu;id", "contains ';'");
    row("non-ascii host", "grün.example", "non-ASCII");
    row("option injection", "-oProxyCommand=id", "must not start with '-'");
    row("user option injection", "-oX@h", "user name '-oX' must not start with '-'");
    row("password", "alice:secret@gpu1", "passwords in the target are not supported");
    row("double dot", "a..b", "empty label");
    row("leading dot", ".a", "empty label");
    row("bare ipv6", "::1", "put it in brackets");
    row("bare ipv6 port", "fe80::1:22", "brackets");
    row("unclosed bracket", "[::1", "missing ']'");
    row("empty brackets", "[]", "empty IPv6 address");
    row("ipv4 in brackets", "[127.0.0.1]", "'127.0.0.1' is not a valid IPv6 address");
    row("bad ipv6", "[::g]", "not a valid IPv6 address");
    row("junk after bracket", "[::1]x", "unexpected 'x' after ']'");
    row("bracket port empty", "[::1]:", "empty port");
    row("bracket in user", "a[b@h", "contains '['");
    row("too long", QByteArray(254, 'a'), "longer than 253");
  }

  void invalid() {
    QFETCH(QByteArray, text);
    QFETCH(QByteArray, message);
    std::string error;
    auto target = parse_ssh_target(to_std(text), error);
    QVERIFY2(
        !target.has_value(),
        qPrintable("accepted as " + QString::fromStdString(target ? target->to_string() : "")));
    QVERIFY2(error.find(to_std(message)) != std::string::npos, error.c_str());
  }

  void error_is_cleared_on_success() {
    std::string error = "stale";
    QVERIFY(parse_ssh_target("gpu1", error).has_value());
    QVERIFY(error.empty());
  }

  void ipv6_addresses_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<bool>("valid");
    for (const char* ok :
         {"::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
          "fe80::1%eth0", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "ABCD::ef"}) {
      QTest::newRow(ok) << QByteArray(ok) << true;
    }
    for (const char* bad :
         {"", ":", ":::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1::2::3",
          ":1::", "1::2:", "12345::", "::g", "1.2.3.4", "::1.2.3", "::1.2.3.256", "::01.2.3.4",
          "1.2.3.4::", "fe80::1%", "fe80::1%a b", "1:2:3:4:5:6:7:8::"}) {
      QTest::newRow(bad[0] ? bad : "(empty)") << QByteArray(bad) << false;
    }
  }

  void ipv6_addresses() {
    QFETCH(QByteArray, text);
    QFETCH(bool, valid);
    QCOMPARE(is_ipv6_address(to_std(text)), valid);
  }
};

QTEST_MAIN(TestSshTarget)
#include "tst_ssh_target.moc"
