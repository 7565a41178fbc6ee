// The hand-built kernels of tests/vrtile (tiled GEMM, online softmax, FlashAttention) compiled
// into this test binary too, so that the rewrites run on exactly the kernels that folder checks.
#include "tests/vrtile/kernels.cpp"  // NOLINT(bugprone-suspicious-include)
