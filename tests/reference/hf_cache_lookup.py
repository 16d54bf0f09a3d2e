"""Where Hugging Face itself finds a model in the local cache, offline (the reference for
tests/config/tst_hub_cache.cpp).

usage: hf_cache_lookup.py CACHE_DIR REPO_ID@REVISION...
Prints one JSON object per query: the folder of the model's config.json as huggingface_hub
resolves it with no network (try_to_load_from_cache: refs/REVISION -> snapshots/HASH) and the
folder transformers loads it from (cached_file with local_files_only, as from_pretrained does);
"" when not found. CACHE_DIR "" means the environment's cache (HF_HUB_CACHE, HF_HOME, ...).
"""
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"

from huggingface_hub import try_to_load_from_cache  # noqa: E402


def lookup(cache, repo: str, revision: str) -> dict:
    found = try_to_load_from_cache(repo, "config.json", cache_dir=cache, revision=revision)
    hub = os.path.dirname(found) if isinstance(found, str) else ""
    try:
        from transformers.utils import cached_file

        path = cached_file(repo, "config.json", cache_dir=cache, revision=revision,
                           local_files_only=True)
        loaded = os.path.dirname(path) if path else ""
    except Exception:  # not in the cache: transformers raises
        loaded = ""
    return {"query": repo + "@" + revision, "hub": hub, "transformers": loaded}


def main() -> None:
    cache = sys.argv[1] or None
    for query in sys.argv[2:]:
        repo, _, revision = query.rpartition("@")
        print(json.dumps(lookup(cache, repo, revision)))


if __name__ == "__main__":
    main()
