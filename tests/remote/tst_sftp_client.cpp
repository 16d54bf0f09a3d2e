// SftpClient against a real OpenSSH server on 127.0.0.1 (see sshd_server.h). The server runs on
// this machine as this user, so the remote side of every transfer is checked by reading the
// temporary directory directly, independently of SFTP.
#include <QDir>
#include <QFile>
#include <QRandomGenerator>
#include <QtTest>

#include <sys/stat.h>

#include "sshd_server.h"
#include "studio/remote/sftp_client.h"

using namespace studio::remote;

namespace {

bool write_file(const QString& path, const QByteArray& data, QIODevice::OpenMode mode) {
  QFile file(path);
  return file.open(mode) && file.write(data) == data.size();
}

QByteArray read_file(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// Hidden entries included: the upload's temporary files start with a dot.
bool dir_is_empty(const QString& path) {
  return QDir(path).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty();
}

QByteArray random_bytes(int size) {
  QByteArray data(size, '\0');
  for (char& c : data) c = static_cast<char>(QRandomGenerator::global()->bounded(256));
  return data;
}

}  // namespace

class TestSftpClient : public QObject {
  Q_OBJECT

 private:
  SshdFixture server_;
  QTemporaryDir remote_;  // what the server writes into, read back directly
  QTemporaryDir local_;
  std::optional<SshSession> session_;
  std::optional<SftpClient> sftp_;

  std::string remote(const QString& name) const { return remote_.filePath(name).toStdString(); }

 private slots:
  void initTestCase() {
    QVERIFY(remote_.isValid() && local_.isValid());
    const QString error = server_.set_up(local_.path());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    session_.emplace(server_.connect());
    sftp_.emplace(*session_);
  }

  void upload_reports_progress_and_lands_atomically() {
    // Shell metacharacters in the names: the remote sha256sum must get them quoted.
    QVERIFY(QDir(remote_.path()).mkpath("dir with 'quotes' $x"));
    const QString local = local_.filePath("model; `weights`.bin");
    const QByteArray data = random_bytes(300 * 1024 + 17);
    QVERIFY(write_file(local, data, QIODevice::WriteOnly));
    QVERIFY(QFile::setPermissions(local, QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup));
    const std::string target = remote("dir with 'quotes' $x/model; `weights`.bin");

    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    UploadResult r = sftp_->upload(
        local.toStdString(), target,
        [&](std::uint64_t sent, std::uint64_t total) { calls.emplace_back(sent, total); });
    QVERIFY(!r.skipped);
    QCOMPARE(r.bytes, static_cast<std::uint64_t>(data.size()));
    QCOMPARE(QString::fromStdString(r.sha256),
             QString(QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex()));
    QVERIFY(calls.size() >= 5);
    for (std::size_t i = 1; i < calls.size(); ++i) QVERIFY(calls[i].first > calls[i - 1].first);
    QCOMPARE(calls.back().first, static_cast<std::uint64_t>(data.size()));
    QCOMPARE(calls.back().second, static_cast<std::uint64_t>(data.size()));
    QCOMPARE(read_file(QString::fromStdString(target)), data);
    // Only the target remains: the temporary file was renamed, not copied.
    QCOMPARE(
        QDir(remote_.filePath("dir with 'quotes' $x")).entryList(QDir::Files | QDir::Hidden).size(),
        1);
    struct ::stat st {};
    QCOMPARE(::stat(target.c_str(), &st), 0);
    // Private on the host whatever the local mode (0640 here): 0600, or 0700 for an executable.
    QCOMPARE(st.st_mode & 0777, 0600u);
    QCOMPARE(::stat(local.toLocal8Bit().constData(), &st), 0);
    QCOMPARE(st.st_mode & 0777, 0640u);

    // Same size and content: skipped, nothing sent.
    calls.clear();
    r = sftp_->upload(local.toStdString(), target,
                      [&](std::uint64_t s, std::uint64_t t) { calls.emplace_back(s, t); });
    QVERIFY(r.skipped);
    QCOMPARE(r.bytes, 0u);
    QVERIFY(calls.empty());

    // Same size, other content: sent again and replaces the old file.
    QByteArray changed = data;
    changed[1000] = static_cast<char>(changed[1000] ^ 0x5a);
    QVERIFY(write_file(local, changed, QIODevice::WriteOnly | QIODevice::Truncate));
    r = sftp_->upload(local.toStdString(), target);
    QVERIFY(!r.skipped);
    QCOMPARE(read_file(QString::fromStdString(target)), changed);
  }

