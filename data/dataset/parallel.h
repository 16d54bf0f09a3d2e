#pragma once
#include <cstddef>
#include <functional>

namespace studio::data::detail {

// Runs fn(i) for every i in [0, n) on `workers` threads (inline for one). Results go wherever fn
// puts them by index, so the output order never depends on the thread count. An exception
// escaping fn is rethrown after all threads finished: the one of the lowest index.
void parallel_for(std::size_t n, int workers, const std::function<void(std::size_t)>& fn);

// The worker count to use: `requested` when > 0, else the hardware's (at least 1).
int resolve_workers(int requested);

}  // namespace studio::data::detail
