#pragma once
// Page 2: the data. dataset_dir (a folder with dataset_info.json; a single data file gets the
// entry it needs shown, since the wizard writes nothing into data folders), the datasets to
// train on as a checkable list, the chat template, cutoff_len, max_samples, val_size and the
// masking flags. Below, the first samples as training renders them on the model's tokenizer
// (masked spans grey) and the length histogram against cutoff_len with "N of M samples will be
// truncated". Reading dataset_info.json and tokenizing the preview run off the GUI thread; a
// result whose inputs changed meanwhile is dropped.
#include <memory>
#include <optional>
#include <vector>

#include <QString>
#include <QTimer>

#include "studio/data/preview.h"
#include "studio/data/tokenizer.h"
#include "studio/ui/wizard/wizard_page.h"

class QLabel;
class QLineEdit;
class QListView;
class QPlainTextEdit;
class QStandardItemModel;

namespace studio::ui {

class LengthHistogram;
class SamplePreview;
template <class Result>
class LatestJob;

// dataset_info.json of a folder, as the list shows it.
struct DatasetListing {
  struct Entry {
    QString name;
    QString file;         // file_name as written
    bool ranking = false;  // preference pairs
    QString problem;      // an entry that cannot be used, and why
  };
  QString path;           // the resolved dataset_dir
  std::vector<Entry> entries;
  QString error;          // the folder or its dataset_info.json could not be read
  bool isFile = false;    // dataset_dir names a data file
  QString registration;   // for a data file: what to put into a dataset_info.json
  QString registrationNote;
  QStringList problems;   // LLaMA-Factory v1: the dataset YAML's problems, "file:line: what"
};
// Reads it (blocking: call it off the GUI thread).
DatasetListing listDatasets(const QString& path);
// A LLaMA-Factory v1 config's train_dataset (a dataset YAML, or a data file or folder), its
// relative paths resolved against `baseDir`, as the list shows it (blocking). `key` becomes
// the listing's path.
DatasetListing listV1Datasets(const QString& value, const QString& baseDir, const QString& key);

struct PreviewOutcome {
  std::optional<studio::data::PreviewReport> report;
  QString error;
  QString tokenizerPath;                        // the tokenizer used, kept for the next preview
  std::optional<studio::data::Tokenizer> tokenizer;
};

class DataPage : public WizardPage {
  Q_OBJECT

 public:
  static constexpr int kPreviewSamples = 3;
  static constexpr int kDebounceMs = 250;

  explicit DataPage(RunDraft* draft, QWidget* parent = nullptr);
  ~DataPage() override;

  QLineEdit* datasetDirEdit() const { return dir_; }
  // LLaMA-Factory v1 configs: train_dataset, shown instead of dataset_dir and the dataset list's
  // check boxes (the list then shows the dataset YAML's entries).
  QLineEdit* trainDatasetEdit() const { return v1Dataset_; }
  // Checkable dataset names (Qt::UserRole: the name; DisplayRole adds the file and kind).
  QStandardItemModel* datasetModel() const { return datasets_; }
  QListView* datasetView() const { return datasetView_; }
  SamplePreview* preview() const { return preview_; }
  LengthHistogram* histogram() const { return histogram_; }
  QString truncationText() const;
  QString registrationText() const;
  // True while the listing or the preview of the current inputs is still being computed.
  bool isBusy() const;

 signals:
  void previewShown();  // a preview (or its error) of the current inputs is on screen

 protected:
  std::vector<InlineMessage> pageMessages() const override;
  bool pageReady() const override;

 private:
  QWidget* buildDirRow();
  QWidget* buildV1Row();
  bool isV1() const;
  void showForm();  // the v0 or the v1 rows, as the draft's form says
  void browseV1();
  QWidget* buildSettings();
  void browseFolder();
  void browseFile();
  void listIfNeeded();
  void showListing(const DatasetListing& listing);
  void rebuildDatasetList();
  void datasetToggled();
  void schedulePreview();
  void startPreview();
  void showPreview(const PreviewOutcome& outcome);
  QString previewInputs() const;

  QLineEdit* dir_;
  QLineEdit* v1Dataset_;
  QWidget* dirRow_ = nullptr;
  QWidget* v1Row_ = nullptr;
  QStandardItemModel* datasets_;
  QListView* datasetView_;
  QPlainTextEdit* registration_;
  QLabel* registrationNote_;
  SamplePreview* preview_;
  LengthHistogram* histogram_;
  QLabel* truncation_;
  QTimer debounce_;
  std::unique_ptr<LatestJob<DatasetListing>> listingJob_;
  std::unique_ptr<LatestJob<PreviewOutcome>> previewJob_;
  QString requestedListing_;
  bool rebuilding_ = false;  // the list is being filled from the draft, not toggled by the user
  std::optional<DatasetListing> listing_;
  QString requestedPreview_;  // the inputs of the newest preview request
  QString previewError_;
  QString tokenizerPath_;
  std::optional<studio::data::Tokenizer> tokenizer_;
};

}  // namespace studio::ui
