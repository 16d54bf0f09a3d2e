#pragma once
// The tokenized-data cache: one compact binary file per dataset and settings, written
// atomically. Input ids are stored as int32 and labels as one bit each ("learned" or
// kIgnoreIndex) plus the rare label that is neither (efficient_eos), about 4.1 bytes per token.
#include <string>

#include "part.h"

namespace studio::data::detail {

// False when the file is missing, was written for another key, or is damaged.
template <class Sample>
bool read_cache(const std::string& path, const std::string& key, Part<Sample>& out);

// Returns an empty string, or why the file could not be written.
template <class Sample>
std::string write_cache(const std::string& path, const std::string& key, const Part<Sample>& part);

}  // namespace studio::data::detail
