// Hub ids (`model_name_or_path: Org/Model`) found offline in the local Hugging Face cache
// (config/hub_cache.cpp): which texts are ids, which cache folders are searched in which order,
// refs/REVISION -> snapshots/HASH with branches, commit hashes, incomplete downloads and missing
// revisions, each lookup checked against huggingface_hub and transformers themselves
// (tests/reference/hf_cache_lookup.py); then validate, estimate's model and the paths the engine
// loads (resolve_hub_models), with the messages for what is not there; and refs that are not
// what huggingface_hub writes (a link to /dev/zero, a FIFO, a path), refused in time with the
// file named.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <cstdlib>
#include <map>

#include "../base/hostile_files.h"
#include "studio/config/config_io.h"
#include "studio/model_facts/hub_cache.h"
#include "studio/config/validate.h"

using namespace studio;

namespace {

const QString kDemoModel = QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model");
const char* const kEnv[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                            "TRANSFORMERS_CACHE", "HOME"};

QString hash(char digit) { return QString(40, QLatin1Char(digit)); }

// Sets the cache variables to `values` (absent: unset) for one scope, and puts back what was.
class EnvScope {
 public:
  explicit EnvScope(const std::map<QString, QString>& values) {
    for (const char* name : kEnv) {
      saved_[name] = qEnvironmentVariableIsSet(name) ? std::optional(qgetenv(name)) : std::nullopt;
      const auto it = values.find(QString::fromLatin1(name));
      if (it == values.end())
        qunsetenv(name);
      else
        qputenv(name, it->second.toUtf8());
    }
  }
  ~EnvScope() {
    for (const auto& [name, value] : saved_) {
      if (value)
        qputenv(name.c_str(), *value);
      else
        qunsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<QByteArray>> saved_;
};

// A model repo in a cache as huggingface_hub lays it out: files in blobs/, each snapshot's
// files symbolic links to them, refs/NAME holding a commit hash.
void addRepo(const QString& cache, const QString& id, const std::map<QString, QString>& refs,
             const std::map<QString, QStringList>& snapshots) {
  const QString repo = cache + "/models--" + QString(id).replace("/", "--");
  QVERIFY(QDir().mkpath(repo + "/blobs") && QDir().mkpath(repo + "/refs"));
  for (const auto& [name, commit] : refs) {
    QDir().mkpath(QFileInfo(repo + "/refs/" + name).absolutePath());
    QFile ref(repo + "/refs/" + name);
    QVERIFY(ref.open(QIODevice::WriteOnly));
    ref.write(commit.toUtf8());  // huggingface_hub writes no newline
  }
  for (const auto& [commit, files] : snapshots) {
    QVERIFY(QDir().mkpath(repo + "/snapshots/" + commit));
    for (const QString& file : files) {
      const QString blob = repo + "/blobs/" + commit.left(8) + "-" + file;
      QVERIFY(QFile::copy(kDemoModel + "/" + file, blob));
      QVERIFY(QFile::link("../../blobs/" + QFileInfo(blob).fileName(),
                          repo + "/snapshots/" + commit + "/" + file));
    }
  }
}

// What huggingface_hub and transformers resolve for each "ID@REVISION" in `cache`.
std::map<QString, QJsonObject> reference(const QString& cache, const QStringList& queries) {
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON),
          QStringList{QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/hf_cache_lookup.py"), cache} +
              queries);
  std::map<QString, QJsonObject> out;
  if (!p.waitForFinished(120000) || p.exitCode() != 0) {
    qWarning("hf_cache_lookup.py failed: %s", p.readAllStandardError().constData());
    return out;
  }
  for (const QByteArray& line : p.readAllStandardOutput().split('\n'))
    if (!line.trimmed().isEmpty()) {
      const QJsonObject o = QJsonDocument::fromJson(line).object();
      out[o["query"].toString()] = o;
    }
  return out;
}

}  // namespace

class TestHubCache : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  QString cache_, other_;
  std::map<QString, QJsonObject> reference_;  // lookups_data's queries, asked once

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    cache_ = tmp_.filePath("hub");
    other_ = tmp_.filePath("other cache");
    // main and v2 are complete; "partial" stopped before config.json; "gone" names a snapshot
    // that is not there.
    addRepo(cache_, "Org/Tiny-Chat",
            {{"main", hash('a')}, {"v2", hash('b')}, {"partial", hash('c')}, {"gone", hash('d')}},
            {{hash('a'), {"config.json", "tokenizer.json", "tokenizer_config.json"}},
             {hash('b'), {"config.json", "tokenizer.json"}},
             {hash('c'), {"tokenizer.json"}}});
    addRepo(cache_, "single", {{"main", hash('e')}}, {{hash('e'), {"config.json"}}});
    addRepo(other_, "Org/Tiny-Chat", {{"main", hash('f')}}, {{hash('f'), {"config.json"}}});
    // Hugging Face's own answers for every lookup row, in one Python run (the environment's
    // cache set as the rows set it).
    const EnvScope scope({{"HOME", tmp_.filePath("home")}, {"HF_HUB_CACHE", cache_}});
    QStringList queries;
    for (const char* q : {"Org/Tiny-Chat@main", "Org/Tiny-Chat@v2", "Org/Tiny-Chat@partial",
                          "Org/Tiny-Chat@gone", "Org/Tiny-Chat@v9", "single@main", "Org/Other@main"})
      queries << QString::fromLatin1(q);
    queries << "Org/Tiny-Chat@" + hash('b');
    reference_ = reference(QString(), queries);
    QCOMPARE(int(reference_.size()), int(queries.size()));
  }

  void hubIds_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("id");
    QTest::newRow("org/name") << "Qwen/Qwen2-1.5B-Instruct" << true;
    QTest::newRow("name alone") << "gpt2" << true;
    QTest::newRow("a relative folder of two parts (a local one wins)") << "models/qwen" << true;
    QTest::newRow("absolute") << "/models/qwen" << false;
    QTest::newRow("dot-relative") << "./Qwen/Qwen2" << false;
    QTest::newRow("home") << "~/Qwen2" << false;
    QTest::newRow("three parts") << "a/b/c" << false;
    QTest::newRow("dot-dot part") << "Org/.." << false;
    QTest::newRow("space") << "Org/Tiny Chat" << false;
    QTest::newRow("trailing slash") << "Org/" << false;
    QTest::newRow("empty") << "" << false;
  }
  void hubIds() {
    QFETCH(QString, text);
    QFETCH(bool, id);
    QCOMPARE(looks_like_hub_id(text.toStdString()), id);
  }

  // The order huggingface_hub's constants give (HF_HUB_CACHE > HUGGINGFACE_HUB_CACHE > HF_HOME/hub
  // > XDG_CACHE_HOME/huggingface/hub > ~/.cache/huggingface/hub), after cache_dir, with
  // TRANSFORMERS_CACHE last.
  void cacheDirs_data() {
    QTest::addColumn<QString>("env");       // NAME=VALUE;...
    QTest::addColumn<QString>("cacheDir");  // the config's cache_dir
    QTest::addColumn<QString>("dirs");      // ';'-joined
    QTest::newRow("nothing set") << "HOME=/h" << "" << "/h/.cache/huggingface/hub";
    QTest::newRow("XDG_CACHE_HOME") << "HOME=/h;XDG_CACHE_HOME=/x" << "" << "/x/huggingface/hub";
    QTest::newRow("HF_HOME") << "HOME=/h;XDG_CACHE_HOME=/x;HF_HOME=/hf" << "" << "/hf/hub";
    QTest::newRow("HF_HOME with ~") << "HOME=/h;HF_HOME=~/hf" << "" << "/h/hf/hub";
    QTest::newRow("HF_HUB_CACHE over HF_HOME") << "HOME=/h;HF_HOME=/hf;HF_HUB_CACHE=/c" << ""
                                               << "/c";
    QTest::newRow("the older name") << "HOME=/h;HUGGINGFACE_HUB_CACHE=/old" << "" << "/old";
    QTest::newRow("cache_dir first, TRANSFORMERS_CACHE last")
        << "HOME=/h;HF_HUB_CACHE=/c;TRANSFORMERS_CACHE=/t" << "/mine" << "/mine;/c;/t";
    QTest::newRow("duplicates once") << "HOME=/h;HF_HUB_CACHE=/c" << "/c" << "/c";
  }
  void cacheDirs() {
    QFETCH(QString, env);
    QFETCH(QString, cacheDir);
    QFETCH(QString, dirs);
    std::map<QString, QString> values;
    for (const QString& kv : env.split(';', Qt::SkipEmptyParts))
      values[kv.section('=', 0, 0)] = kv.section('=', 1);
    const EnvScope scope(values);
    QStringList got;
    for (const std::string& d : hub_cache_dirs(cacheDir.toStdString()))
      got << QString::fromStdString(d);
    QCOMPARE(got.join(';'), dirs);
  }

  // Each lookup as ours finds it, and as huggingface_hub and transformers find it offline.
  void lookups_data() {
    QTest::addColumn<QString>("id");
    QTest::addColumn<QString>("revision");
    QTest::addColumn<QString>("snapshot");  // the commit found; "" when not found
    QTest::addColumn<QString>("why");       // in `searched` when not found
    QTest::newRow("main") << "Org/Tiny-Chat" << "main" << hash('a') << "";
    QTest::newRow("a branch") << "Org/Tiny-Chat" << "v2" << hash('b') << "";
    QTest::newRow("a commit hash") << "Org/Tiny-Chat" << hash('b') << hash('b') << "";
    QTest::newRow("a name alone") << "single" << "main" << hash('e') << "";
    QTest::newRow("an incomplete download") << "Org/Tiny-Chat" << "partial" << ""
                                            << "no config.json (an incomplete download)";
    QTest::newRow("a ref to no snapshot") << "Org/Tiny-Chat" << "gone" << ""
                                          << "not there (revision gone points at it)";
    QTest::newRow("no such revision") << "Org/Tiny-Chat" << "v9" << ""
                                      << "no such revision (the cache has no 'v9' of it)";
    QTest::newRow("not in the cache") << "Org/Other" << "main" << "" << "models--Org--Other: not there";
  }
  void lookups() {
    QFETCH(QString, id);
    QFETCH(QString, revision);
    QFETCH(QString, snapshot);
    QFETCH(QString, why);
    const EnvScope scope({{"HOME", tmp_.filePath("home")}, {"HF_HUB_CACHE", cache_}});
    const HubLookup found = find_in_hub_cache(id.toStdString(), revision.toStdString());
    const QString expected =
        snapshot.isEmpty() ? QString()
                           : cache_ + "/models--" + QString(id).replace("/", "--") + "/snapshots/" + snapshot;
    QCOMPARE(QString::fromStdString(found.path), expected);
    if (!why.isEmpty()) {
      QStringList searched;
      for (const auto& s : found.searched) searched << QString::fromStdString(s);
      QVERIFY2(searched.join('|').contains(why), qPrintable(searched.join('|')));
    }
    // Hugging Face's own lookup (the environment's cache, offline) agrees.
    const QString query = id + "@" + revision;
    QVERIFY2(reference_.count(query), "hf_cache_lookup.py gave no answer");
    QCOMPARE(reference_.at(query)["hub"].toString(), expected);
    QCOMPARE(reference_.at(query)["transformers"].toString(), expected);
  }

  // validate (and so the wizard and estimate, which read the model it found) with a hub id: the
  // model is read from the snapshot; the config's cache_dir is searched first; model_revision
  // picks the snapshot; what is not there is an error at train time naming the id, the revision
  // and each place looked at, and a warning in `validate` (the cluster may have it).
  // refs/main (or the revision asked for) as a damaged or hostile cache may hold it: each is a
  // reason naming the ref, returned at once; the lookup neither blocks on a FIFO, nor reads
  // /dev/zero for ever, nor follows a path out of the repo's snapshots.
  void damagedRefs_data() {
    QTest::addColumn<QString>("kind");        // how refs/main is made (makeHostileFile)
    QTest::addColumn<QByteArray>("content");  // the link's target or the file's bytes; $CACHE
    QTest::addColumn<QString>("revision");    // asked for
    QTest::addColumn<bool>("found");          // the snapshot of hash('1')
    QTest::addColumn<QString>("why");         // in `searched` (with "REF: " for refs/main)
    const QByteArray good = "../../models--Org--Good/snapshots/" + hash('1').toLatin1();
    QTest::newRow("a link to /dev/zero")
        << "link" << QByteArray("/dev/zero") << "main" << false
        << "a character device (a link to /dev/zero), not a regular file; a ref holds the "
           "commit hash of a snapshot: delete it and fetch";
    QTest::newRow("a FIFO") << "fifo" << QByteArray() << "main" << false
                            << "a FIFO (named pipe), not a regular file";
    QTest::newRow("a folder") << "folder" << QByteArray() << "main" << false
                              << "a folder, not a regular file";
    QTest::newRow("a megabyte") << "file" << QByteArray(1 << 20, 'a') << "main" << false
                                << "1048576 bytes, more than the 4096";
    QTest::newRow("a gigabyte (sparse: refused unread)")
        << "sparse" << QByteArray("1073741824") << "main" << false
        << "1073741824 bytes, more than the 4096";
    QTest::newRow("an absolute path")
        << "file"
        << "$CACHE/models--Org--Good/snapshots/" + hash('1').toLatin1() << "main" << false
        << "an absolute path, not a revision";
    QTest::newRow("a path with ..")
        << "file" << good << "main" << false << "a path with '..' in it, not a revision";
    QTest::newRow("../..") << "file" << QByteArray("../..") << "main" << false
                           << "holds '../..', a path with '..' in it, not a revision";
    QTest::newRow("two lines") << "file" << (hash('1') + "\n" + hash('2')).toLatin1() << "main"
                               << false << "with a line break or another control character in it";
    QTest::newRow("a NUL byte") << "file" << hash('1').toLatin1() + QByteArray(1, '\0') + "x"
                                << "main" << false
                                << "\\x00x', with a line break or another control character";
    QTest::newRow("empty") << "file" << QByteArray() << "main" << false
                           << "holds nothing, not a revision";
    QTest::newRow("a trailing newline (echo writes one)") << "file" << hash('1').toLatin1() + "\n"
                                                          << "main" << true << "";
    QTest::newRow("a link to a ref file")
        << "link" << QByteArray("../../models--Org--Good/refs/main") << "main" << true << "";
    QTest::newRow("a revision that is a path")
        << "file" << hash('1').toLatin1() << "../../models--Org--Good/refs/main" << false
        << "revision '../../models--Org--Good/refs/main', a path with '..' in it: not a branch, "
           "tag or commit hash";
  }
  void damagedRefs() {
    QFETCH(QString, kind);
    QFETCH(QByteArray, content);
    QFETCH(QString, revision);
    QFETCH(bool, found);
    QFETCH(QString, why);
    const QString cache = tmp_.filePath("damaged");
    content.replace("$CACHE", cache.toUtf8());
    const QString id = "Damaged/" + QString::fromLatin1(QTest::currentDataTag())
                                        .replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    addRepo(cache, id, {}, {{hash('1'), {"config.json"}}});
    if (!QFileInfo::exists(cache + "/models--Org--Good"))
      addRepo(cache, "Org/Good", {{"main", hash('1')}}, {{hash('1'), {"config.json"}}});
    const QString repo = cache + "/models--" + QString(id).replace("/", "--");
    const QString ref = repo + "/refs/main";
    QVERIFY(makeHostileFile(ref, kind, content));

    const EnvScope scope({{"HOME", tmp_.filePath("home")}, {"HF_HUB_CACHE", cache}});
    using namespace std::chrono_literals;
    const HubLookup lookup = within(5s, "the hub cache lookup", [&] {
      return find_in_hub_cache(id.toStdString(), revision.toStdString());
    });
    QCOMPARE(QString::fromStdString(lookup.path),
             found ? repo + "/snapshots/" + hash('1') : QString());
    if (found) return;
    QStringList searched;
    for (const auto& s : lookup.searched) searched << QString::fromStdString(s);
    const QString said = searched.join('|');
    QVERIFY2(said.contains(why) && (revision != "main" || said.contains(ref + ": ")),
             qPrintable(said));
    // What validate says: the reason, and what to do.
    std::string error;
    const auto dir = within(5s, "resolve_model_dir", [&] {
      return resolve_model_dir(id.toStdString(), tmp_.path().toStdString(), revision.toStdString(),
                               {}, error);
    });
    QVERIFY(!dir);
    QVERIFY2(QString::fromStdString(error).contains(why) &&
                 QString::fromStdString(error).contains("huggingface-cli download " + id),
             error.c_str());
  }

  void validateAndEngineSee() {
    const EnvScope scope({{"HOME", tmp_.filePath("home")}, {"HF_HUB_CACHE", cache_}});
    const std::string base = "dataset: demo_sft\ndataset_dir: " STUDIO_SOURCE_DIR
                             "/resources/demo/data\ntemplate: qwen\noutput_dir: " +
                             tmp_.filePath("out").toStdString() + "\n";
    ValidateOptions training;
    training.for_training = true;
    training.base_dir = tmp_.path().toStdString();
    auto check = [&](const std::string& yaml, const ValidateOptions& opt) {
      LoadResult loaded = load_config_string(yaml, "hub.yaml");
      std::optional<ModelInfo> model;
      auto diags = validate_config(loaded.config, opt, &model);
      QStringList model_diags;
      for (const Diagnostic& d : diags)
        if (d.key == "model_name_or_path" || d.key == "ref_model" || d.key == "model_revision" ||
            d.key == "cache_dir")
          model_diags << QString::fromStdString(d.format());
      return std::make_tuple(loaded.config, model, model_diags);
    };

    auto [cfg, model, diags] = check("model_name_or_path: Org/Tiny-Chat\n" + base, training);
    QVERIFY2(diags.isEmpty(), qPrintable(diags.join('\n')));
    QVERIFY(model.has_value());
    QCOMPARE(model->architecture, std::string("Qwen2ForCausalLM"));
    resolve_hub_models(cfg);
    QCOMPARE(QString::fromStdString(cfg.model_name_or_path),
             cache_ + "/models--Org--Tiny-Chat/snapshots/" + hash('a'));

    // model_revision: the branch's snapshot; cache_dir: searched first.
    std::tie(cfg, model, diags) =
        check("model_name_or_path: Org/Tiny-Chat\nmodel_revision: v2\n" + base, training);
    QVERIFY2(diags.isEmpty(), qPrintable(diags.join('\n')));
    resolve_hub_models(cfg);
    QVERIFY(QString::fromStdString(cfg.model_name_or_path).endsWith(hash('b')));
    std::tie(cfg, model, diags) = check(
        "model_name_or_path: Org/Tiny-Chat\ncache_dir: " + other_.toStdString() + "\n" + base,
        training);
    QVERIFY2(diags.isEmpty(), qPrintable(diags.join('\n')));
    resolve_hub_models(cfg);
    QCOMPARE(QString::fromStdString(cfg.model_name_or_path),
             other_ + "/models--Org--Tiny-Chat/snapshots/" + hash('f'));
    // And huggingface_hub, given that cache_dir, finds the same.
    const auto ref = reference(other_, {"Org/Tiny-Chat@main"});
    QCOMPARE(ref.at("Org/Tiny-Chat@main")["hub"].toString(),
             QString::fromStdString(cfg.model_name_or_path));

    // A local folder of the same relative name wins, as transformers does.
    QVERIFY(QDir().mkpath(tmp_.filePath("Org")));
    QVERIFY(QFile::link(kDemoModel, tmp_.filePath("Org/Tiny-Chat")));
    std::tie(cfg, model, diags) = check("model_name_or_path: Org/Tiny-Chat\n" + base, training);
    QVERIFY2(diags.isEmpty(), qPrintable(diags.join('\n')));
    QVERIFY(QFile::remove(tmp_.filePath("Org/Tiny-Chat")));

    // Not there: located at the key, with the id, the revision and the places looked at.
    std::tie(cfg, model, diags) =
        check("model_name_or_path: Org/Tiny-Chat\nmodel_revision: v9\n" + base, training);
    QCOMPARE(diags.size(), 1);
    QVERIFY2(diags[0].startsWith("hub.yaml:1:21: model_name_or_path: 'Org/Tiny-Chat' is no folder "
                                 "here") &&
                 diags[0].contains("not in the local Hugging Face cache at revision v9") &&
                 diags[0].contains(cache_ + "/models--Org--Tiny-Chat/refs/v9: no such revision") &&
                 diags[0].contains("huggingface-cli download Org/Tiny-Chat"),
             qPrintable(diags[0]));
    ValidateOptions validateOnly = training;
    validateOnly.for_training = false;
    const LoadResult loaded =
        load_config_string("model_name_or_path: Org/Missing\n" + base, "hub.yaml");
    bool warned = false;
    for (const Diagnostic& d : validate_config(loaded.config, validateOnly))
      if (d.key == "model_name_or_path") warned = d.severity == Severity::Warning;
    QVERIFY(warned);
    // A DPO reference model by hub id too.
    std::tie(cfg, model, diags) = check(
        "model_name_or_path: Org/Tiny-Chat\nstage: dpo\nref_model: single\n" + base, training);
    QVERIFY2(diags.isEmpty(), qPrintable(diags.join('\n')));
    resolve_hub_models(cfg);
    QVERIFY(QString::fromStdString(*cfg.ref_model).endsWith("models--single/snapshots/" + hash('e')));
  }
};

QTEST_MAIN(TestHubCache)
#include "tst_hub_cache.moc"