  void upload_errors_name_the_files() {
    QVERIFY_THROWS_EXCEPTION(RemoteError,
                             sftp_->upload(local_.filePath("missing").toStdString(), remote("x")));
    const QString local = local_.filePath("small.txt");
    QVERIFY(write_file(local, "hello", QIODevice::WriteOnly));
    // A progress callback that throws (the user cancelled) leaves no temporary file behind.
    QVERIFY(QDir(remote_.path()).mkpath("cancelled"));
    QVERIFY(write_file(local_.filePath("big.bin"), random_bytes(200 * 1024), QIODevice::WriteOnly));
    QVERIFY_THROWS_EXCEPTION(
        std::runtime_error,
        sftp_->upload(local_.filePath("big.bin").toStdString(), remote("cancelled/big.bin"),
                      [](std::uint64_t, std::uint64_t) { throw std::runtime_error("cancelled"); }));
    QVERIFY(dir_is_empty(remote_.filePath("cancelled")));
    QVERIFY(QDir(remote_.path()).mkpath("a_directory"));
    QVERIFY_THROWS_EXCEPTION(RemoteError,
                             sftp_->upload(local.toStdString(), remote("a_directory")));
    QVERIFY(dir_is_empty(remote_.filePath("a_directory")));
    try {
      sftp_->upload(local.toStdString(), remote("no/such/dir/small.txt"));
      QFAIL("upload into a missing directory succeeded");
    } catch (const RemoteError& e) {
      QCOMPARE(e.kind(), RemoteError::Kind::Transfer);
      QVERIFY2(QString(e.what()).contains(remote_.filePath("no/such/dir")), e.what());
      QVERIFY2(QString(e.what()).contains("127.0.0.1:" + QString::number(server_.port())),
               e.what());
    }
  }

  void mkdir_p_and_stat() {
    QVERIFY(!sftp_->stat(remote("tree")));
    sftp_->mkdir_p(remote("tree/a/b c/d"));
    sftp_->mkdir_p(remote("tree/a/b c/d"));  // existing: fine
    auto st = sftp_->stat(remote("tree/a/b c/d"));
    QVERIFY(st && st->is_directory);
    QVERIFY(write_file(remote_.filePath("tree/file"), "12345", QIODevice::WriteOnly));
    st = sftp_->stat(remote("tree/file"));
    QVERIFY(st && !st->is_directory);
    QCOMPARE(st->size, 5u);
    QVERIFY_THROWS_EXCEPTION(RemoteError, sftp_->mkdir_p(remote("tree/file/sub")));
  }

  void read_from_follows_a_growing_file() {
    const QString path = remote_.filePath("events.jsonl");
    QVERIFY(write_file(path, "{\"step\":1}\n", QIODevice::WriteOnly));
    std::uint64_t cursor = 0;
    std::string chunk = sftp_->read_from(path.toStdString(), cursor, 1 << 20);
    QCOMPARE(chunk, std::string("{\"step\":1}\n"));
    cursor += chunk.size();
    QCOMPARE(sftp_->read_from(path.toStdString(), cursor, 1 << 20), std::string());
    QVERIFY(write_file(path, "{\"step\":2}\n{\"st", QIODevice::Append));
    chunk = sftp_->read_from(path.toStdString(), cursor, 1 << 20);
    QCOMPARE(chunk, std::string("{\"step\":2}\n{\"st"));
    QCOMPARE(sftp_->read_from(path.toStdString(), 2, 4), std::string("step"));
    QCOMPARE(sftp_->read_from(path.toStdString(), 1000, 10), std::string());
    // Larger than one SFTP read: the loop must gather every chunk.
    const QByteArray big = random_bytes(200 * 1024);
    QVERIFY(write_file(path, big, QIODevice::Append));
    const std::string all = sftp_->read_from(path.toStdString(), 0, 1 << 20);
    QCOMPARE(QByteArray::fromStdString(all), read_file(path));
    QVERIFY_THROWS_EXCEPTION(RemoteError, sftp_->read_from(remote("missing.jsonl"), 0, 10));
  }

  void cleanupTestCase() {
    sftp_.reset();
    session_.reset();
    server_.stop();
  }
};

QTEST_MAIN(TestSftpClient)
#include "tst_sftp_client.moc"
