// The launch order of a grid, plain or grouped (launch_order.h).
#include "core/support/launch_order.h"

#include <algorithm>

namespace nautilus {

std::vector<int64_t> grid_point_in_launch_order(int64_t launch_index,
                                                const std::vector<int64_t>& extents,
                                                int64_t group, uint32_t reversed_axes) {
  std::vector<int64_t> point;
  grid_point_in_launch_order(launch_index, extents, group, &point, reversed_axes);
  return point;
}

void grid_point_in_launch_order(int64_t launch_index, const std::vector<int64_t>& extents,
                                int64_t group, std::vector<int64_t>* out,
                                uint32_t reversed_axes) {
  std::vector<int64_t>& point = *out;
  point.assign(extents.size(), 0);
  int64_t rest = launch_index;
  size_t first_plain = 0;
  if (group > 1 && extents.size() >= 2) {
    const int64_t x_extent = std::max<int64_t>(extents[0], 1);
    const int64_t y_extent = std::max<int64_t>(extents[1], 1);
    const int64_t plane = x_extent * y_extent;
    const int64_t in_plane = rest % plane;
    rest /= plane;
    const int64_t band_size = group * x_extent;
    const int64_t band = in_plane / band_size;
    const int64_t rows = std::min(group, y_extent - band * group);
    const int64_t in_band = in_plane % band_size;
    point[0] = in_band / rows;
    point[1] = band * group + in_band % rows;
    first_plain = 2;
  }
  for (size_t axis = first_plain; axis < extents.size(); ++axis) {
    const int64_t extent = std::max<int64_t>(extents[axis], 1);
    point[axis] = rest % extent;
    rest /= extent;
  }
  for (size_t axis = 0; axis < extents.size() && axis < 32 && reversed_axes; ++axis) {
    if (reversed_axes & (uint32_t{1} << axis)) {
      point[axis] = std::max<int64_t>(extents[axis], 1) - 1 - point[axis];
    }
  }
}

}  // namespace nautilus
