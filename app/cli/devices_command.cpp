#include "app/cli/devices_command.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/device_info.h"

namespace nautilus::cli {
namespace {

constexpr const char* kUsage =
    "usage: nautilus devices [--json]\n"
    "\n"
    "Lists the CUDA devices of this machine (the CUDA driver is loaded at run time).\n"
    "  --json   print the device list as JSON\n"
    "Exit status: 0 with at least one device, 1 without a usable GPU or on a usage error.\n";

// Fixed-point text with `decimals` digits, e.g. fixed(79.6, 1) == "79.6".
std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string bytes_text(uint64_t bytes) {
  constexpr double kKiB = 1024.0;
  double value = static_cast<double>(bytes);
  if (value >= kKiB * kKiB * kKiB) return fixed(value / (kKiB * kKiB * kKiB), 1) + " GiB";
  if (value >= kKiB * kKiB) return fixed(value / (kKiB * kKiB), 0) + " MiB";
  if (value >= kKiB) return fixed(value / kKiB, 0) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string mhz_text(int khz) { return std::to_string(khz / 1000) + " MHz"; }

// A plain-text table: the first row is the header; columns are left-aligned and padded to the
// widest cell, separated by two spaces.
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

void print_devices(std::ostream& out, const profiler::DeviceQuery& query) {
  out << "CUDA driver " << profiler::format_driver_version(query.driver_version) << ", "
      << query.devices.size() << (query.devices.size() == 1 ? " device" : " devices") << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"#", "name", "arch", "SMs", "memory", "SM clock", "mem clock", "mem bandwidth", "L2",
       "smem/block"}};
  for (const profiler::DeviceInfo& d : query.devices) {
    rows.push_back({std::to_string(d.ordinal), d.name, d.arch(), std::to_string(d.sm_count),
                    bytes_text(d.total_memory_bytes), mhz_text(d.sm_clock_khz),
                    mhz_text(d.memory_clock_khz),
                    fixed(d.peak_memory_bandwidth_bytes_per_s() / 1e9, 0) + " GB/s",
                    bytes_text(static_cast<uint64_t>(d.l2_cache_bytes)),
                    bytes_text(static_cast<uint64_t>(d.shared_memory_per_block_optin_bytes))});
  }
  print_table(out, rows);
}

}  // namespace

int run_devices_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  bool json = false;
  for (const std::string& arg : args) {
    if (arg == "--json") {
      json = true;
    } else if (arg == "-h" || arg == "--help") {
      out << kUsage;
      return 0;
    } else {
      err << "nautilus devices: unknown argument '" << arg << "'\n" << kUsage;
      return 1;
    }
  }

  profiler::DeviceQuery query = profiler::query_devices();
  if (json) {
    out << profiler::to_json(query).dump(2) << '\n';
  } else if (query.has_gpu()) {
    print_devices(out, query);
  }
  if (!query.has_gpu()) {
    err << "no GPU: " << query.no_gpu->message << '\n';
    return 1;
  }
  return 0;
}

int run_devices_command(const std::vector<std::string>& args) {
  return run_devices_command(args, std::cout, std::cerr);
}

}  // namespace nautilus::cli
