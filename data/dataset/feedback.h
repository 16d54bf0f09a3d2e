#pragma once
// Stage kto's examples, as LLaMA-Factory 0.9.5's FeedbackDatasetProcessor
// (data/processor/feedback.py) builds them from the rows of a list of datasets.
#include <vector>

#include "part.h"
#include "part_loader.h"
#include "studio/config/run_config.h"

namespace studio::data::detail {

// `datasets`: one list (`dataset`, or `eval_dataset`), each entry with its attr, files and
// max_samples and the shared encoder and options. Their rows are converted in order
// (convert_feedback_row) and concatenated; within each of LF's map batches (map_batches.h, from
// cfg's preprocessing_batch_size and preprocessing_num_workers) every row's KL response is the
// response of the row before it, the batch's first row taking its last row's, all before LF
// drops invalid rows; then each kept row is encoded twice (encode_feedback): its prompt with its
// own response (the target) and with that KL response. One Part per dataset, in order; origins:
// the row, and the longer of the two sequences before truncation. Rows LF drops are counted in
// skipped_invalid with a warning; a row whose KL response would come from a dropped row that
// has none (LF 0.9.5 fails there with an IndexError) is a DatasetError, or with skip_bad_rows a
// skipped bad row. Rows skipped as bad (malformed, a wrong type) are not rows of any batch.
std::vector<Part<FeedbackSample>> tokenize_feedback(const std::vector<PartSettings>& datasets,
                                                    const RunConfig& cfg);

// LF warns (per map batch) when the examples are all desirable or all undesirable: KTO then
// learns from one of its two terms only. The warning for a whole set ("training", "eval") of
// `samples` examples, `desirable` of them desirable; empty when it holds both kinds or none.
std::string one_kind_warning(const std::string& set, int64_t samples, int64_t desirable);

}  // namespace studio::data::detail
