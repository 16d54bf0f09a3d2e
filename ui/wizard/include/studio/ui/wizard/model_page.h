#pragma once
// Page 1: the model. A local Hugging Face folder (or the built-in demo model); what its
// config.json says (architecture, parameters, layers, heads, kv heads, vocabulary, positions)
// arrives with the draft's validation, read off the GUI thread. Next needs a readable config.json
// of a supported architecture.
#include <QString>

#include "studio/ui/wizard/wizard_page.h"

class QLabel;
class QLineEdit;
class QPushButton;

namespace studio::ui {

class ModelPage : public WizardPage {
  Q_OBJECT

 public:
  explicit ModelPage(RunDraft* draft, QWidget* parent = nullptr);

  // The folder "Built-in demo model" chooses; the button is hidden while it is empty.
  void setDemoModelDir(const QString& dir);
  QString demoModelDir() const { return demoDir_; }

  QLineEdit* pathEdit() const { return path_; }
  QPushButton* demoButton() const { return demo_; }
  // The facts shown, by name: "architecture", "parameters", "layers", "heads", "kv_heads",
  // "vocabulary", "max_positions"; empty while no model was read.
  QString fact(const QString& name) const;
  // The line under the facts (hidden size, head dim, dtype, and where a hub id was found).
  QString summaryText() const;

 protected:
  std::vector<InlineMessage> pageMessages() const override;
  bool pageReady() const override;

 private:
  void browse();
  void showModel();

  QLineEdit* path_;
  QPushButton* demo_;
  QLabel* summary_;
  QWidget* facts_;
  QString demoDir_;
};

}  // namespace studio::ui
