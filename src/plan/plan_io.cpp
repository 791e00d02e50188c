// TileGraph files: a little-endian byte writer, a reader that checks every length against
// what the file still holds (so a corrupt count cannot cause a huge allocation), the header
// checks against the plan the file is meant for, then structural checks of the arrays.
#include "plan/plan_io.h"

#include "graph/graph_hash.h"
#include "plan/plan_internal.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>

namespace grove {
namespace {

constexpr char kMagic[8] = {'G', 'R', 'O', 'V', 'E', 'T', 'G', '1'};
constexpr uint32_t kMaxVersionBytes = 64;
constexpr uint32_t kMaxNameBytes = 1 << 16;
constexpr uint32_t kMaxRank = 64;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t model_hash_value(const Graph& g) { return graph_hash(g, true); }

// The runtime inputs in declaration order with their bound shapes.
std::vector<std::pair<std::string, Shape>> bound_input_shapes(const Graph& g) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& in : g.inputs) {
    if (g.initializers.count(in.name)) continue;
    auto it = g.values.find(in.name);
    shapes.emplace_back(in.name, it == g.values.end() ? Shape{} : it->second.shape);
  }
  return shapes;
}

std::string shapes_str(const std::vector<std::pair<std::string, Shape>>& shapes) {
  std::string s;
  for (const auto& [name, shape] : shapes) {
    if (!s.empty()) s += ", ";
    s += name;
    s += '=';
    if (shape.empty()) s += "scalar";
    for (size_t d = 0; d < shape.size(); ++d) {
      if (d) s += 'x';
      s += std::to_string(shape[d]);
    }
  }
  return s.empty() ? "(no inputs)" : s;
}

