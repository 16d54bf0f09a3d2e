#include "studio/ui/wizard/data_page.h"

#include <climits>

#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QVBoxLayout>

#include "latest_job.h"
#include "studio/ui/base/local_path.h"
#include "studio/base/atomic_file.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/config/validate.h"
#include "studio/data/dataset_info.h"
#include "studio/ui/wizard/dataset_registration.h"
#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/length_histogram.h"
#include "studio/ui/wizard/run_draft.h"
#include "studio/ui/wizard/sample_preview.h"

namespace studio::ui {
namespace {

constexpr qint64 kHeadBytes = 1 << 20;  // enough for the first row of any sane data file

QString tr(const char* text) {
  return QCoreApplication::translate("studio::ui::DataPage", text);
}

void readRegistration(DatasetListing& l) {
  QFile file(l.path);
  const QByteArray head = file.open(QIODevice::ReadOnly) ? file.read(kHeadBytes) : QByteArray();
  const DatasetRegistration reg = datasetRegistration(l.path, head);
  const QString folder = QFileInfo(l.path).absolutePath();
  l.registration = QStringLiteral("{\n  %1\n}\n").arg(reg.entry);
  l.registrationNote =
      tr("%1 is a data file. studio-train reads datasets only through dataset_info.json, and the "
         "wizard writes nothing into your data folder: add this entry to %2/dataset_info.json "
         "(create the file with it if there is none), then choose the folder %2 above and check "
         "the dataset '%3'. %4")
          .arg(QFileInfo(l.path).fileName(), folder, reg.name, reg.guess);
}

}  // namespace

DatasetListing listV1Datasets(const QString& value, const QString& baseDir, const QString& key) {
  DatasetListing l;
  l.path = key;
  if (value.isEmpty()) {
    l.error = tr("choose a dataset YAML (name: {path, source: local, converter, ...}) or a data "
                 "file in LLaMA-Factory v1's messages format");
    return l;
  }
  const studio::V1DatasetList list =
      studio::read_v1_datasets(value.toStdString(), localPath(baseDir), /*for_training=*/false);
  l.error = QString::fromStdString(list.error);
  for (const auto& d : list.problems)
    if (d.severity == studio::Severity::Error)
      l.problems << QStringLiteral("%1:%2: %3")
                      .arg(QString::fromStdString(d.file))
                      .arg(d.line)
                      .arg(QString::fromStdString(d.message));
  for (const auto& e : list.entries) {
    DatasetListing::Entry entry;
    entry.name = QString::fromStdString(e.name);
    QStringList what{QString::fromStdString(e.path)};
    if (e.source != "local") what << QString::fromStdString(e.source);
    what << (e.converter.empty() ? tr("messages") : QString::fromStdString(e.converter));
    if (e.size) what << tr("%1 rows").arg(*e.size);
    entry.file = what.join(QStringLiteral(", "));
    entry.ranking = e.converter == "pair";
    l.entries.push_back(entry);
  }
  return l;
}

DatasetListing listDatasets(const QString& path) {
  DatasetListing l;
  l.path = path;
  const QFileInfo info(path);
  if (path.isEmpty()) {
    l.error = tr("choose the folder that holds dataset_info.json");
  } else if (info.isFile()) {
    l.isFile = true;
    readRegistration(l);
  } else if (!info.isDir()) {
    l.error = tr("no such folder: %1").arg(path);
  } else {
    try {
      const auto datasets = studio::data::DatasetInfo::read(localPath(path));
      for (const std::string& name : datasets.names()) {
        DatasetListing::Entry e;
        e.name = QString::fromStdString(name);
        try {
          const studio::data::DatasetAttr attr = datasets.find(name);
          e.file = QString::fromStdString(attr.file_name);
          e.ranking = attr.ranking;
        } catch (const studio::data::DatasetError& error) {
          e.problem = QString::fromStdString(error.what());
        }
        l.entries.push_back(e);
      }
    } catch (const studio::data::DatasetError& error) {
      l.error = QString::fromStdString(error.what());
    }
  }
  return l;
}

DataPage::DataPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft,
                 {QStringLiteral("dataset"), QStringLiteral("dataset_dir"),
                  QStringLiteral("eval_dataset"), QStringLiteral("template"),
                  QStringLiteral("cutoff_len"), QStringLiteral("max_samples"),
                  QStringLiteral("val_size"), QStringLiteral("train_on_prompt"),
                  QStringLiteral("mask_history")},
                 parent),
      dir_(bindings()->text("dataset_dir", &studio::RunConfig::dataset_dir)),
      v1Dataset_(new QLineEdit),
      datasets_(new QStandardItemModel(this)),
      datasetView_(new QListView),
      registration_(new QPlainTextEdit),
      registrationNote_(new QLabel),
      preview_(new SamplePreview),
      histogram_(new LengthHistogram),
      truncation_(new QLabel),
      listingJob_(std::make_unique<LatestJob<DatasetListing>>(
          this, [this](const DatasetListing& l) { showListing(l); })),
      previewJob_(std::make_unique<LatestJob<PreviewOutcome>>(
          this, [this](const PreviewOutcome& o) { showPreview(o); })) {
  setTitle(tr("Data"));
  setSubTitle(tr("Datasets from a dataset_info.json folder, the chat template, and what training "
                 "will see."));
  datasetView_->setObjectName(QStringLiteral("datasets"));
  datasetView_->setAccessibleName(tr("Datasets"));
  datasetView_->setModel(datasets_);
  datasetView_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  registration_->setObjectName(QStringLiteral("registration"));
  registration_->setReadOnly(true);
  registration_->setMaximumHeight(registration_->fontMetrics().height() * 5);
  registrationNote_->setWordWrap(true);
  registration_->hide();
  registrationNote_->hide();
  truncation_->setObjectName(QStringLiteral("truncation"));

  auto* middle = new QHBoxLayout;
  middle->addWidget(datasetView_, 1);
  middle->addWidget(buildSettings(), 1);
  auto* tabs = new QTabWidget;
  tabs->addTab(preview_, tr("&Samples"));
  tabs->addTab(histogram_, tr("&Lengths"));

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(dirRow_ = buildDirRow());
  layout->addWidget(v1Row_ = buildV1Row());
  layout->addWidget(registrationNote_);
  layout->addWidget(registration_);
  layout->addLayout(middle);
  layout->addWidget(messagesWidget());
  layout->addWidget(tabs, 1);
  layout->addWidget(truncation_);

  debounce_.setSingleShot(true);
  debounce_.setInterval(kDebounceMs);
  connect(&debounce_, &QTimer::timeout, this, &DataPage::startPreview);
  connect(draft, &RunDraft::changed, this, [this] {
    showForm();
    listIfNeeded();
    schedulePreview();
  });
  connect(draft, &RunDraft::loaded, this, [this] {
    showForm();
    rebuildDatasetList();
  });
  showForm();
  connect(datasets_, &QStandardItemModel::itemChanged, this, &DataPage::datasetToggled);
  listIfNeeded();
  schedulePreview();
  refresh();
}

