// Encoding throughput of studio_data's tokenizer against Hugging Face tokenizers (the Rust library
// through its Python bindings in the project's Python environment, STUDIO_PYTHON, timed inside
// Python by hf_bench.py on the same documents in the same run).
//
//   bench_tokenizer [--tokenizer PATH]... [--megabytes N] [--threads N] [--no-reference]
//
// Without --tokenizer it runs the trained fixtures in tests/fixtures/tokenizers (Qwen2-, LLaMA-3- and
// LLaMA-2-style). The documents are generated from tests/fixtures/tokenizers/corpus.txt with a fixed
// seed: its lines recombined, words shuffled and numbers redrawn, so that the word cache sees a
// realistic mix of repeated and new words. See bench/README.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/data/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using studio::data::Tokenizer;

struct Options {
  std::vector<std::string> tokenizers;
  double megabytes = 20;
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  bool reference = true;
};

// Wall-clock seconds, and CPU seconds summed over the threads doing the work: on a machine shared
// with other jobs the wall clock mostly measures the others, the CPU time does not.
struct Timing {
  double seconds = 0;
  double cpu_seconds = 0;
  std::size_t tokens = 0;
};

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

std::vector<std::string> corpus_lines() {
  std::ifstream in(STUDIO_SOURCE_DIR "/tests/fixtures/tokenizers/corpus.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) throw std::runtime_error("cannot read tests/fixtures/tokenizers/corpus.txt");
  return lines;
}

// A corpus line, sometimes with its words shuffled or its digits redrawn, so that documents are
// not copies of each other.
std::string varied_line(const std::string& line, std::mt19937& rng) {
  std::string out = line;
  const int change = static_cast<int>(rng() % 4);
  if (change == 0) {
    std::istringstream words(line);
    std::vector<std::string> list;
    for (std::string w; words >> w;) list.push_back(w);
    std::shuffle(list.begin(), list.end(), rng);
    out.clear();
    for (const std::string& w : list) out += w + ' ';
  } else if (change == 1) {
    for (char& c : out) {
      if (c >= '0' && c <= '9') c = static_cast<char>('0' + rng() % 10);
    }
  }
  return out;
}

std::vector<std::string> make_documents(double megabytes) {
  const std::vector<std::string> lines = corpus_lines();
  std::mt19937 rng(20240615);
  const auto target = static_cast<std::size_t>(megabytes * 1e6);
  std::vector<std::string> documents;
  std::size_t total = 0;
  while (total < target) {
    std::string document;
    const std::size_t length = 2000 + rng() % 14000;
    while (document.size() < length) {
      document += varied_line(lines[rng() % lines.size()], rng);
      document += rng() % 5 == 0 ? "\n\n" : "\n";
    }
    total += document.size();
    documents.push_back(std::move(document));
  }
  return documents;
}

// Encodes every document, split across `threads` threads by interleaving.
Timing time_ours(const Tokenizer& tokenizer, const std::vector<std::string>& documents,
                 unsigned threads) {
  std::vector<std::size_t> tokens(threads, 0);
  std::vector<double> cpu(threads, 0);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double cpu_start = thread_cpu_seconds();
      for (std::size_t i = t; i < documents.size(); i += threads)
        tokens[t] += tokenizer.encode(documents[i]).size();
      cpu[t] = thread_cpu_seconds() - cpu_start;
    });
  }
  for (std::thread& thread : pool) thread.join();
  Timing timing;
  timing.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (unsigned t = 0; t < threads; ++t) {
    timing.tokens += tokens[t];
    timing.cpu_seconds += cpu[t];
  }
  return timing;
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs hf_bench.py with the project's Python (STUDIO_PYTHON) on the same documents; nullopt (with
// the reason printed) when it cannot run.
std::optional<nlohmann::json> time_reference(const std::string& tokenizer_json,
                                             const std::vector<std::string>& documents) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "studio_bench_documents.txt";
  {
    std::ofstream out(file, std::ios::binary);
    for (std::size_t i = 0; i < documents.size(); ++i) out << (i > 0 ? "\x1e" : "") << documents[i];
  }
  const std::string command = shell_quoted(STUDIO_PYTHON) + " " +
                              shell_quoted(STUDIO_SOURCE_DIR "/bench/tokenizer/hf_bench.py") + " " +
                              shell_quoted(tokenizer_json) + " " + shell_quoted(file.string());
  std::string output;
  int status = -1;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      output.append(buffer, n);
    status = pclose(pipe);
  }
  std::filesystem::remove(file);
  if (status == 0) {
    try {
      return nlohmann::json::parse(output);
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "bench_tokenizer: hf_bench.py printed no JSON: " << e.what() << "\n";
      return std::nullopt;
    }
  }
  std::cerr << "bench_tokenizer: the HF reference did not run (needs '" STUDIO_PYTHON
               "' with the tokenizers package: run scripts/setup.sh, which installs the project's "
               "Python environment)\n";
  return std::nullopt;
}

