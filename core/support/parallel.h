// Splits a loop over [0, count) into contiguous chunks run on the machine's cores
// (parallel_chunks), or hands its indices out one at a time to a given number of threads
// (parallel_for_each).
//
// Host work over whole tensors (random inputs, encoding to device bytes, decoding outputs) is
// the runner's slowest step at attention sizes: about 1.4 s per 33 M-element tensor on one
// core, several seconds per timed package. The chunks are independent, so every caller's result
// is the same as its serial loop.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace nautilus {

// Calls body(begin, end) for chunks covering [0, count). Below `serial_below` elements (where
// starting threads costs more than it saves) it is one call on the calling thread.
template <typename Body>
void parallel_chunks(int64_t count, const Body& body, int64_t serial_below = int64_t{1} << 20) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t chunks = count < serial_below ? 1 : std::min<int64_t>(cores, 32);
  if (chunks <= 1) {
    if (count > 0) body(int64_t{0}, count);
    return;
  }
  const int64_t step = (count + chunks - 1) / chunks;
  std::vector<std::thread> workers;
  for (int64_t begin = step; begin < count; begin += step)
    workers.emplace_back([&body, begin, end = std::min(count, begin + step)] { body(begin, end); });
  body(int64_t{0}, std::min(count, step));
  for (std::thread& worker : workers) worker.join();
}

// Calls body(i) for every i in [0, count) on up to `threads` threads, the calling one among
// them; each thread takes the next index when it finishes one, so items of uneven cost (the
// search's compiles, calibration's programs) spread evenly. threads <= 1: a plain loop.
template <typename Body>
void parallel_for_each(int64_t count, int threads, const Body& body) {
  const int64_t workers = std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(count, 1));
  if (workers <= 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<int64_t> next{0};
  const auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < count;) body(i);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace nautilus
