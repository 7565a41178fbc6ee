// A number as fixed-point text with `digits` decimals ("12.5", "2684"): what the cost model's
// descriptions, the pipeline solver's summaries and the layout synthesis' notes print.
#pragma once

#include <iomanip>
#include <sstream>
#include <string>

namespace nautilus {

inline std::string fixed_point(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace nautilus