void print_header() {
  std::printf("  %-26s %-7s %9s %9s %10s %9s %12s\n", "encoder", "threads", "wall s", "MB/s",
              "Mtok/s", "cpu s", "MB/cpu-s");
}

void print_row(const std::string& engine, const std::string& threads, const Timing& t,
               double bytes) {
  const double mb = bytes / 1e6;
  std::printf("  %-26s %-7s %9.3f %9.2f %10.3f %9.3f %12.2f\n", engine.c_str(), threads.c_str(),
              t.seconds, mb / t.seconds, static_cast<double>(t.tokens) / 1e6 / t.seconds,
              t.cpu_seconds, mb / t.cpu_seconds);
}

// Each row starts from a freshly loaded tokenizer, so no row inherits another's word cache.
Timing time_fresh(const std::string& path, const std::vector<std::string>& documents,
                  unsigned threads) {
  const Tokenizer tokenizer = Tokenizer::load(path);
  time_ours(tokenizer,
            {documents.begin(), documents.begin() + std::min<std::size_t>(8, documents.size())}, 1);
  return time_ours(tokenizer, documents, threads);
}

void run(const std::string& path, const std::vector<std::string>& documents,
         const Options& options) {
  const Tokenizer tokenizer = Tokenizer::load(path);
  double bytes = 0;
  for (const std::string& d : documents) bytes += static_cast<double>(d.size());
  std::printf("%s: %.1f MB in %zu documents\n", tokenizer.source().c_str(), bytes / 1e6,
              documents.size());
  print_header();
  const Timing one = time_fresh(path, documents, 1);
  print_row("studio_data encode", "1", one, bytes);
  const Timing many = time_fresh(path, documents, options.threads);
  print_row("studio_data encode", std::to_string(options.threads), many, bytes);
  if (!options.reference) return;
  const auto hf = time_reference(tokenizer.source(), documents);
  if (!hf) return;
  const Timing sequential{(*hf)["sequential_s"].get<double>(),
                          (*hf)["sequential_cpu_s"].get<double>(),
                          (*hf)["tokens"].get<std::size_t>()};
  const Timing batch{(*hf)["batch_s"].get<double>(), (*hf)["batch_cpu_s"].get<double>(),
                     (*hf)["batch_tokens"].get<std::size_t>()};
  print_row("HF tokenizers encode", "1", sequential, bytes);
  print_row("HF tokenizers encode_batch", "pool", batch, bytes);
  std::printf(
      "  studio_data vs HF: %.2fx the throughput per CPU-second (one thread each); wall clock "
      "%.2fx on one thread, %.2fx with %u threads vs encode_batch\n",
      sequential.cpu_seconds / one.cpu_seconds, sequential.seconds / one.seconds,
      batch.seconds / many.seconds, options.threads);
  if (sequential.tokens != one.tokens) {
    std::printf("  WARNING: token counts differ: studio_data %zu, HF %zu\n", one.tokens,
                sequential.tokens);
  }
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--tokenizer" && has_value) {
      options.tokenizers.push_back(argv[++i]);
    } else if (arg == "--megabytes" && has_value) {
      options.megabytes = std::stod(argv[++i]);
    } else if (arg == "--threads" && has_value) {
      options.threads = static_cast<unsigned>(std::stoul(argv[++i]));
    } else if (arg == "--no-reference") {
      options.reference = false;
    } else {
      throw std::invalid_argument(
          "usage: bench_tokenizer [--tokenizer PATH]... [--megabytes N] "
          "[--threads N] [--no-reference]");
    }
  }
  if (options.tokenizers.empty()) {
    for (const char* name : {"qwen2-style", "llama3-style", "llama2-style"}) {
      options.tokenizers.push_back(std::string(STUDIO_SOURCE_DIR "/tests/fixtures/tokenizers/") + name);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    const std::vector<std::string> documents = make_documents(options.megabytes);
    for (const std::string& path : options.tokenizers) run(path, documents, options);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: " << e.what() << "\n";
    return 1;
  }
}
