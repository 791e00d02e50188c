// Fuzz target: saved TileGraph bytes -> load_tile_graph, checked against the plan of a small
// fixed model (a Conv + Relu + MatMul chain), as `grove plan --load` would.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <onnx/onnx_pb.h>

#include "runtime/session.h"
#include "onnx/import.h"
#include "plan/plan_io.h"

namespace {

std::string tiny_model_bytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  auto value = [](onnx::ValueInfoProto* v, const char* name, std::initializer_list<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "x", {1, 2, 8, 8});
  value(g->add_output(), "y", {1, 4, 8, 4});
  auto init = [&](const char* name, std::initializer_list<int64_t> dims) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.01f * static_cast<float>(i % 7));
  };
  init("w", {4, 2, 3, 3});
  init("b", {8, 4});
  auto node = [&](const char* op, std::initializer_list<const char*> in, const char* out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(std::string(op) + "_" + out);
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  onnx::NodeProto* conv = node("Conv", {"x", "w"}, "c");
  onnx::AttributeProto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  node("Relu", {"c"}, "r");
  node("MatMul", {"r", "b"}, "y");
  return m.SerializeAsString();
}

struct Fixture {
  grove::Engine engine{{.threads = 1, .pin = false}};
  std::unique_ptr<grove::Session> session;
  std::shared_ptr<const grove::Plan> plan;
  std::string path = "/tmp/grove_fuzz_tilegraph_" + std::to_string(::getpid()) + ".bin";
  Fixture() {
    grove::Model model = grove::model_from_graph(grove::load_onnx_bytes(tiny_model_bytes(), "tiny.onnx"));
    session = std::make_unique<grove::Session>(engine, std::move(model));
    plan = plan_for(*session, {{"x", {1, 2, 8, 8}}});
  }
  ~Fixture() { ::unlink(path.c_str()); }
};

Fixture& the_fixture() {
  static Fixture fixture;
  return fixture;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& fixture = the_fixture();
  {
    std::ofstream f(fixture.path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    grove::TileGraph loaded = grove::load_tile_graph(fixture.path, *fixture.plan);
    // A file that loads must describe exactly the plan's graph (the loader checks every array).
    if (!grove::tile_graph_difference(loaded, fixture.plan->tiles).empty()) __builtin_trap();
  } catch (const grove::Error&) {
  }
  return 0;
}

// The seed: the plan's own file (written by `fuzz_tilegraph --write-seed PATH` from the replay
// main, see replay_main.cpp).
extern "C" void grove_fuzz_write_seed(const char* path) {
  grove::save_tile_graph(path, *the_fixture().plan);
}
