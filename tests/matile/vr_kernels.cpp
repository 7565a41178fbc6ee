// The hand-built VR kernels of tests/vrtile/kernels.h, compiled into this test binary too (the
// test folders are separate executables): they are the inputs of the MA lowering's tests.
#include "tests/vrtile/kernels.cpp"  // NOLINT(bugprone-suspicious-include)
