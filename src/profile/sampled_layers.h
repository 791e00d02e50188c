#pragma once
// The performance model's data from a sampled space of conv layers (paper 003 profiles many
// configurations, not only the layers of the models at hand): each sample is a one-conv model
// (Conv + bias, then ReLU) built in memory and profiled like a model's conv
// (in_model_profile.h), every candidate primitive and grid.
#include <random>
#include <vector>

#include "graph/limits.h"
#include "profile/in_model_profile.h"
#include "tune/conv_candidates.h"

namespace grove::profile {

// Sizes as CNNs have them: channels from 8 to 512, square planes from 7 to 112, kernels 1x1
// and 3x3 most of the time; at least 2 and at most 1,000 MFLOPs.
tune::ConvConfig sample_conv(std::mt19937_64& rng);

// A network's first conv, on an image: 1, 3 or 4 channels in, a 3x3 to 7x7 kernel, stride 2
// most of the time. The direct kernel competes only here.
tune::ConvConfig sample_stem(std::mt19937_64& rng);

// The i-th layer of a sample: every eighth a stem, the first among them (CNNs have fewer, but
// the direct kernel has no other layers to learn from, and a calibration of a few layers
// needs one); `stems_only`: always a stem.
tune::ConvConfig sample_layer(int i, bool stems_only, std::mt19937_64& rng);

// Profiles the one-conv model of `c` (random weights and input drawn from `rng`) on `engine`.
std::vector<TunedNode> profile_layer(Engine& engine, const tune::ConvConfig& c, std::mt19937_64& rng,
                                     const ProfileSettings& settings, const Limits& limits = {});

}  // namespace grove::profile
