// Source files and positions.
//
// A SourceFile owns the text of one `.nt` spec and knows where each line starts, so that any
// byte offset can be turned into a 1-based line and column for diagnostics. Positions inside the
// compiler are byte offsets (SourceRange = [begin, end)); every IR node keeps one as provenance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nautilus {

// A half-open byte range [begin, end) in one source file. An empty range at offset 0 with
// `valid == false` means "no source location" (e.g. a node synthesized by a pass).
struct SourceRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool valid = false;

  static SourceRange at(uint32_t begin, uint32_t end) { return {begin, end, true}; }
  SourceRange merge(const SourceRange& other) const;
  bool operator==(const SourceRange&) const = default;
};

struct LineColumn {
  uint32_t line = 0;    // 1-based
  uint32_t column = 0;  // 1-based, in bytes
};

class SourceFile {
 public:
  SourceFile(std::string path, std::string text);

  // Reads a file from disk; returns nullptr and fills `error` when it cannot be read.
  static std::shared_ptr<const SourceFile> read(const std::string& path, std::string* error);

  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  LineColumn line_column(uint32_t offset) const;
  // The text of a 1-based line without its newline.
  std::string_view line_text(uint32_t line) const;
  uint32_t line_count() const { return static_cast<uint32_t>(line_starts_.size()); }
  std::string_view slice(const SourceRange& range) const;

 private:
  std::string path_;
  std::string text_;
  std::vector<uint32_t> line_starts_;
};

using SourceFilePtr = std::shared_ptr<const SourceFile>;

}  // namespace nautilus
