// TileGraph files: a save/load round trip gives identical arrays, and a file meant for
// another model, other shapes, other options or another grove version, or one that is
// truncated or has flipped bytes, is refused with an Error that says what is wrong.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "plan/plan_io.h"
#include "plan_test_util.h"

using namespace grove;
using namespace grove::test;

namespace {

// x:[N,4,10,10] -> Conv 3x3 p1 -> Relu -> Conv 3x3 -> MaxPool 2x2; the weights from `seed`.
std::string small_cnn(uint32_t seed) {
  OnnxBuilder b;
  b.input("x", kF32, {-1, 4, 10, 10}).output("y", kF32, {-1, 6, 4, 4});
  weight(b, "w1", {6, 4, 3, 3}, seed);
  weight(b, "w2", {6, 6, 3, 3}, seed + 1);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"}, "relu1");
  b.node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  auto& pool = b.node("MaxPool", {"c2"}, {"y"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  return b.bytes();
}

Model bound_model(uint32_t seed, int64_t batch) {
  return model_from_graph(load_onnx_bytes(small_cnn(seed), "small_cnn.onnx"), {{"x", {batch, 4, 10, 10}}});
}

PlanOptions options(int tiles_per_op, Schedule schedule = Schedule::aspen) {
  PlanOptions o;
  o.threads = 2;
  o.tiles_per_op = tiles_per_op;
  o.schedule = schedule;
  return o;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("grove_plan_io_" + std::to_string(::getpid()) + "_" + name)).string()) {}
  ~TempFile() { std::remove(path.c_str()); }
  std::string read() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::string& bytes) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

// The Error's message when loading `path` against `plan`; "" when it loads.
std::string load_error(const std::string& path, const Plan& plan) {
  try {
    load_tile_graph(path, plan);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Rewrites the checksum after an edit, so that the structural checks are what must catch it.
void reseal(std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i + 8 < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>(h >> (8 * i));
}

void put_le(std::string& bytes, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
}

// Byte offset of the element count of `children` in a file of small_cnn at batch 1 (one input
// of rank 4), following the layout in plan_io.h.
size_t children_count_offset(const TileGraph& tg) {
  size_t at = 8 + 4 + std::string(kGroveVersion).size() + 8 + 8;  // magic, version, length, hash
  at += 8 + 4 + 1 + 4 + 4 * 8;                                    // one input: x, rank 4
  at += 4 + 4 + 8 + 1;                                            // options
  at += 8 + 4 * tg.node.size();
  at += 8;
  for (const Region& r : tg.region) at += 4 + 16 * r.size();
  at += 8 + 4 * tg.n_parents.size() + 8 + 4 * tg.depth.size() + 8 + 8 * tg.child_begin.size();
  return at;
}

}  // namespace

TEST(PlanIo, RoundTripGivesIdenticalArrays) {
  Model model = bound_model(1, 1);
  for (Schedule s : {Schedule::aspen, Schedule::barrier})
    for (int k : {1, 3, 8}) {
      auto plan = make_plan(bound_graph(model), options(k, s));
      ASSERT_GT(plan->tiles.edge_count(), 0);
      TempFile file("roundtrip.tg");
      save_tile_graph(file.path, *plan);
      TileGraph loaded = load_tile_graph(file.path, *plan);
      EXPECT_EQ(tile_graph_difference(loaded, plan->tiles), "");
      EXPECT_EQ(loaded.node, plan->tiles.node);
      EXPECT_EQ(loaded.region, plan->tiles.region);
      EXPECT_EQ(loaded.children, plan->tiles.children);
      EXPECT_EQ(loaded.child_begin, plan->tiles.child_begin);
      EXPECT_EQ(loaded.depth, plan->tiles.depth);
      EXPECT_EQ(loaded.n_parents, plan->tiles.n_parents);
      EXPECT_EQ(loaded.sources, plan->tiles.sources);
      EXPECT_EQ(loaded.first_tile, plan->tiles.first_tile);
      EXPECT_EQ(loaded.tile_count, plan->tiles.tile_count);
    }
}

TEST(PlanIo, ModelHashIsStableAndSeesWeightsAndShapes) {
  std::string a = model_hash(bound_graph(bound_model(1, 1)));
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, model_hash(bound_graph(bound_model(1, 1))));
  EXPECT_NE(a, model_hash(bound_graph(bound_model(2, 1))));  // other weights
  EXPECT_NE(a, model_hash(bound_graph(bound_model(1, 2))));  // other batch
  Graph g = bound_graph(bound_model(1, 1));
  g.nodes[0].attrs["pads"].ints[0] = 0;  // one attribute value
  EXPECT_NE(a, model_hash(g));
}

TEST(PlanIo, RefusesAnotherModelShapesOrOptions) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  TempFile file("mismatch.tg");
  save_tile_graph(file.path, *plan);

  std::string other_weights = load_error(file.path, *make_plan(bound_graph(bound_model(2, 1)), options(4)));
  EXPECT_NE(other_weights.find(file.path + ": planned for model hash"), std::string::npos) << other_weights;
  EXPECT_NE(other_weights.find(model_hash(bound_graph(bound_model(2, 1)))), std::string::npos) << other_weights;