DataPage::~DataPage() = default;

QWidget* DataPage::buildDirRow() {
  dir_->setPlaceholderText(tr("folder with dataset_info.json"));
  auto* folder = new QPushButton(tr("&Folder..."));
  auto* file = new QPushButton(tr("D&ata file..."));
  connect(folder, &QPushButton::clicked, this, &DataPage::browseFolder);
  connect(file, &QPushButton::clicked, this, &DataPage::browseFile);
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(tr("dataset_dir:")));
  layout->addWidget(dir_, 1);
  layout->addWidget(folder);
  layout->addWidget(file);
  return row;
}

QWidget* DataPage::buildV1Row() {
  v1Dataset_->setObjectName(QStringLiteral("train_dataset"));
  v1Dataset_->setAccessibleName(tr("train_dataset"));
  v1Dataset_->setPlaceholderText(tr("a dataset YAML, or a data file or folder (v1 messages)"));
  connect(v1Dataset_, &QLineEdit::textEdited, this, [this](const QString& text) {
    draft()->edit([&](studio::RunConfig& c) { c.v1.train_dataset = text.toStdString(); });
  });
  auto* browse = new QPushButton(tr("Dataset &YAML..."));
  connect(browse, &QPushButton::clicked, this, &DataPage::browseV1);
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* label = new QLabel(tr("train_dataset:"));
  label->setBuddy(v1Dataset_);
  layout->addWidget(label);
  layout->addWidget(v1Dataset_, 1);
  layout->addWidget(browse);
  return row;
}

