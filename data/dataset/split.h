#pragma once
// val_size: the held-out part of the training samples (stage pt: of its blocks, as LLaMA-Factory
// splits after preprocessing), picked by a seeded shuffle; both parts keep their order.
#include <vector>

#include "studio/config/run_config.h"

namespace studio::data::detail {

// Throws DatasetError for val_size with eval_dataset, or a negative val_size: before loading.
void check_split_settings(const RunConfig& cfg);

// Moves val_size of `train` (a fraction rounds up, as HF's train_test_split; a value >= 1 is a
// count) to the end of `eval`. Throws DatasetError when nothing would be left to train on.
template <class Sample>
void split_off_eval(const RunConfig& cfg, std::vector<Sample>& train, std::vector<Sample>& eval);

}  // namespace studio::data::detail
