// Stage kto: LLaMA-Factory's FeedbackDatasetProcessor over a list of datasets.
#include "feedback.h"

#include <algorithm>
#include <optional>

#include "converter.h"
#include "map_batches.h"
#include "parallel.h"

namespace studio::data::detail {
namespace {

// A converted row, kept (with its text) until every row of the list is read: a batch's first row
// takes its KL response from the batch's last row.
struct Row {
  std::size_t dataset = 0;  // index into the list
  int64_t row = 0;          // 1-based, across the dataset's files
  std::string where;        // "dataset 'NAME' (FILE:LINE): row N"
  Conversation conversation;
  std::string skip;  // LF's processor drops the row
};

struct Job {
  std::size_t dataset = 0;
  int64_t row = 0;
  bool desirable = false;
  Conversation target;  // the prompt with the row's own answer
  Conversation kl;      // the prompt with the KL answer
  EncodedSft target_enc;
  EncodedSft kl_enc;
};

// Reads one dataset's rows into `rows`, converting each batch on the worker threads.
void read_dataset(const PartSettings& s, std::size_t dataset, RowReader& reader,
                  std::vector<Row>& rows) {
  reader.read_all([&](std::vector<PendingRow>& batch) {
    std::vector<ConvertedFeedback> converted(batch.size());
    std::vector<std::string> errors(batch.size());
    parallel_for(batch.size(), s.workers, [&](std::size_t i) {
      try {
        converted[i] = convert_feedback_row(*s.attr, batch[i].row.value);
      } catch (const RowError& e) {
        errors[i] = e.what();
      }
    });
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!errors[i].empty()) {
        reader.bad_row(reader.where(batch[i]) + " " + errors[i]);
        continue;
      }
      rows.push_back({dataset, batch[i].row.index, reader.where(batch[i]),
                      std::move(converted[i].conversation), std::move(converted[i].skip_reason)});
    }
  });
}

// The message LF's _encode_data_example takes from a `_response` list: the first one when it
// has text, else the second. nullopt where LF's indexing fails (fewer messages than that).
std::optional<Message> pick(const std::vector<Message>& response) {
  if (!response.empty() && !response.front().content.empty()) return response.front();
  if (response.size() >= 2) return response[1];
  return std::nullopt;
}

Conversation with_answer(const Conversation& c, Message answer) {
  Conversation out;
  out.prompt = c.prompt;
  out.system = c.system;
  out.response = {std::move(answer)};
  return out;
}

void count(const TokenizedSample& s, DataStats& st, bool learned) {
  st.tokens += static_cast<int64_t>(s.input_ids.size());
  if (learned)
    for (int64_t l : s.labels) st.learned_tokens += l != kIgnoreIndex;
}

}  // namespace

std::vector<Part<FeedbackSample>> tokenize_feedback(const std::vector<PartSettings>& datasets,
                                                    const RunConfig& cfg) {
  std::vector<Part<FeedbackSample>> parts(datasets.size());
  if (datasets.empty()) return parts;
  std::vector<RowReader> readers;
  readers.reserve(datasets.size());
  std::vector<Row> rows;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    parts[d].stats.lengths = LengthHistogram::for_cutoff(datasets[d].encode.cutoff_len);
    readers.emplace_back(datasets[d], parts[d].stats);
    read_dataset(datasets[d], d, readers[d], rows);
  }

  // LF's preprocess_dataset, batch by batch: the KL responses first, then the drops.
  std::vector<Job> jobs;
  for (const RowRange& batch : map_batches(rows.size(), cfg)) {
    for (std::size_t i = batch.begin; i < batch.end; ++i) {
      const Row& r = rows[i];
      RowReader& reader = readers[r.dataset];
      if (!r.skip.empty()) {
        ++parts[r.dataset].stats.skipped_invalid;
        reader.warn(r.where + " skipped, as LLaMA-Factory does: " + r.skip);
        continue;
      }
      const Row& from = rows[i == batch.begin ? batch.end - 1 : i - 1];
      const std::optional<Message> kl = pick(from.conversation.response);
      if (!kl) {
        reader.bad_row(r.where +
                       " has no KL response: LLaMA-Factory takes it from the row "
                       "before it in its preprocessing batch (preprocessing_batch_size " +
                       std::to_string(cfg.preprocessing_batch_size) +
                       ", within each preprocessing_num_workers shard; a batch's first row "
                       "takes its last row's), here " +
                       from.where + ", which it drops (" + from.skip +
                       ") and which has no response to give: LLaMA-Factory 0.9.5 "
                       "stops there (IndexError in FeedbackDatasetProcessor)");
        continue;
      }
      const std::vector<Message>& own = r.conversation.response;
      Job job;
      job.dataset = r.dataset;
      job.row = r.row;
      job.desirable = !own.front().content.empty();  // LF: an empty answer reads as undesirable
      job.target = with_answer(r.conversation, job.desirable ? own.front() : own.at(1));
      job.kl = with_answer(r.conversation, *kl);
      jobs.push_back(std::move(job));
    }
  }
  rows.clear();

  const PartSettings& shared = datasets.front();
  parallel_for(jobs.size(), shared.workers, [&](std::size_t j) {
    Job& job = jobs[j];
    job.target_enc = shared.encoder->encode_feedback(job.target, shared.encode);
    job.kl_enc = shared.encoder->encode_feedback(job.kl, shared.encode);
    job.target = {};
    job.kl = {};
  });

  for (Job& job : jobs) {
    Part<FeedbackSample>& part = parts[job.dataset];
    DataStats& st = part.stats;
    const int64_t full_length = std::max(job.target_enc.full_length, job.kl_enc.full_length);
    ++st.samples;
    st.desirable += job.desirable;
    count(job.target_enc.sample, st, true);
    count(job.kl_enc.sample, st, false);
    st.truncated += full_length > shared.encode.cutoff_len;
    st.lengths.add(full_length);
    part.origins.push_back({job.row, full_length});
    part.samples.push_back(
        {std::move(job.target_enc.sample), std::move(job.kl_enc.sample), job.desirable});
  }
  return parts;
}

std::string one_kind_warning(const std::string& set, int64_t samples, int64_t desirable) {
  if (samples == 0 || (desirable > 0 && desirable < samples)) return {};
  return "the " + set + " set has only " + (desirable > 0 ? "desirable" : "undesirable") +
         " examples (kto_tag " + (desirable > 0 ? "true" : "false") +
         "): KTO learns from both kinds (LLaMA-Factory warns: \"Your dataset only has one "
         "preference type.\")";
}

}  // namespace studio::data::detail
