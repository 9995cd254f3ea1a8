// A small persistent thread pool for the CPU operators. One parallel region runs at a time
// (callers from several threads are serialised); a region started from inside a worker runs
// serially, so nesting never deadlocks.
#pragma once
#include <functional>

namespace mf {

// Number of threads the CPU operators use (default: hardware concurrency, or the environment
// variable MIME_FAST_NUM_THREADS when set).
int num_threads();
// Set it; n <= 0 restores the default.
void set_num_threads(int n);

// Run body(begin, end) over [0, n) in contiguous chunks of `grain` items, handed out to the
// threads as they become free. The chunk count bounds the threads used.
void parallel_for(int n, int grain, const std::function<void(int, int)>& body);

}  // namespace mf
