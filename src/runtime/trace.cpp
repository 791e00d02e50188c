#include "runtime/trace.h"

#include <algorithm>
#include <cstdio>

#include "runtime/engine.h"
#include "runtime/job_state.h"

namespace grove {

namespace {

int64_t ns_since_epoch(Tracer::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Microseconds with nanosecond precision, as Chrome's "ts"/"dur" expect.
std::string microseconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", static_cast<double>(ns) / 1000.0);
  return text;
}

}  // namespace

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

Tracer::Tracer(int tracks) : tracks_(std::make_unique<Track[]>(static_cast<size_t>(tracks))), n_tracks_(tracks) {}

void Tracer::start() {
  for (int i = 0; i < n_tracks_; ++i) {
    std::lock_guard lock(tracks_[i].mutex);
    tracks_[i].jobs.clear();
    tracks_[i].events.clear();
  }
  origin_ns_.store(ns_since_epoch(Clock::now()), std::memory_order_relaxed);
  on_.store(true, std::memory_order_release);
}

void Tracer::record(int track, const JobState& job, int32_t tile, Clock::time_point start, Clock::time_point end) {
  Track& t = tracks_[track];
  int64_t origin = origin_ns_.load(std::memory_order_relaxed);
  std::lock_guard lock(t.mutex);
  // Consecutive tiles mostly belong to one job: remember it once per run of tiles.
  if (t.jobs.empty() || t.jobs.back().id != job.id) {
    std::shared_ptr<const TileNames> names;
    try {
      names = job.job->tile_names();
    } catch (...) {  // the tiles then show as numbers
    }
    t.jobs.push_back({job.id, std::move(names)});
  }
  t.events.push_back({static_cast<uint32_t>(t.jobs.size() - 1), tile, ns_since_epoch(start) - origin,
                      ns_since_epoch(end) - origin});
}

std::string Tracer::stop_json(const std::vector<std::string>& track_names) {
  on_.store(false, std::memory_order_release);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto separator = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (int track = 0; track < n_tracks_; ++track) {
    std::vector<TracedJob> jobs;
    std::vector<Event> events;
    {
      std::lock_guard lock(tracks_[track].mutex);
      jobs.swap(tracks_[track].jobs);
      events.swap(tracks_[track].events);
    }
    std::string name = track < static_cast<int>(track_names.size()) ? track_names[track] : std::to_string(track);
    separator();
    out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(track) +
           ",\"args\":{\"name\":" + json_quote(name) + "}}";
    for (const Event& e : events) {
      const TracedJob& job = jobs[e.job];
      // A name is not worth losing the trace for: a tile without one shows its number.
      std::string label = std::to_string(e.tile);
      int32_t depth = -1;
      if (job.names) {
        try {
          label = job.names->label(e.tile);
        } catch (...) {
        }
        try {
          depth = job.names->depth(e.tile);
        } catch (...) {
        }
      }
      separator();
      out += "{\"name\":" + json_quote(label) + ",\"cat\":\"tile\",\"ph\":\"X\",\"pid\":1,\"tid\":" +
             std::to_string(track) + ",\"ts\":" + microseconds(e.start_ns) +
             ",\"dur\":" + microseconds(e.end_ns - e.start_ns) + ",\"args\":{\"tile\":" + std::to_string(e.tile) +
             ",\"depth\":" + std::to_string(depth) + ",\"job\":" + std::to_string(job.id) + "}}";
    }
  }
  out += "]}\n";
  return out;
}

std::vector<TileTiming> Tracer::stop_timings() {
  on_.store(false, std::memory_order_release);
  std::vector<TileTiming> out;
  for (int track = 0; track < n_tracks_; ++track) {
    std::lock_guard lock(tracks_[track].mutex);
    for (const Event& e : tracks_[track].events)
      out.push_back({tracks_[track].jobs[e.job].id, e.tile, track, e.start_ns, e.end_ns});
    tracks_[track].jobs.clear();
    tracks_[track].events.clear();
  }
  std::sort(out.begin(), out.end(), [](const TileTiming& a, const TileTiming& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace grove
