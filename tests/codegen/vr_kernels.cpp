// The hand-built VR kernels of tests/vrtile/kernels.h, compiled into this test binary too (the
// test folders are separate executables): lowered to MA tile IR, they are the emitter's inputs.
#include "tests/vrtile/kernels.cpp"  // NOLINT(bugprone-suspicious-include)
