#include "core/search/tree_json.h"

namespace nautilus::search {
namespace {

nlohmann::ordered_json decisions_json(const std::vector<sched::Decision>& decisions) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const sched::Decision& decision : decisions) list.push_back(sched::print_decision(decision));
  return list;
}

}  // namespace

nlohmann::ordered_json tree_to_json(const SearchResult& result) {
  nlohmann::ordered_json json;
  json["format"] = "nautilus-search-tree";
  json["version"] = 1;
  json["model"] = result.model;
  json["chosen"] = result.ok ? nlohmann::ordered_json(result.chosen) : nlohmann::ordered_json();
  json["schedule"] = decisions_json(result.schedule.decisions);
  json["error"] = result.ok ? nlohmann::ordered_json() : nlohmann::ordered_json(result.error);
  const SearchStats& stats = result.stats;
  json["stats"] = {{"nodes", stats.nodes},       {"expanded", stats.expanded},
                   {"pruned", stats.pruned},     {"leaves", stats.leaves},
                   {"failed", stats.failed},     {"compiles", stats.compiles},
                   {"rounds", stats.rounds},     {"seconds", stats.seconds},
                   {"cancelled", stats.cancelled}};
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const SearchNode& node : result.nodes) {
    nlohmann::ordered_json entry;
    entry["id"] = node.id;
    entry["parent"] = node.parent < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(node.parent);
    entry["decision"] = node.decision ? nlohmann::ordered_json(sched::print_decision(*node.decision))
                                      : nlohmann::ordered_json();
    entry["phase"] = node.parent < 0 ? "root" : phase_name(node.phase);
    entry["pinned"] = node.pinned;
    entry["estimate_us"] = node.estimate ? nlohmann::ordered_json(node.estimate->microseconds)
                                         : nlohmann::ordered_json();
    entry["measured_us"] =
        node.measured_us ? nlohmann::ordered_json(*node.measured_us) : nlohmann::ordered_json();
    entry["status"] = node_status_name(node.status);
    entry["reason"] = node.reason.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(node.reason);
    entry["completion"] = decisions_json(node.completion.decisions);
    entry["children"] = node.children;
    nodes.push_back(std::move(entry));
  }
  json["nodes"] = std::move(nodes);
  return json;
}

}  // namespace nautilus::search
