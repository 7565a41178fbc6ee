// A stand-in for nautilus-runner in tuning tests (the fake CUDA driver cannot execute compiled
// kernels): a shell script whose reported time is a deterministic function of the generated
// code, so a test can check the best the tuner reports against every record, and whose call log
// shows what was (not) measured again.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/temp_dir.h"

namespace nautilus::testing {

// A runner that logs each package it is given to DIR/calls.txt and reports a validated time of
// 10 + (cksum of kernel.cu mod 90) µs; candidates whose checksum is divisible by `wrong_every`
// are reported as wrong results instead (0: never). `sleep` seconds per call.
inline std::string write_stand_in_runner(const TempDir& dir, int wrong_every = 0,
                                         double sleep = 0) {
  const std::string path = dir.file("runner.sh");
  std::ofstream script(path);
  script << "#!/bin/sh\n"
         << "sum=$(cksum < \"$1/kernel.cu\" | cut -d' ' -f1)\n"
         << "us=$(( 10 + sum % 90 ))\n"
         << "echo \"$1 $us\" >> " << dir.file("calls.txt") << "\n"
         << (sleep > 0 ? "sleep " + std::to_string(sleep) + "\n" : "")
         << "if [ " << wrong_every << " -gt 0 ] && [ $(( sum % " << wrong_every
         << " )) -eq 0 ]; then\n"
         << "  echo '{\"format\": \"nautilus-runner-report\", \"version\": 1, \"status\": "
            "\"wrong_results\", \"validation\": {\"status\": \"failed\", \"passed\": false, "
            "\"max_relative_error\": 0.5}, \"errors\": [{\"kind\": \"wrong_results\", "
            "\"message\": \"C differs from the reference\"}]}'\n"
         << "  exit 1\nfi\n"
         << "echo \"{\\\"format\\\": \\\"nautilus-runner-report\\\", \\\"version\\\": 1, "
            "\\\"status\\\": \\\"ok\\\", \\\"timing\\\": {\\\"kernels\\\": [{\\\"name\\\": "
            "\\\"gemm_C\\\", \\\"median_us\\\": $us, \\\"min_us\\\": $us, \\\"max_us\\\": $us, "
            "\\\"registers\\\": 64}], \\\"total\\\": {\\\"median_us\\\": $us, \\\"min_us\\\": $us, "
            "\\\"max_us\\\": $us}}, \\\"validation\\\": {\\\"status\\\": \\\"passed\\\", "
            "\\\"passed\\\": true, \\\"max_relative_error\\\": 0.001}, \\\"errors\\\": []}\"\n";
  script.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

}  // namespace nautilus::testing
