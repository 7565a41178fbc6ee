// The search tree as JSON: what `nautilus schedule --tree FILE` writes and the app's search-tree
// view draws. docs/search.md documents every field.
//
//   {
//     "format": "nautilus-search-tree", "version": 1,
//     "model": "analytical sm_90", "chosen": 14,
//     "schedule": ["rolling_update(O_sum, n, tile=64)", ...],
//     "stats": {"nodes": 40, "expanded": 12, "pruned": 25, "leaves": 3, "failed": 0,
//               "compiles": 31, "rounds": 9, "seconds": 2.4, "cancelled": false},
//     "nodes": [
//       {"id": 0, "parent": null, "decision": null, "phase": "root", "pinned": false,
//        "estimate_us": 5321.7, "measured_us": null, "status": "expanded", "reason": null,
//        "completion": ["tile(O_sum, m=64, d=64, n=32)", ...], "children": [1, 2, 3]},
//       ...
//     ]
//   }
#pragma once

#include <nlohmann/json.hpp>

#include "core/search/search.h"

namespace nautilus::search {

nlohmann::ordered_json tree_to_json(const SearchResult& result);

}  // namespace nautilus::search
