// SharedLibrary on the C math library every Linux process can load: symbols found and missing,
// the first missing name kept, and a library that does not exist.
#include <string>

#include <gtest/gtest.h>

#include "core/support/shared_library.h"

namespace nautilus {
namespace {

TEST(SharedLibrary, ResolvesFunctionsAndKeepsTheFirstMissingName) {
  SharedLibrary library = SharedLibrary::open("libm.so.6");
  ASSERT_TRUE(library.is_open()) << library.open_error();
  EXPECT_EQ(library.path(), "libm.so.6");
  double (*cosine)(double) = nullptr;
  EXPECT_TRUE(library.resolve("cos", cosine));
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.0), 1.0);
  EXPECT_TRUE(library.first_missing().empty());

  void (*absent)() = nullptr;
  EXPECT_FALSE(library.resolve("nautilus_no_such_function", absent));
  EXPECT_EQ(absent, nullptr);
  EXPECT_FALSE(library.resolve("nautilus_another_missing_function", absent));
  EXPECT_EQ(library.first_missing(), "nautilus_no_such_function");
}

TEST(SharedLibrary, OptionalSymbolsAreNotRecordedAsMissing) {
  SharedLibrary library = SharedLibrary::open("libm.so.6");
  ASSERT_TRUE(library.is_open());
  void (*absent)() = nullptr;
  EXPECT_FALSE(library.resolve_optional("nautilus_no_such_function", absent));
  EXPECT_TRUE(library.first_missing().empty());
  library.unload();
  EXPECT_FALSE(library.is_open());
}

TEST(SharedLibrary, AMissingLibraryReportsWhy) {
  SharedLibrary library = SharedLibrary::open("libnautilus_does_not_exist.so");
  EXPECT_FALSE(library.is_open());
  EXPECT_NE(library.open_error().find("libnautilus_does_not_exist.so"), std::string::npos);
  void (*absent)() = nullptr;
  EXPECT_FALSE(library.resolve("anything", absent));
  EXPECT_EQ(library.first_missing(), "anything");
}

}  // namespace
}  // namespace nautilus
