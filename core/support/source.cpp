#include "core/support/source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace nautilus {

SourceRange SourceRange::merge(const SourceRange& other) const {
  if (!valid) return other;
  if (!other.valid) return *this;
  return at(std::min(begin, other.begin), std::max(end, other.end));
}

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

std::shared_ptr<const SourceFile> SourceFile::read(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = "cannot open '" + path + "'";
    return nullptr;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    if (error) *error = "cannot read '" + path + "'";
    return nullptr;
  }
  std::string text = buffer.str();
  // Offsets are 32-bit; refuse files that could overflow them rather than misreport positions.
  if (text.size() >= (uint64_t{1} << 31)) {
    if (error) *error = "'" + path + "' is larger than 2 GiB";
    return nullptr;
  }
  return std::make_shared<SourceFile>(path, std::move(text));
}

LineColumn SourceFile::line_column(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, static_cast<uint32_t>(text_.size()));
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  uint32_t line_index = static_cast<uint32_t>(it - line_starts_.begin()) - 1;
  return {line_index + 1, offset - line_starts_[line_index] + 1};
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = line < line_starts_.size() ? line_starts_[line] - 1
                                            : static_cast<uint32_t>(text_.size());
  std::string_view view(text_);
  view = view.substr(begin, end - begin);
  if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
  return view;
}

std::string_view SourceFile::slice(const SourceRange& range) const {
  if (!range.valid || range.begin > text_.size()) return {};
  uint32_t end = std::min<uint32_t>(range.end, static_cast<uint32_t>(text_.size()));
  return std::string_view(text_).substr(range.begin, end - range.begin);
}

}  // namespace nautilus
