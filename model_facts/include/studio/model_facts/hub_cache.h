#pragma once
// Models named by a Hugging Face hub id (`model_name_or_path: Qwen/Qwen2-1.5B-Instruct`, the norm
// in LLaMA-Factory's examples) found offline in the local Hugging Face cache, the way
// transformers and huggingface_hub find them with HF_HUB_OFFLINE=1: nothing is downloaded.
//
// Cache layout (huggingface_hub): CACHE/models--ORG--NAME/refs/REVISION holds a commit hash;
// CACHE/models--ORG--NAME/snapshots/HASH/ is the model folder (its files usually symbolic links
// into ../../blobs/). A revision that is a commit hash names its snapshot directly.
#include <optional>
#include <string>
#include <vector>

namespace studio {

// "ORG/NAME" or "NAME" as a hub id: not absolute, not starting with '.' or '~', at most one
// '/', each part of [A-Za-z0-9._-] and not "." or "..". A local folder of that relative name is
// still preferred by the resolver (as transformers does).
bool looks_like_hub_id(const std::string& text);

// The cache folders searched, in order: `cache_dir` (LLaMA-Factory's key, passed to
// from_pretrained) when given; then the one huggingface_hub uses: HF_HUB_CACHE, else
// HUGGINGFACE_HUB_CACHE (its older name), else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub; then TRANSFORMERS_CACHE (older transformers) when set.
// Duplicates are dropped.
std::vector<std::string> hub_cache_dirs(const std::string& cache_dir = {});

// Why `text` cannot be a revision, as a message completes it ("'/etc', an absolute path"): a
// revision (a commit hash, or a branch or tag name such as main or refs/pr/1) names a place under
// refs/ and snapshots/, so it is not empty, not absolute, has no empty, '.' or '..' part and no
// control character. "" when it can be one.
std::string revision_problem(const std::string& text);

struct HubLookup {
  std::string path;                   // the snapshot folder; "" when not found
  std::string cache;                  // the cache it was found in
  std::string commit;                 // the snapshot's commit hash
  std::vector<std::string> searched;  // "what was looked at: why not" per place, for messages
};

// Finds `id` at `revision` ("main" when empty: a branch or tag name under refs/, or a commit
// hash) in hub_cache_dirs(cache_dir). A snapshot counts only when it holds config.json. A ref is
// read only when it is a small regular file, and what it holds only followed when it is a
// revision (revision_problem): a ref that is a link to /dev/zero, a FIFO, or that holds a path,
// is a reason in `searched`, as is an id or revision that could lead out of the cache.
HubLookup find_in_hub_cache(const std::string& id, const std::string& revision,
                            const std::string& cache_dir = {});

// The folder a model path names: `value` itself (relative to base_dir when not absolute) when
// that exists; else, for a hub id, its snapshot in the local cache. nullopt when neither, with
// `error` saying what was looked for where and what to do.
std::optional<std::string> resolve_model_dir(const std::string& value, const std::string& base_dir,
                                             const std::string& revision,
                                             const std::string& cache_dir, std::string& error);

}  // namespace studio
