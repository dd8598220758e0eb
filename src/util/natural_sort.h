// Natural ("version") order for host names: runs of digits compare as numbers, so
// "n2" < "n10" and "rack2-node9" < "rack10-node1".
#pragma once

#include <string_view>

namespace corral {

// <0, 0 or >0 like strcmp. Numbers equal in value but written with different zero padding
// ("n01" vs "n1") are ordered by the first such difference, so the order is total.
int natural_compare(std::string_view a, std::string_view b);

inline bool natural_less(std::string_view a, std::string_view b) { return natural_compare(a, b) < 0; }

}  // namespace corral
