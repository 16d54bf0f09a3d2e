// The libssh check macros against a real libssh session. The only peer ever contacted is
// 127.0.0.1:1, where nothing listens, so connecting fails fast with a libssh message.
#include <QtTest>

#include <memory>
#include <string>

#include "studio/remote/ssh_check.h"

using studio::remote::SshError;

namespace {

struct SessionFree {
  void operator()(ssh_session s) const { ssh_free(s); }
};
using Session = std::unique_ptr<std::remove_pointer_t<ssh_session>, SessionFree>;

Session new_session() {
  Session session(ssh_new());
  if (!session) return session;
  // Keep ~/.ssh/config from rewriting the host, port or proxy of this test.
  bool process_config = false;
  ssh_options_set(session.get(), SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  return session;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int returns(int rc) {
  return rc;
}

}  // namespace

class TestSshCheck : public QObject {
  Q_OBJECT

 private slots:
  void success_passes_the_result_through() {
    Session session = new_session();
    QVERIFY(session);
    int rc = STUDIO_SSH_CHECK(session.get(),
                              ssh_options_set(session.get(), SSH_OPTIONS_HOST, "127.0.0.1"));
    QCOMPARE(rc, SSH_OK);
    QCOMPARE(STUDIO_SSH_CHECK(session.get(), returns(42)), 42);
    QCOMPARE(STUDIO_SSH_CHECK(session.get(), returns(SSH_EOF)), SSH_EOF);
    QCOMPARE(STUDIO_SSH_CHECK_NONBLOCKING(session.get(), returns(SSH_AGAIN)), SSH_AGAIN);
    ssh_session raw = STUDIO_SSH_CHECK_PTR(session.get(), session.get());
    QCOMPARE(raw, session.get());
  }

  void invalid_option_throws() {
    Session session = new_session();
    QVERIFY(session);
    try {
      STUDIO_SSH_CHECK(session.get(),
                       ssh_options_set(session.get(), SSH_OPTIONS_PORT_STR, "notaport"));
      QFAIL("no SshError for a non-numeric port");
    } catch (const SshError& e) {
      QCOMPARE(e.statement(),
               std::string(R"(ssh_options_set(session.get(), SSH_OPTIONS_PORT_STR, "notaport"))"));
      QVERIFY2(contains(e.location(), "tst_ssh_check.cpp:"), e.location().c_str());
      QCOMPARE(e.code(), SSH_ERROR);
      QCOMPARE(e.ssh_message(), std::string(ssh_get_error(session.get())));
      // libssh 0.10 only logs this failure and leaves the message empty; what() must say so.
      std::string shown = e.ssh_message().empty() ? "no error message" : e.ssh_message();
      QVERIFY2(contains(e.what(), shown), e.what());
      QVERIFY2(contains(e.what(), e.statement()), e.what());
      QVERIFY2(contains(e.what(), e.location()), e.what());
    }
  }

  void refused_connection_throws_with_the_libssh_message() {
    Session session = new_session();
    QVERIFY(session);
    ssh_session s = session.get();
    int port = 1;
    long timeout_s = 5;
    STUDIO_SSH_CHECK(s, ssh_options_set(s, SSH_OPTIONS_HOST, "127.0.0.1"));
    STUDIO_SSH_CHECK(s, ssh_options_set(s, SSH_OPTIONS_PORT, &port));
    STUDIO_SSH_CHECK(s, ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout_s));
    try {
      STUDIO_SSH_CHECK(s, ssh_connect(s));
      ssh_disconnect(s);
      QFAIL("connected to 127.0.0.1:1, where nothing should listen");
    } catch (const SshError& e) {
      QCOMPARE(e.statement(), std::string("ssh_connect(s)"));
      QCOMPARE(e.code(), SSH_ERROR);
      QVERIFY(!e.ssh_message().empty());
      QCOMPARE(e.ssh_message(), std::string(ssh_get_error(s)));
      QVERIFY2(contains(e.what(), "ssh_connect(s)"), e.what());
      QVERIFY2(contains(e.what(), e.ssh_message()), e.what());
      QVERIFY2(contains(e.what(), "SSH_ERROR"), e.what());
      qInfo("SshError: %s", e.what());
    }
  }

  void again_is_an_error_in_blocking_code() {
    Session session = new_session();
    QVERIFY_THROWS_EXCEPTION(SshError, STUDIO_SSH_CHECK(session.get(), returns(SSH_AGAIN)));
    try {
      STUDIO_SSH_CHECK(session.get(), returns(SSH_AGAIN));
    } catch (const SshError& e) {
      QCOMPARE(e.code(), SSH_AGAIN);
      QVERIFY2(contains(e.what(), "SSH_AGAIN"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(SshError,
                             STUDIO_SSH_CHECK_NONBLOCKING(session.get(), returns(SSH_ERROR)));
  }

  void null_pointer_throws() {
    Session session = new_session();
    ssh_channel none = nullptr;
    QVERIFY_THROWS_EXCEPTION(SshError, STUDIO_SSH_CHECK_PTR(session.get(), none));
    // Errors without a session still carry the statement.
    try {
      STUDIO_SSH_CHECK_PTR(nullptr, none);
      QFAIL("no SshError for a null pointer");
    } catch (const SshError& e) {
      QCOMPARE(e.statement(), std::string("none"));
      QVERIFY(e.ssh_message().empty());
      QVERIFY2(contains(e.what(), "no error message"), e.what());
    }
  }
};

QTEST_MAIN(TestSshCheck)
#include "tst_ssh_check.moc"
