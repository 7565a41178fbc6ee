// Splits a loop over [0, count) into contiguous chunks run on the machine's cores.
//
// Host work over whole tensors (random inputs, encoding to device bytes, decoding outputs) is
// the runner's slowest step at attention sizes: about 1.4 s per 33 M-element tensor on one
// core, several seconds per timed package. The chunks are independent, so every caller's result
// is the same as its serial loop.
#pragma once

#include <algorithm>
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

}  // namespace nautilus