class ByteWriter {
 public:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  template <class T>
  void array(const std::vector<T>& v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    u64(v.size());
    for (T x : v) {
      if constexpr (sizeof(T) == 4) u32(static_cast<uint32_t>(x));
      else u64(static_cast<uint64_t>(x));
    }
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

uint64_t read_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

class ByteReader {
 public:
  ByteReader(std::string_view data, const std::string& path) : data_(data), path_(path) {}

  [[noreturn]] void fail(const std::string& message) const { throw Error(path_ + ": " + message); }
  size_t remaining() const { return data_.size() - pos_; }
  void skip(size_t n) { take(n, "the header"); }
  // Drops the last n bytes (the checksum) from what the fields may read.
  void limit_end(size_t n) { data_ = data_.substr(0, data_.size() - n); }

  uint8_t u8(const char* what) { return static_cast<uint8_t>(read_le(take(1, what), 1)); }
  uint32_t u32(const char* what) { return static_cast<uint32_t>(read_le(take(4, what), 4)); }
  uint64_t u64(const char* what) { return read_le(take(8, what), 8); }
  int32_t i32(const char* what) { return static_cast<int32_t>(u32(what)); }
  int64_t i64(const char* what) { return static_cast<int64_t>(u64(what)); }
  std::string str(uint32_t max_bytes, const char* what) {
    uint32_t n = u32(what);
    if (n > max_bytes) fail(std::string("corrupt: ") + what + " is " + std::to_string(n) + " bytes long");
    return std::string(take(n, what), n);
  }
  // An element count, checked against the bytes left before anything is allocated.
  size_t count(size_t min_element_bytes, const char* what) {
    uint64_t n = u64(what);
    if (n > remaining() / min_element_bytes)
      fail(std::string("corrupt: ") + what + " claims " + std::to_string(n) + " elements, more than the file holds");
    return static_cast<size_t>(n);
  }
  template <class T>
  std::vector<T> array(const char* what) {
    std::vector<T> v(count(sizeof(T), what));
    for (T& x : v) x = static_cast<T>(read_le(take(sizeof(T), what), sizeof(T)));
    return v;
  }

 private:
  const char* take(size_t n, const char* what) {
    if (remaining() < n) fail(std::string("truncated while reading ") + what);
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }

  std::string_view data_;
  size_t pos_ = 0;
  const std::string& path_;
};

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the TileGraph file");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": cannot read the TileGraph file");
  return data;
}

void check_header(ByteReader& r, const Plan& expected) {
  uint64_t hash = r.u64("the model hash");
  std::vector<std::pair<std::string, Shape>> shapes(r.count(8, "the input count"));
  for (auto& [name, shape] : shapes) {
    name = r.str(kMaxNameBytes, "an input name");
    uint32_t rank = r.u32("an input rank");
    if (rank > kMaxRank) r.fail("corrupt: input '" + name + "' has rank " + std::to_string(rank));
    shape.resize(rank);
    for (int64_t& d : shape) d = r.i64("an input shape");
  }
  int32_t threads = r.i32("the thread count");
  int32_t tiles_per_op = r.i32("tiles per op");
  int64_t min_tile_flops = r.i64("the minimum tile FLOPs");
  uint8_t schedule = r.u8("the schedule");
  if (schedule > 1) r.fail("corrupt: unknown schedule " + std::to_string(schedule));

  auto want_shapes = bound_input_shapes(expected.graph);
  if (shapes != want_shapes)
    r.fail("planned for input shapes " + shapes_str(shapes) + ", but this plan binds " + shapes_str(want_shapes));
  const PlanOptions& o = expected.options;
  auto mismatch = [&](const std::string& what, const std::string& file, const std::string& now) {
    r.fail("planned with " + what + " " + file + ", but this plan uses " + now + "; plan again with the same options");
  };
  if (threads != o.threads) mismatch("--threads", std::to_string(threads), std::to_string(o.threads));
  if (tiles_per_op != o.tiles_per_op) mismatch("--tiles-per-op", std::to_string(tiles_per_op), std::to_string(o.tiles_per_op));
  if (min_tile_flops != o.min_tile_flops)
    mismatch("--min-tile-flops", std::to_string(min_tile_flops), std::to_string(o.min_tile_flops));
  auto schedule_name = [](int s) { return std::string(s == 0 ? "aspen" : "barrier"); };
  int want_schedule = o.schedule == Schedule::barrier ? 1 : 0;
  if (schedule != want_schedule) mismatch("--schedule", schedule_name(schedule), schedule_name(want_schedule));
  uint64_t want_hash = model_hash_value(expected.graph);
  if (hash != want_hash)
    r.fail("planned for model hash " + hex64(hash) + ", but this model hashes to " + hex64(want_hash) +
           " (a different model, other weights, or another grove build's graph passes)");
}

// Everything the runtime relies on: sizes agree, indices are in range, the CSR offsets are
// monotone, parent counts match the child lists, and each node's tiles are where it says.
void check_tiles(const ByteReader& r, const TileGraph& tg, size_t node_count) {
  size_t tiles = tg.node.size();
  auto bad = [&](const std::string& what) { r.fail("corrupt TileGraph: " + what); };
  if (tg.region.size() != tiles || tg.n_parents.size() != tiles || tg.depth.size() != tiles)
    bad("the per-tile arrays differ in length");
  if (tg.child_begin.size() != tiles + 1) bad("child_begin has " + std::to_string(tg.child_begin.size()) + " entries, not tiles + 1");
  if (tg.first_tile.size() != node_count || tg.tile_count.size() != node_count)
    bad("it has tiles for " + std::to_string(tg.first_tile.size()) + " nodes, this graph has " + std::to_string(node_count));
  for (size_t t = 0; t < tiles; ++t) {
    if (tg.node[t] < -1 || tg.node[t] >= static_cast<int64_t>(node_count))
      bad("node[" + std::to_string(t) + "] = " + std::to_string(tg.node[t]) + " is not a node");
    if (tg.depth[t] < 0) bad("depth[" + std::to_string(t) + "] is negative");
    for (const Range& x : tg.region[t])
      if (x.begin < 0 || x.end < x.begin) bad("region[" + std::to_string(t) + "] is not a box");
  }
  if (tg.child_begin[0] != 0 || tg.child_begin[tiles] != static_cast<int64_t>(tg.children.size()))
    bad("child_begin does not span the children");
  for (size_t t = 0; t < tiles; ++t)
    if (tg.child_begin[t + 1] < tg.child_begin[t]) bad("child_begin decreases at tile " + std::to_string(t));
  std::vector<int32_t> parents(tiles, 0);
  for (size_t t = 0; t < tiles; ++t) {
    for (int64_t c = tg.child_begin[t]; c < tg.child_begin[t + 1]; ++c) {
      int32_t child = tg.children[static_cast<size_t>(c)];
      if (child < 0 || static_cast<size_t>(child) >= tiles)
        bad("children[" + std::to_string(c) + "] = " + std::to_string(child) + " is not a tile");
      ++parents[static_cast<size_t>(child)];
    }
  }
  size_t zero_parent_tiles = 0;
  for (size_t t = 0; t < tiles; ++t) {
    if (parents[t] != tg.n_parents[t]) bad("n_parents[" + std::to_string(t) + "] disagrees with the child lists");
    zero_parent_tiles += parents[t] == 0;
  }
  for (int32_t s : tg.sources)
    if (s < 0 || static_cast<size_t>(s) >= tiles || parents[static_cast<size_t>(s)] != 0)
      bad("source " + std::to_string(s) + " is not a tile without parents");
  if (tg.sources.size() != zero_parent_tiles) bad("the sources are not the tiles without parents");
  for (size_t n = 0; n < node_count; ++n) {
    int64_t first = tg.first_tile[n], count = tg.tile_count[n];
    if (first < 0 || count < 0 || first + count > static_cast<int64_t>(tiles))
      bad("the tiles of node " + std::to_string(n) + " are out of range");
    for (int64_t t = first; t < first + count; ++t)
      if (tg.node[static_cast<size_t>(t)] != static_cast<int32_t>(n))
        bad("tile " + std::to_string(t) + " is listed for node " + std::to_string(n) + " but belongs to another");
  }
}

template <class T>
std::string first_difference(const char* name, const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size())
    return std::string(name) + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " entries";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return std::string(name) + "[" + std::to_string(i) + "]: " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  return "";
}

}  // namespace