bool DataPage::isV1() const { return draft()->config().is_v1(); }

void DataPage::showForm() {
  const bool v1 = isV1();
  dirRow_->setVisible(!v1);
  v1Row_->setVisible(v1);
  const QString value = QString::fromStdString(draft()->config().v1.train_dataset);
  if (v1Dataset_->text() != value) v1Dataset_->setText(value);
  setSubTitle(v1 ? tr("LLaMA-Factory v1: train_dataset (a dataset YAML or a data file), the chat "
                      "template, and what training will see. Relative paths are the config "
                      "folder's; a launched run gets them made absolute.")
                 : tr("Datasets from a dataset_info.json folder, the chat template, and what "
                      "training will see."));
}

void DataPage::browseV1() {
  const QString file = QFileDialog::getOpenFileName(
      this, tr("Dataset YAML or data file"),
      draft()->resolve(draft()->config().v1.train_dataset),
      tr("Dataset YAML or data (*.yaml *.yml *.json *.jsonl);;All files (*)"));
  if (file.isEmpty()) return;
  v1Dataset_->setText(file);
  draft()->edit([&](studio::RunConfig& c) { c.v1.train_dataset = file.toStdString(); });
}

QWidget* DataPage::buildSettings() {
  FieldBindings* b = bindings();
  auto* box = new QWidget;
  auto* form = new QFormLayout(box);
  form->setContentsMargins(0, 0, 0, 0);
  form->addRow(tr("template:"), b->textChoice("template", &studio::RunConfig::template_name,
                                              studio::known_templates()));
  form->addRow(tr("cutoff_len:"), b->integer("cutoff_len", &studio::RunConfig::cutoff_len, 0,
                                             INT_MAX));
  form->addRow(tr("max_samples:"), b->optionalInteger("max_samples",
                                                      &studio::RunConfig::max_samples, INT_MAX,
                                                      tr("all")));
  form->addRow(tr("val_size:"), b->real("val_size", &studio::RunConfig::val_size, 0, 1e9, 4));
  form->addRow(b->flag("train_on_prompt", &studio::RunConfig::train_on_prompt,
                       tr("train_on_prompt: also learn the prompt tokens")));
  form->addRow(b->flag("mask_history", &studio::RunConfig::mask_history,
                       tr("mask_history: learn only the last turn")));
  return box;
}

void DataPage::browseFolder() {
  const QString dir = QFileDialog::getExistingDirectory(
      this, tr("Folder with dataset_info.json"), draft()->resolve(draft()->config().dataset_dir));
  if (!dir.isEmpty()) dir_->setText(dir);
}

void DataPage::browseFile() {
  const QString file = QFileDialog::getOpenFileName(
      this, tr("Data file"), draft()->resolve(draft()->config().dataset_dir),
      tr("JSON data (*.json *.jsonl);;All files (*)"));
  if (!file.isEmpty()) dir_->setText(file);
}

void DataPage::listIfNeeded() {
  if (isV1()) {
    const QString value = QString::fromStdString(draft()->config().v1.train_dataset);
    const QString base = draft()->baseDir();
    const QString key = QStringLiteral("v1\n%1\n%2").arg(value, base);
    if (key == requestedListing_) return;
    requestedListing_ = key;
    listingJob_->request([value, base, key] { return listV1Datasets(value, base, key); });
    refresh();
    return;
  }
  const QString path = draft()->resolve(draft()->config().dataset_dir);
  if (path == requestedListing_) return;
  requestedListing_ = path;
  listingJob_->request([path] { return listDatasets(path); });
  refresh();
}

void DataPage::showListing(const DatasetListing& listing) {
  listing_ = listing;
  registration_->setPlainText(listing.registration);
  registrationNote_->setText(listing.registrationNote);
  registration_->setVisible(listing.isFile);
  registrationNote_->setVisible(listing.isFile);
  rebuildDatasetList();
  refresh();
}

