#include "studio/ui/wizard/model_page.h"

#include <algorithm>

#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "studio/model_facts/model_info.h"
#include "studio/config/validate.h"
#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/run_draft.h"

namespace studio::ui {
namespace {

const char* const kFacts[][2] = {
    {"architecture", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Architecture:")},
    {"parameters", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Parameters:")},
    {"layers", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Layers:")},
    {"heads", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Attention heads:")},
    {"kv_heads", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Key/value heads:")},
    {"vocabulary", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Vocabulary:")},
    {"max_positions", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Max positions:")},
    {"trainable", QT_TRANSLATE_NOOP("studio::ui::ModelPage", "Trainable here:")},
};

// Whether studio-train trains this model, and how far its attention splits under SP.
QString trainableText(const studio::ModelInfo& m) {
  if (!studio::is_supported_architecture(m.architecture))
    return ModelPage::tr("No: architecture %1 is not supported (supported: %2)")
        .arg(QString::fromStdString(m.architecture),
             QString::fromStdString(studio::supported_architectures()));
  if (const std::string why = studio::decoder_support_error(m); !why.empty())
    return ModelPage::tr("No: %1").arg(QString::fromStdString(why));
  const int64_t ulysses = studio::largest_ulysses_degree(m, std::max<int64_t>(1, m.num_heads));
  QString text = ModelPage::tr("Yes: full-parameter SFT and DPO; sequence parallelism zigzag-ring "
                                "at any degree, Ulysses up to %1 ranks (%2 query, %3 key/value "
                                "heads)")
                     .arg(ulysses)
                     .arg(m.num_heads)
                     .arg(m.num_kv_heads);
  if (m.is_moe())
    text += ModelPage::tr("; mixture of experts: %1 of %2 layers route each token to %3 of %4 "
                          "experts, sharded with the other model states under ZeRO (no expert "
                          "parallelism); the auxiliary loss with moe_aux_loss_coef")
                .arg(m.moe_layer_count())
                .arg(m.num_layers)
                .arg(m.num_experts_per_tok)
                .arg(m.num_experts);
  return text;
}

QString number(int64_t n) {
  return QLocale().toString(static_cast<qlonglong>(n));
}

}  // namespace

ModelPage::ModelPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft, {QStringLiteral("model_name_or_path"), QStringLiteral("trust_remote_code")},
                 parent),
      path_(bindings()->text("model_name_or_path", &studio::RunConfig::model_name_or_path)),
      demo_(new QPushButton(tr("Built-in &demo model"))),
      summary_(new QLabel),
      facts_(new QWidget) {
  setTitle(tr("Model"));
  setSubTitle(tr("The Hugging Face model folder to train (config.json, tokenizer.json and "
                 "*.safetensors), or a hub id found in the local Hugging Face cache. What the "
                 "model is, and whether studio-train can train it, shows here first."));
  path_->setPlaceholderText(tr("/models/Qwen2.5-7B-Instruct"));
  auto* browse = new QPushButton(tr("B&rowse..."));
  demo_->setObjectName(QStringLiteral("demoModel"));
  demo_->hide();

  auto* row = new QHBoxLayout;
  row->addWidget(path_, 1);
  row->addWidget(browse);
  row->addWidget(demo_);

  auto* form = new QFormLayout(facts_);
  for (const auto& f : kFacts) {
    auto* value = new QLabel;
    value->setObjectName(QString::fromLatin1(f[0]));
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr(f[1]), value);
  }
  summary_->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(row);
  layout->addWidget(facts_);
  layout->addWidget(summary_);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);

  connect(browse, &QPushButton::clicked, this, &ModelPage::browse);
  connect(demo_, &QPushButton::clicked, this, [this] { path_->setText(demoDir_); });
  connect(draft, &RunDraft::validated, this, &ModelPage::showModel);
  showModel();
  refresh();
}

void ModelPage::setDemoModelDir(const QString& dir) {
  demoDir_ = dir;
  demo_->setVisible(!dir.isEmpty());
}

QString ModelPage::fact(const QString& name) const {
  auto* label = facts_->findChild<QLabel*>(name);
  return label ? label->text() : QString();
}

QString ModelPage::summaryText() const { return summary_->text(); }

void ModelPage::browse() {
  const QString start = draft()->modelDir(draft()->config().model_name_or_path);
  const QString dir = QFileDialog::getExistingDirectory(
      this, tr("Model folder"), start.isEmpty() ? draft()->baseDir() : start);
  if (!dir.isEmpty()) path_->setText(dir);
}

void ModelPage::showModel() {
  const auto& m = draft()->model();
  const QStringList values =
      m ? QStringList{QString::fromStdString(m->architecture),
                      QStringLiteral("%1 (%2)")
                          .arg(QString::fromStdString(studio::format_size(*m)),
                               number(m->parameter_count())),
                      number(m->num_layers), number(m->num_heads), number(m->num_kv_heads),
                      number(m->vocab_size), number(m->max_position_embeddings),
                      trainableText(*m)}
        : QStringList();
  int i = 0;
  for (const auto& f : kFacts)
    facts_->findChild<QLabel*>(QString::fromLatin1(f[0]))->setText(values.value(i++));
  facts_->setVisible(m.has_value());
  summary_->setText(m ? tr("Hidden size %1, head dim %2, %3 weights, model type %4.")
                            .arg(number(m->hidden_size), number(m->head_dim),
                                 m->torch_dtype.empty() ? tr("unspecified")
                                                        : QString::fromStdString(m->torch_dtype),
                                 QString::fromStdString(m->model_type)) +
                            (draft()->fromHubCache(draft()->config().model_name_or_path)
                                 ? tr(" From the local Hugging Face cache: %1 (revision %2).")
                                       .arg(QDir::toNativeSeparators(draft()->modelDir(
                                                draft()->config().model_name_or_path)),
                                            QString::fromStdString(
                                                draft()->config().model_revision))
                                 : QString())
                      : QString());
}

std::vector<InlineMessage> ModelPage::pageMessages() const {
  if (draft()->validating() || draft()->model()) return {};
  if (draft()->config().model_name_or_path.empty())
    return {{studio::Severity::Error,
             tr("model_name_or_path: choose a Hugging Face model folder (it holds config.json), or "
                "type a hub id found in the local Hugging Face cache")}};
  // Validation names the reason (no such folder, no config.json) among the key's diagnostics.
  return {{studio::Severity::Error,
           tr("model_name_or_path: the wizard needs the model's config.json to go on")}};
}

bool ModelPage::pageReady() const {
  return draft()->model().has_value();
}

}  // namespace studio::ui
