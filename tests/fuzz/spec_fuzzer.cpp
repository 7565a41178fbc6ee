// libFuzzer target for the spec front end: any byte sequence must parse and check without a
// crash, a hang, undefined behaviour or a memory error, and must either produce a checked spec
// or at least one error (never neither, never both).
//
// Built only with -DNAUTILUS_LIBFUZZER=ON and clang; tools/test.sh runs it for a bounded time
// seeded with assets/specs. To fuzz longer by hand:
//   build/fuzz/tests/fuzz/spec_fuzzer CORPUS_DIR -max_total_time=600
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/spec/printer.h"
#include "core/spec/sema.h"
#include "core/support/diagnostics.h"
#include "core/support/source.h"

namespace {

[[noreturn]] void contract_violation(const char* what) {
  std::fprintf(stderr, "spec_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = std::make_shared<const nautilus::SourceFile>(
      "fuzz.nt", std::string(reinterpret_cast<const char*>(data), size));
  nautilus::DiagnosticEngine diagnostics(file);
  nautilus::spec::SpecPtr spec = nautilus::spec::load_spec(file, {}, diagnostics);

  if (spec == nullptr && !diagnostics.has_errors()) {
    contract_violation("load_spec returned no spec but reported no error");
  }
  if (spec != nullptr && diagnostics.has_errors()) {
    contract_violation("load_spec returned a spec although it reported an error");
  }

  // Everything a user sees of the outcome must be producible too: the rendered diagnostics (with
  // source excerpts and carets, which index into arbitrary bytes), or every printed form.
  std::string rendered = diagnostics.render_all();
  if (spec != nullptr) {
    rendered += nautilus::spec::print_spec(*spec);
    rendered += nautilus::spec::spec_to_dot(*spec);
    rendered += nautilus::spec::spec_to_json(*spec).dump();
  }
  // Keeps the rendering from being optimized away.
  volatile size_t sink = rendered.size();
  (void)sink;
  return 0;
}
