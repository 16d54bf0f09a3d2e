#include "cache.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"

namespace studio::data::detail {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'D', 'C', 'A', 'C', 'H', '1'};

class Writer {
 public:
  template <class T>
  void put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_bytes(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& in, std::size_t start) : in_(in), pos_(start) {}
  template <class T>
  bool get(T& v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_bytes(std::string& s) {
    uint64_t n = 0;
    if (!get(n) || in_.size() - pos_ < n) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  std::size_t pos_;
};

void put_sample(Writer& w, const TokenizedSample& s) {
  const auto n = static_cast<uint32_t>(s.input_ids.size());
  std::string mask((n + 7) / 8, '\0');
  std::vector<std::pair<uint32_t, int32_t>> odd;  // labels that are neither the id nor ignored
  for (uint32_t i = 0; i < n; ++i) {
    if (s.labels[i] == s.input_ids[i]) mask[i / 8] = static_cast<char>(mask[i / 8] | (1 << (i % 8)));
    else if (s.labels[i] != kIgnoreIndex) odd.emplace_back(i, static_cast<int32_t>(s.labels[i]));
  }
  w.put(n);
  w.put(static_cast<uint32_t>(odd.size()));
  for (int64_t id : s.input_ids) w.put(static_cast<int32_t>(id));
  w.out() += mask;
  for (const auto& [pos, label] : odd) {
    w.put(pos);
    w.put(label);
  }
}

bool get_sample(Reader& r, TokenizedSample& s) {
  uint32_t n = 0;
  uint32_t n_odd = 0;
  if (!r.get(n) || !r.get(n_odd)) return false;
  s.input_ids.resize(n);
  s.labels.assign(n, kIgnoreIndex);
  for (uint32_t i = 0; i < n; ++i) {
    int32_t id = 0;
    if (!r.get(id)) return false;
    s.input_ids[i] = id;
  }
  for (uint32_t byte = 0; byte < (n + 7) / 8; ++byte) {
    uint8_t bits = 0;
    if (!r.get(bits)) return false;
    for (uint32_t b = 0; b < 8 && byte * 8 + b < n; ++b)
      if (bits & (1u << b)) s.labels[byte * 8 + b] = s.input_ids[byte * 8 + b];
  }
  for (uint32_t k = 0; k < n_odd; ++k) {
    uint32_t pos = 0;
    int32_t label = 0;
    if (!r.get(pos) || !r.get(label) || pos >= n) return false;
    s.labels[pos] = label;
  }
  return true;
}

void put_sample(Writer& w, const PairSample& p) {
  w.put(p.prompt_len);
  put_sample(w, p.chosen);
  put_sample(w, p.rejected);
}

bool get_sample(Reader& r, PairSample& p) {
  return r.get(p.prompt_len) && get_sample(r, p.chosen) && get_sample(r, p.rejected);
}

void put_sample(Writer& w, const FeedbackSample& f) {
  w.put(static_cast<uint8_t>(f.desirable));
  put_sample(w, f.target);
  put_sample(w, f.kl);
}

bool get_sample(Reader& r, FeedbackSample& f) {
  uint8_t desirable = 0;
  if (!r.get(desirable) || desirable > 1) return false;
  f.desirable = desirable == 1;
  return get_sample(r, f.target) && get_sample(r, f.kl);
}

std::string stats_to_json(const DataStats& s) {
  nlohmann::json j = {{"samples", s.samples},
                      {"tokens", s.tokens},
                      {"learned_tokens", s.learned_tokens},
                      {"truncated", s.truncated},
                      {"skipped_bad_rows", s.skipped_bad_rows},
                      {"skipped_invalid", s.skipped_invalid},
                      {"desirable", s.desirable},
                      {"cutoff_len", s.lengths.cutoff_len},
                      {"upper", s.lengths.upper},
                      {"counts", s.lengths.counts},
                      {"warnings", s.warnings}};
  return j.dump();
}

bool stats_from_json(const std::string& text, DataStats& s) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    s.samples = j.at("samples");
    s.tokens = j.at("tokens");
    s.learned_tokens = j.at("learned_tokens");
    s.truncated = j.at("truncated");
    s.skipped_bad_rows = j.at("skipped_bad_rows");
    s.skipped_invalid = j.at("skipped_invalid");
    s.desirable = j.at("desirable");
    s.lengths.cutoff_len = j.at("cutoff_len");
    s.lengths.upper = j.at("upper").get<std::vector<int64_t>>();
    s.lengths.counts = j.at("counts").get<std::vector<int64_t>>();
    s.warnings = j.at("warnings").get<std::vector<std::string>>();
    return s.lengths.upper.size() == s.lengths.counts.size();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

template <class Sample>
bool read_cache(const std::string& path, const std::string& key, Part<Sample>& out) {
  // Read in one piece: the file may be as big as the tokenized data.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  std::string bytes(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return false;
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return false;
  Reader r(bytes, sizeof(kMagic));
  std::string stored_key;
  std::string stats;
  uint64_t n = 0;
  if (!r.get_bytes(stored_key) || stored_key != key || !r.get_bytes(stats) ||
      !stats_from_json(stats, out.stats) || !r.get(n))
    return false;
  out.samples.resize(n);
  out.origins.resize(n);
  for (uint64_t i = 0; i < n; ++i)
    if (!r.get(out.origins[i].row) || !r.get(out.origins[i].full_length) ||
        !get_sample(r, out.samples[i]))
      return false;
  return r.at_end();
}

template <class Sample>
std::string write_cache(const std::string& path, const std::string& key, const Part<Sample>& part) {
  Writer w;
  w.out().append(kMagic, sizeof(kMagic));
  w.put_bytes(key);
  w.put_bytes(stats_to_json(part.stats));
  w.put(static_cast<uint64_t>(part.samples.size()));
  for (std::size_t i = 0; i < part.samples.size(); ++i) {
    w.put(part.origins[i].row);
    w.put(part.origins[i].full_length);
    put_sample(w, part.samples[i]);
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return "cannot create " + std::filesystem::path(path).parent_path().string() + ": " + ec.message();
  return write_file_atomic(path, w.out());
}

template bool read_cache(const std::string&, const std::string&, Part<TokenizedSample>&);
template bool read_cache(const std::string&, const std::string&, Part<PairSample>&);
template bool read_cache(const std::string&, const std::string&, Part<FeedbackSample>&);
template std::string write_cache(const std::string&, const std::string&, const Part<TokenizedSample>&);
template std::string write_cache(const std::string&, const std::string&, const Part<PairSample>&);
template std::string write_cache(const std::string&, const std::string&,
                                 const Part<FeedbackSample>&);

}  // namespace studio::data::detail
