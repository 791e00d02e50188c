#pragma once
// The live page at `grove serve`'s `GET /` (docs/serving.md#the-live-page): one
// self-contained HTML file (no CDN, no build step, served from the binary) that refreshes by
// itself from /v2/repository/index (the models), /metrics (request rate and latency
// percentiles per model, the engine's busy fraction) and /v2/timeline (each worker's tiles
// in a short window: the ready pool at work, barrier-free).
#include <string_view>

namespace grove::serve {

std::string_view live_page_html();

}  // namespace grove::serve