  std::string other_shapes = load_error(file.path, *make_plan(bound_graph(bound_model(1, 2)), options(4)));
  EXPECT_NE(other_shapes.find("planned for input shapes x=1x4x10x10, but this plan binds x=2x4x10x10"), std::string::npos)
      << other_shapes;

  std::string other_tiles = load_error(file.path, *make_plan(bound_graph(bound_model(1, 1)), options(5)));
  EXPECT_NE(other_tiles.find("--tiles-per-op 4, but this plan uses 5"), std::string::npos) << other_tiles;

  std::string other_schedule = load_error(file.path, *make_plan(bound_graph(bound_model(1, 1)), options(4, Schedule::barrier)));
  EXPECT_NE(other_schedule.find("--schedule aspen, but this plan uses barrier"), std::string::npos) << other_schedule;

  PlanOptions three = options(4);
  three.threads = 3;
  std::string other_threads = load_error(file.path, *make_plan(bound_graph(bound_model(1, 1)), three));
  EXPECT_NE(other_threads.find("--threads 2, but this plan uses 3"), std::string::npos) << other_threads;

  EXPECT_EQ(load_error(file.path, *plan), "");
}

TEST(PlanIo, RefusesAnotherVersionAndForeignFiles) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  TempFile file("version.tg");
  save_tile_graph(file.path, *plan);
  std::string bytes = file.read();
  ASSERT_EQ(bytes.substr(0, 8), "GROVETG1");
  ASSERT_EQ(bytes.substr(12, 5), kGroveVersion);  // after the magic and the u32 length
  bytes.replace(12, 5, "9.9.9");
  file.write(bytes);
  std::string err = load_error(file.path, *plan);
  EXPECT_NE(err.find("saved by grove 9.9.9, this is grove 0.1.0"), std::string::npos) << err;

  file.write("not a tile graph at all");
  err = load_error(file.path, *plan);
  EXPECT_NE(err.find("not a grove TileGraph file"), std::string::npos) << err;

  err = load_error(file.path + ".missing", *plan);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

TEST(PlanIo, RefusesEveryTruncation) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  TempFile file("truncated.tg");
  save_tile_graph(file.path, *plan);
  const std::string bytes = file.read();
  for (size_t n = 0; n < bytes.size(); ++n) {
    file.write(bytes.substr(0, n));
    std::string err = load_error(file.path, *plan);
    ASSERT_NE(err, "") << "a file cut to " << n << " of " << bytes.size() << " bytes loaded";
    ASSERT_EQ(err.rfind(file.path + ": ", 0), 0u) << err;
  }
  file.write(bytes + "x");
  EXPECT_NE(load_error(file.path, *plan).find("disagrees"), std::string::npos);
}

TEST(PlanIo, RefusesEveryFlippedByte) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  TempFile file("flipped.tg");
  save_tile_graph(file.path, *plan);
  const std::string bytes = file.read();
  for (size_t i = 0; i < bytes.size(); ++i)
    for (unsigned char mask : {0x01, 0x80}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      file.write(bad);
      std::string err = load_error(file.path, *plan);
      ASSERT_NE(err, "") << "byte " << i << " flipped by " << int(mask) << " loaded";
      ASSERT_EQ(err.rfind(file.path + ": ", 0), 0u) << err;
    }
}

TEST(PlanIo, DifferenceNamesTheFirstMismatch) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  TileGraph other = plan->tiles;
  EXPECT_EQ(tile_graph_difference(plan->tiles, other), "");
  other.children[1] += 1;
  EXPECT_EQ(tile_graph_difference(plan->tiles, other),
            "children[1]: " + std::to_string(plan->tiles.children[1]) + " vs " + std::to_string(other.children[1]));
}

TEST(PlanIo, RefusesInconsistentArraysEvenWithAValidChecksum) {
  auto plan = make_plan(bound_graph(bound_model(1, 1)), options(4));
  const TileGraph& tg = plan->tiles;
  TempFile file("structure.tg");
  save_tile_graph(file.path, *plan);
  const std::string bytes = file.read();
  size_t at = children_count_offset(tg);
  ASSERT_EQ(static_cast<unsigned char>(bytes[at]), tg.children.size());  // the layout is as documented
  ASSERT_LT(tg.children.size(), 256u);

  auto refused = [&](std::string edited) {
    reseal(edited);
    file.write(edited);
    return load_error(file.path, *plan);
  };
  std::string bad = bytes;
  put_le(bad, at, uint64_t{1} << 40, 8);  // a count that would allocate terabytes
  std::string err = refused(bad);
  EXPECT_NE(err.find("children claims 1099511627776 elements, more than the file holds"), std::string::npos) << err;

  bad = bytes;
  put_le(bad, at + 8, static_cast<uint64_t>(tg.size()), 4);  // children[0] past the last tile
  err = refused(bad);
  EXPECT_NE(err.find("children[0] = " + std::to_string(tg.size()) + " is not a tile"), std::string::npos) << err;

  bad = bytes;
  put_le(bad, at + 8, static_cast<uint64_t>(tg.children[0] == 0 ? 1 : 0), 4);  // another tile's child
  err = refused(bad);
  EXPECT_NE(err.find("disagrees with the child lists"), std::string::npos) << err;

  EXPECT_EQ(refused(bytes), "");  // resealing an unedited file changes nothing
}
