#include "app/cli/command_inputs.h"

namespace nautilus::cli {

bool read_size_bindings(const ParsedOptions& options, std::vector<spec::SizeOverride>& sizes,
                        std::ostream& err) {
  for (const std::string& text : options.all("D")) {
    std::string error;
    auto binding = spec::parse_size_override(text, &error);
    if (!binding) {
      err << "nautilus: error: -D " << text << ": " << error << "\n";
      return false;
    }
    sizes.push_back(*binding);
  }
  return true;
}

bool read_decisions(const std::vector<std::string>& texts, const std::string& option,
                    std::vector<sched::Decision>& out, std::ostream& err) {
  for (const std::string& text : texts) {
    sched::DecisionParseError parse_error;
    auto decision = sched::parse_decision(text, &parse_error);
    if (!decision) {
      err << "nautilus: error: --" << option << " '" << text << "': "
          << sched::to_string(parse_error) << "\n";
      return false;
    }
    out.push_back(*decision);
  }
  return true;
}

std::optional<cost::DeviceModel> read_device_model(const ParsedOptions& options, std::ostream& err) {
  const std::string device_name = options.get("device", "h100");
  std::optional<cost::DeviceModel> device = cost::device_model_for(device_name);
  if (!device) {
    err << "nautilus: error: unknown --device '" << device_name << "'; expected "
        << cost::known_device_models() << "\n";
  }
  return device;
}

}  // namespace nautilus::cli