std::string model_hash(const Graph& graph) { return hex64(model_hash_value(graph)); }

void save_tile_graph(const std::string& path, const Plan& plan) {
  const TileGraph& tg = plan.tiles;
  ByteWriter w;
  w.raw(kMagic, sizeof kMagic);
  w.str(kGroveVersion);
  size_t length_at = w.bytes().size();
  w.u64(0);  // patched below, once the length is known
  w.u64(model_hash_value(plan.graph));
  auto shapes = bound_input_shapes(plan.graph);
  w.u64(shapes.size());
  for (const auto& [name, shape] : shapes) {
    w.str(name);
    w.u32(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) w.u64(static_cast<uint64_t>(d));
  }
  w.u32(static_cast<uint32_t>(plan.options.threads));
  w.u32(static_cast<uint32_t>(plan.options.tiles_per_op));
  w.u64(static_cast<uint64_t>(plan.options.min_tile_flops));
  w.u8(plan.options.schedule == Schedule::barrier ? 1 : 0);
  w.array(tg.node);
  w.u64(tg.region.size());
  for (const Region& r : tg.region) {
    w.u32(static_cast<uint32_t>(r.size()));
    for (const Range& x : r) {
      w.u64(static_cast<uint64_t>(x.begin));
      w.u64(static_cast<uint64_t>(x.end));
    }
  }
  w.array(tg.n_parents);
  w.array(tg.depth);
  w.array(tg.child_begin);
  w.array(tg.children);
  w.array(tg.sources);
  w.array(tg.first_tile);
  w.array(tg.tile_count);

  std::string& bytes = w.bytes();
  uint64_t length = bytes.size() - (length_at + 8) + 8;  // the fields after it, checksum included
  for (int i = 0; i < 8; ++i) bytes[length_at + i] = static_cast<char>(length >> (8 * i));
  w.u64(bytes_hash(bytes.data(), bytes.size()));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create the TileGraph file");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(path + ": cannot write the TileGraph file");
}