// The configured names first, in their order (`dataset: a,b` trains a then b), then the other
// entries of dataset_info.json.
void DataPage::rebuildDatasetList() {
  rebuilding_ = true;
  datasets_->clear();
  const auto& chosen = draft()->config().dataset;
  auto add = [this](const QString& name, const QString& text, bool checked) {
    auto* item = new QStandardItem(text);
    item->setData(name, Qt::UserRole);
    item->setCheckable(true);
    item->setCheckState(checked ? Qt::Checked : Qt::Unchecked);
    datasets_->appendRow(item);
  };
  auto describeEntry = [this](const QString& name) -> QString {
    if (!listing_) return name;
    for (const auto& e : listing_->entries) {
      if (e.name != name) continue;
      if (!e.problem.isEmpty()) return tr("%1  (cannot be used)").arg(name);
      return e.ranking ? tr("%1  (%2, preference pairs)").arg(name, e.file)
                       : QStringLiteral("%1  (%2)").arg(name, e.file);
    }
    return tr("%1  (not in dataset_info.json)").arg(name);
  };
  if (isV1()) {  // the dataset YAML's entries, all of which train
    if (listing_)
      for (const auto& e : listing_->entries) {
        auto* item = new QStandardItem(e.ranking ? tr("%1  (%2, preference pairs)").arg(e.name, e.file)
                                                 : QStringLiteral("%1  (%2)").arg(e.name, e.file));
        item->setData(e.name, Qt::UserRole);
        datasets_->appendRow(item);
      }
    rebuilding_ = false;
    return;
  }
  QStringList names;
  for (const std::string& n : chosen) {
    const QString name = QString::fromStdString(n);
    if (names.contains(name)) continue;
    names << name;
    add(name, describeEntry(name), true);
  }
  if (listing_)
    for (const auto& e : listing_->entries)
      if (!names.contains(e.name)) add(e.name, describeEntry(e.name), false);
  rebuilding_ = false;
}

void DataPage::datasetToggled() {
  if (rebuilding_ || isV1()) return;
  std::vector<std::string> names;
  for (int row = 0; row < datasets_->rowCount(); ++row) {
    const QStandardItem* item = datasets_->item(row);
    if (item->checkState() == Qt::Checked)
      names.push_back(item->data(Qt::UserRole).toString().toStdString());
  }
  draft()->edit([&](studio::RunConfig& c) { c.dataset = names; });
}

// Everything data::preview reads; an empty string when a preview cannot be made yet.
QString DataPage::previewInputs() const {
  const studio::RunConfig& c = draft()->config();
  if (c.is_v1()) {  // v1 may leave the template to the model (resolve_llamafactory_v1)
    if (c.model_name_or_path.empty() || c.v1.train_dataset.empty() || c.cutoff_len < 1) return {};
  } else if (c.model_name_or_path.empty() || c.dataset.empty() || c.template_name.empty() ||
             c.cutoff_len < 1) {
    return {};
  }
  auto join = [](const std::vector<std::string>& names) {
    QStringList out;
    for (const auto& n : names) out << QString::fromStdString(n);
    return out.join(QLatin1Char(','));
  };
  QStringList parts{draft()->modelDir(c.model_name_or_path), draft()->resolve(c.dataset_dir),
                    QString::fromStdString(c.v1.train_dataset), draft()->baseDir(),
                    join(c.dataset), join(c.eval_dataset),
                    QString::fromStdString(c.template_name), QString::number(c.cutoff_len),
                    c.max_samples ? QString::number(*c.max_samples) : QString(),
                    QString::number(c.val_size, 'g', 17), QString::number(c.seed),
                    QString::number(c.train_on_prompt), QString::number(c.mask_history),
                    QString::fromUtf8(studio::to_string(c.stage).data())};
  // Keys the engine does not know may still steer the data (enable_thinking).
  for (const auto& x : c.extra_keys)
    parts << QString::fromStdString(x.key + ": " + x.value.text);
  return parts.join(QLatin1Char('\n'));
}

void DataPage::schedulePreview() {
  const QString inputs = previewInputs();
  if (inputs == requestedPreview_) return;
  requestedPreview_ = inputs;
  if (!inputs.isEmpty()) {
    debounce_.start();
    return;
  }
  debounce_.stop();
  previewError_.clear();
  preview_->setNotice(tr("The samples appear here once a model (for its tokenizer), a template "
                         "and at least one dataset are chosen."));
  histogram_->clearHistogram();
  truncation_->clear();
  refresh();
}

