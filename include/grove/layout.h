#pragma once
namespace grove {

// How float32 convolutions lay out their activations. `channels_last` (the default) runs each
// Conv the channels-last GEMM path takes on NHWC activations, chains of them without a layout
// change between, with a Transpose where an NCHW op reads or writes (docs/layout.md);
// Winograd layers, grouped convs and convs of few input channels stay NCHW. `nchw` keeps every
// conv NCHW, as the model is written.
enum class ConvLayout { nchw, channels_last };

}  // namespace grove
