#pragma once
// The layout model's data (tune/layout_model.h): values of the sizes CNNs pass between convs,
// each moved between the three layouts by the Transpose a plan puts there, timed inside a
// one-Transpose model as grove tune times a conv.
#include <random>
#include <vector>

#include "profile/in_model_profile.h"
#include "tune/layout_model.h"

namespace grove::profile {

// [1, C, H, W]: C from 16 to 1024 in whole blocks of 16 (a blocked layout fits on either ISA),
// square planes from 7 to 112, at most 16 M elements.
Shape sample_value(std::mt19937_64& rng);

// One row per change of tune::layout_changes() of `nchw` (blocked with blocks of `block`), on `engine`.
std::vector<tune::LayoutRow> profile_layout_changes(Engine& engine, const Shape& nchw, int64_t block,
                                                    const ProfileSettings& settings);

}  // namespace grove::profile