void DataPage::startPreview() {
  studio::RunConfig cfg = draft()->config();
  cfg.model_name_or_path = localPath(draft()->modelDir(cfg.model_name_or_path));
  cfg.dataset_dir = localPath(draft()->resolve(cfg.dataset_dir));
  const QString modelPath = QString::fromStdString(cfg.model_name_or_path);
  const std::optional<studio::data::Tokenizer> cached =
      modelPath == tokenizerPath_ ? tokenizer_ : std::nullopt;
  const std::string base = localPath(draft()->baseDir());
  previewJob_->request([cfg, modelPath, cached, base]() mutable {
    PreviewOutcome out;
    try {
      // v1: the data paths are the config folder's, not this process's working directory: the
      // dataset YAML is read through a copy whose paths are absolute; the template is the one
      // a run would choose.
      QTemporaryDir relocated;
      if (cfg.is_v1()) {
        studio::relocate_v1_datasets(
            cfg, base, [](const std::string& p) { return p; },
            [&relocated](const std::string& name, const std::string& text) {
              const std::string path = localPath(relocated.filePath(QString::fromStdString(name)));
              if (const std::string e = studio::write_file_atomic(path, text); !e.empty())
                throw std::invalid_argument(e);
              return path;
            });
        studio::ValidateOptions vo;
        vo.base_dir = base;
        studio::resolve_llamafactory_v1(cfg, vo);
      }
      out.tokenizer = cached ? *cached : studio::data::Tokenizer::load(cfg.model_name_or_path);
      out.tokenizerPath = modelPath;
      // No cache: a preview per keystroke must neither write into the data folder nor replace
      // the cache a training run made with other settings.
      studio::data::DatasetOptions opt;
      opt.use_cache = false;
      out.report = studio::data::preview(cfg, *out.tokenizer, kPreviewSamples, opt);
    } catch (const std::exception& e) {
      out.error = QString::fromStdString(e.what());
    }
    return out;
  });
}

void DataPage::showPreview(const PreviewOutcome& outcome) {
  if (outcome.tokenizer) {
    tokenizerPath_ = outcome.tokenizerPath;
    tokenizer_ = outcome.tokenizer;
  }
  previewError_ = outcome.error;
  if (outcome.report) {
    const auto& stats = outcome.report->stats;
    preview_->setReport(*outcome.report);
    histogram_->setHistogram(stats.lengths);
    truncation_->setText(tr("%1 of %2 samples will be truncated to cutoff_len %3.")
                             .arg(stats.truncated)
                             .arg(stats.samples)
                             .arg(outcome.report->cutoff_len));
  } else {
    preview_->setNotice(tr("No preview: %1").arg(outcome.error));
    histogram_->clearHistogram();
    truncation_->clear();
  }
  refresh();
  emit previewShown();
}

QString DataPage::truncationText() const {
  return truncation_->text();
}

QString DataPage::registrationText() const {
  return registration_->toPlainText();
}

bool DataPage::isBusy() const {
  return listingJob_->busy() || previewJob_->busy() || debounce_.isActive();
}

std::vector<InlineMessage> DataPage::pageMessages() const {
  std::vector<InlineMessage> out;
  if (isV1() && listing_ && listing_->path == requestedListing_) {
    if (!listing_->error.isEmpty())
      out.push_back({studio::Severity::Error, tr("train_dataset: %1").arg(listing_->error)});
    for (const QString& p : listing_->problems)
      out.push_back({studio::Severity::Error, tr("train_dataset: %1").arg(p)});
  } else if (listing_ && listing_->path == requestedListing_) {
    if (!listing_->error.isEmpty())
      out.push_back({studio::Severity::Error, tr("dataset_dir: %1").arg(listing_->error)});
    if (listing_->isFile)
      out.push_back({studio::Severity::Error,
                     tr("dataset_dir: a data file, not a folder: register it in a "
                        "dataset_info.json as shown above")});
    for (const auto& e : listing_->entries)
      if (!e.problem.isEmpty() &&
          draft()->config().dataset.end() != std::find(draft()->config().dataset.begin(),
                                                       draft()->config().dataset.end(),
                                                       e.name.toStdString()))
        out.push_back({studio::Severity::Error, tr("dataset: %1").arg(e.problem)});
  }
  if (!previewError_.isEmpty() && !requestedPreview_.isEmpty())
    out.push_back({studio::Severity::Error, tr("preview: %1").arg(previewError_)});
  return out;
}

bool DataPage::pageReady() const {
  return !listingJob_->busy() && listing_ && listing_->path == requestedListing_;
}

}  // namespace studio::ui