TileGraph load_tile_graph(const std::string& path, const Plan& expected_for) {
  std::string data = read_whole_file(path);
  ByteReader r(data, path);
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    r.fail("not a grove TileGraph file (it does not start with GROVETG1)");
  r.skip(sizeof kMagic);
  std::string version = r.str(kMaxVersionBytes, "the grove version");
  if (version != kGroveVersion)
    r.fail("saved by grove " + version + ", this is grove " + kGroveVersion + "; plan the model again and save anew");
  uint64_t length = r.u64("the file length");
  if (length != r.remaining() || length < 8)
    r.fail(length > r.remaining() ? "truncated: " + std::to_string(r.remaining()) + " bytes after the header, " +
                                        std::to_string(length) + " expected"
                                  : "corrupt: the header's length (" + std::to_string(length) + ") disagrees with the file's (" +
                                        std::to_string(r.remaining()) + " bytes after the header)");
  uint64_t stored = read_le(data.data() + data.size() - 8, 8);
  if (stored != bytes_hash(data.data(), data.size() - 8)) r.fail("corrupt: the checksum does not match");
  r.limit_end(8);

  check_header(r, expected_for);
  TileGraph tg;
  tg.node = r.array<int32_t>("node");
  tg.region.resize(r.count(4, "region"));
  for (Region& region : tg.region) {
    uint32_t rank = r.u32("region");
    if (rank > kMaxRank) r.fail("corrupt: a region has rank " + std::to_string(rank));
    region.resize(rank);
    for (Range& x : region) {
      x.begin = r.i64("region");
      x.end = r.i64("region");
    }
  }
  tg.n_parents = r.array<int32_t>("n_parents");
  tg.depth = r.array<int32_t>("depth");
  tg.child_begin = r.array<int64_t>("child_begin");
  tg.children = r.array<int32_t>("children");
  tg.sources = r.array<int32_t>("sources");
  tg.first_tile = r.array<int32_t>("first_tile");
  tg.tile_count = r.array<int32_t>("tile_count");
  if (r.remaining() != 0) r.fail("corrupt: " + std::to_string(r.remaining()) + " unread bytes after the TileGraph");
  check_tiles(r, tg, expected_for.graph.nodes.size());
  plan_detail::fill_places(expected_for, tg);  // derived from the regions, so not stored
  return tg;
}

std::string tile_graph_difference(const TileGraph& a, const TileGraph& b) {
  std::string d;
  if (!(d = first_difference("node", a.node, b.node)).empty()) return d;
  if (a.region.size() != b.region.size()) return "region: " + std::to_string(a.region.size()) + " vs " + std::to_string(b.region.size()) + " entries";
  for (size_t t = 0; t < a.region.size(); ++t)
    if (a.region[t] != b.region[t]) return "region[" + std::to_string(t) + "]: " + region_str(a.region[t]) + " vs " + region_str(b.region[t]);
  if (!(d = first_difference("n_parents", a.n_parents, b.n_parents)).empty()) return d;
  if (!(d = first_difference("depth", a.depth, b.depth)).empty()) return d;
  if (!(d = first_difference("child_begin", a.child_begin, b.child_begin)).empty()) return d;
  if (!(d = first_difference("children", a.children, b.children)).empty()) return d;
  if (!(d = first_difference("sources", a.sources, b.sources)).empty()) return d;
  if (!(d = first_difference("first_tile", a.first_tile, b.first_tile)).empty()) return d;
  return first_difference("tile_count", a.tile_count, b.tile_count);
}

}  // namespace grove
