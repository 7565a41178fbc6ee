#include "profiler/reference_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/tune/text_hash.h"
#include "profiler/tensor_bytes.h"

namespace nautilus::profiler {
namespace {

constexpr const char* kMagic = "nautilus-reference-outputs 1";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string outputs_path(const std::string& directory, const std::string& key) {
  return (std::filesystem::path(directory) / (key + ".outputs")).string();
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

}  // namespace

std::string reference_cache_key(const std::string& reference_dir,
                                const std::vector<std::string>& input_names, uint64_t seed,
                                const std::string& device_name, int compute_major,
                                int compute_minor) {
  // Every part is length-prefixed, so that no two different lists of parts hash the same text.
  std::string text;
  auto add = [&](const std::string& part) {
    text += std::to_string(part.size()) + ":" + part + "\n";
  };
  add(read_text(std::filesystem::path(reference_dir) / "launch.json"));
  add(read_text(std::filesystem::path(reference_dir) / "kernel.cu"));
  add(std::to_string(seed));
  for (const std::string& name : input_names) add(name);
  add(device_name);
  add(std::to_string(compute_major) + "." + std::to_string(compute_minor));
  return tune::hash_text(text);
}

ReferenceCacheLock::ReferenceCacheLock(const std::string& directory, const std::string& key) {
  std::error_code ignored;
  std::filesystem::create_directories(directory, ignored);
  const std::string path = (std::filesystem::path(directory) / (key + ".lock")).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

ReferenceCacheLock::~ReferenceCacheLock() {
  // Closing the descriptor releases the lock (and so does the process dying).
  if (fd_ >= 0) ::close(fd_);
}

std::optional<TensorMap> read_reference_outputs(
    const std::string& directory, const std::string& key,
    const std::vector<codegen::KernelArgument>& outputs) {
  std::ifstream file(outputs_path(directory, key), std::ios::binary);
  if (!file) return std::nullopt;
  std::string magic, header_line;
  if (!std::getline(file, magic) || magic != kMagic) return std::nullopt;
  if (!std::getline(file, header_line)) return std::nullopt;
  const nlohmann::json header = nlohmann::json::parse(header_line, nullptr, false);
  if (!header.is_object() || header.value("key", "") != key || !header.contains("outputs") ||
      !header["outputs"].is_array() || header["outputs"].size() != outputs.size()) {
    return std::nullopt;
  }
  TensorMap expected;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const codegen::KernelArgument& buffer = outputs[i];
    const nlohmann::json& entry = header["outputs"][i];
    const std::optional<uint64_t> bytes = buffer_bytes(buffer.dtype, element_count(buffer.shape));
    if (!entry.is_object() || !bytes || entry.value("name", "") != buffer.name ||
        entry.value("dtype", "") != dtype_name(buffer.dtype) ||
        entry.value("shape", std::vector<int64_t>{}) != buffer.shape ||
        entry.value("bytes", uint64_t{0}) != *bytes) {
      return std::nullopt;
    }
    std::vector<uint8_t> data(*bytes);
    if (!file.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(*bytes))) {
      return std::nullopt;  // truncated
    }
    std::optional<TensorData> tensor = decode_tensor(data, buffer.shape, buffer.dtype);
    if (!tensor) return std::nullopt;
    expected[buffer.name] = std::move(*tensor);
  }
  if (file.peek() != std::char_traits<char>::eof()) return std::nullopt;  // not this layout
  return expected;
}

bool write_reference_outputs(const std::string& directory, const std::string& key,
                             const std::vector<codegen::KernelArgument>& outputs,
                             const TensorMap& expected, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  nlohmann::json header = {{"key", key}, {"outputs", nlohmann::json::array()}};
  std::vector<std::vector<uint8_t>> blobs;
  for (const codegen::KernelArgument& buffer : outputs) {
    const auto found = expected.find(buffer.name);
    if (found == expected.end()) {
      *error = "no reference output " + buffer.name;
      return false;
    }
    blobs.push_back(encode_tensor(found->second));
    header["outputs"].push_back({{"name", buffer.name},
                                 {"dtype", dtype_name(buffer.dtype)},
                                 {"shape", buffer.shape},
                                 {"bytes", blobs.back().size()}});
  }
  // A name of this process's own: concurrent writers (without the lock) never share a file,
  // and the rename makes the complete file appear at once.
  const std::string final_path = outputs_path(directory, key);
  const std::string temporary = final_path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << kMagic << "\n" << header.dump() << "\n";
    for (const std::vector<uint8_t>& blob : blobs) {
      file.write(reinterpret_cast<const char*>(blob.data()),
                 static_cast<std::streamsize>(blob.size()));
    }
    file.flush();
    if (!file) {
      *error = "cannot write '" + temporary + "'";
      std::filesystem::remove(temporary, ec);
      return false;
    }
  }
  std::filesystem::rename(temporary, final_path, ec);
  if (ec) {
    *error = "cannot rename '" + temporary + "': " + ec.message();
    std::filesystem::remove(temporary, ec);
    return false;
  }
  return true;
}

}  // namespace nautilus::profiler
