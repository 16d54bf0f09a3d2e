#include "studio/ui/wizard/sp_choice.h"

#include <algorithm>

#include <QCoreApplication>

#include "studio/config/memory_estimate.h"
#include "studio/config/validate.h"

namespace studio::ui {
namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("studio::ui::SpChoices", text);
}

QString headsReason(const studio::ModelInfo& m, int degree) {
  switch (studio::ulysses_heads(m, degree)) {
    case studio::UlyssesHeads::QueryHeadsIndivisible:
      return tr("%1 query heads are not divisible by %2").arg(m.num_heads).arg(degree);
    case studio::UlyssesHeads::KvHeadsUnsplittable:
      return tr("the %1 key/value heads can neither be split over nor replicated to %2 ranks")
          .arg(m.num_kv_heads)
          .arg(degree);
    case studio::UlyssesHeads::Ok:
      break;
  }
  return tr("no Ulysses x ring split of %1 fits the heads").arg(degree);
}

}  // namespace

SpChoices spChoices(const studio::RunConfig& config, const studio::ModelInfo* model,
                    int worldSize) {
  SpChoices out;
  const std::vector<int> all = studio::divisors(std::max(1, worldSize));
  out.valid = model ? studio::valid_sp_sizes(config, *model, worldSize) : all;
  for (int d : all)
    if (std::find(out.valid.begin(), out.valid.end(), d) == out.valid.end())
      out.excluded.push_back({d, headsReason(*model, d)});
  return out;
}

void setSpSize(studio::RunConfig& config, const studio::ModelInfo* model, int sp) {
  config.sequence_parallel_size = sp;
  if (config.sequence_parallel_mode != studio::SpMode::Usp) return;
  config.sequence_parallel_ulysses_degree =
      model ? studio::largest_ulysses_degree(*model, sp) : 1;
  config.sequence_parallel_ring_degree = sp / config.sequence_parallel_ulysses_degree;
}

}  // namespace studio::ui
