// The differential net under the fast path: every op with a tile rule has a generator
// (generated_cases_*.cpp), and each generated case must give the reference's numbers
//  - tile by tile on several grids, with inputs poisoned outside what `needs` names
//    (tiling_test_util.h), and
//  - as a one-node model on the tile runtime at 1, 2 and 3 workers, in both schedules,
//    with the convs channels-last and as written.
// Cases come from seeds; a failing case is written as an .onnx file and .npy inputs to
// $GROVE_GENERATED_FAILURES (default ./generated-failures), which `grove check` and
// `grove run` take as they are. GROVE_GENERATED_CASES sets the cases per family (default 200).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "generated_cases.h"
#include "graph_test_util.h"
#include "npy/npy.h"
#include "onnx/import.h"
#include "ops/op.h"
#include "ops/tiling.h"
#include "runtime/session.h"
#include "tiling_test_util.h"

using namespace grove;

namespace {

int cases_per_family() {
  const char* env = std::getenv("GROVE_GENERATED_CASES");
  return env ? std::max(1, std::atoi(env)) : 200;
}

uint32_t family_seed(const std::string& family, int index) {
  uint32_t h = 2166136261u;
  for (char ch : family) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  return h + static_cast<uint32_t>(index) * 7919u;
}

// Case `index` of a family: its ops in turn, so each op gets cases.
gen::Case make_case(const gen::Family& family, int index, uint32_t seed) {
  gen::Draw draw(seed);
  const std::string& op = family.ops[static_cast<size_t>(index) % family.ops.size()];
  gen::Case c = family.generate(draw, op);
  for (size_t i = 0; i < c.inputs.size(); ++i)  // a missing optional input has no name
    if (c.inputs[i].empty()) c.node.inputs[i].clear();
  while (!c.node.inputs.empty() && c.node.inputs.back().empty()) c.node.inputs.pop_back(), c.inputs.pop_back();
  c.constant.resize(c.inputs.size());
  return c;
}

// The node's key in tile_rule_keys(): the op type, after "domain:" off the ONNX domain.
std::string rule_key(const Node& n) { return n.domain.empty() ? n.op_type : n.domain + ":" + n.op_type; }

std::string describe(const gen::Case& c) {
  std::string s = c.node.op_type + " opset " + std::to_string(c.node.opset) + " inputs";
  for (const Tensor& t : c.inputs) s += " " + (t.empty() ? std::string("-") : std::string(dtype_name(t.dtype())) + shape_str(t.shape()));
  return s;
}

void to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t dim : t.shape()) p->add_dims(dim);
  p->set_raw_data(std::string(reinterpret_cast<const char*>(t.raw()), t.bytes()));
}

void declare(onnx::ValueInfoProto* v, const std::string& name, DType dtype, const Shape* shape) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(dtype));
  if (!shape) return;
  auto* sp = tt->mutable_shape();
  for (int64_t dim : *shape) sp->add_dim()->set_dim_value(dim);
}

// The case as a one-node ONNX model: constant inputs are initializers, the rest inputs.
std::string case_model(const gen::Case& c, const std::vector<Tensor>& outputs) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* opset = m.add_opset_import();
  opset->set_domain(c.node.domain);
  opset->set_version(c.node.opset);
  auto* g = m.mutable_graph();
  g->set_name("generated");
  auto* n = g->add_node();
  n->set_name(c.node.name);
  n->set_op_type(c.node.op_type);
  n->set_domain(c.node.domain);
  for (const auto& s : c.node.inputs) n->add_input(s);
  for (const auto& s : c.node.outputs) n->add_output(s);
  for (const auto& [key, a] : c.node.attrs) {
    auto* p = n->add_attribute();
    p->set_name(key);
    switch (a.kind) {
      case Attribute::Kind::i: p->set_type(onnx::AttributeProto::INT), p->set_i(a.i); break;
      case Attribute::Kind::f: p->set_type(onnx::AttributeProto::FLOAT), p->set_f(a.f); break;
      case Attribute::Kind::s: p->set_type(onnx::AttributeProto::STRING), p->set_s(a.s); break;
      case Attribute::Kind::ints:
        p->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
      case Attribute::Kind::floats:
        p->set_type(onnx::AttributeProto::FLOATS);
        for (float v : a.floats) p->add_floats(v);
        break;
      default: ADD_FAILURE() << "attribute kind not written: " << key;
    }
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].empty()) continue;
    if (c.constant[i]) to_proto(c.inputs[i], c.node.inputs[i], g->add_initializer());
    else declare(g->add_input(), c.node.inputs[i], c.inputs[i].dtype(), &c.inputs[i].shape());
  }
  for (size_t i = 0, k = 0; i < c.node.outputs.size(); ++i) {
    if (c.node.outputs[i].empty()) continue;
    declare(g->add_output(), c.node.outputs[i], outputs.at(k).dtype(), &outputs.at(k).shape());
    ++k;
  }
  return m.SerializeAsString();
}

TensorMap runtime_inputs(const gen::Case& c) {
  TensorMap in;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (!c.inputs[i].empty() && !c.constant[i]) in[c.node.inputs[i]] = c.inputs[i];
  return in;
}

// Writes the failing case where a person can rerun it: NAME.onnx and NAME.INPUT.npy.
void keep_failure(const gen::Case& c, const std::string& name, const std::vector<Tensor>& outputs) {
  const char* env = std::getenv("GROVE_GENERATED_FAILURES");
  const std::filesystem::path dir = env ? env : "generated-failures";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / (name + ".onnx"), std::ios::binary) << case_model(c, outputs);
  for (const auto& [input, t] : runtime_inputs(c)) write_npy((dir / (name + "." + input + ".npy")).string(), t);
  std::printf("generated case kept: %s\n", (dir / (name + ".onnx")).c_str());
}

std::vector<Tensor> reference_outputs(const gen::Case& c) {
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.empty() ? nullptr : &t);
  std::vector<Tensor> all = evaluate_node(c.node, in), named;
  for (size_t i = 0; i < all.size() && i < c.node.outputs.size(); ++i)
    if (!c.node.outputs[i].empty()) named.push_back(std::move(all[i]));
  return named;
}

// Failures recorded so far in the running test: a case failed when this grew.
int failures_so_far() { return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count(); }

class GeneratedOps : public ::testing::TestWithParam<gen::Family> {};

// Case `index` of a family with its reference outputs; false when the reference refuses it
// (a generator defect, reported by TilesMatchTheReference).
struct Drawn {
  uint32_t seed = 0;
  gen::Case c;
  std::vector<Tensor> want;
  std::string error;  // the reference's refusal
};
Drawn draw_case(const gen::Family& family, int index) {
  Drawn d;
  d.seed = family_seed(family.name, index);
  d.c = make_case(family, index, d.seed);
  try {
    d.want = reference_outputs(d.c);
  } catch (const Error& e) {
    d.error = e.what();
  }
  return d;
}
std::string trace_of(const gen::Family& family, int index, const Drawn& d) {
  return family.name + " case " + std::to_string(index) + " seed " + std::to_string(d.seed) + ": " + describe(d.c);
}

std::string family_name(const ::testing::TestParamInfo<gen::Family>& info) { return info.param.name; }

}  // namespace

TEST(GeneratedOps, EveryTileRuleHasAGenerator) {
  std::set<std::string> generated;
  for (const gen::Family& f : gen::all_families())
    for (const std::string& op : f.ops) EXPECT_TRUE(generated.insert(op).second) << op << " is in two families";
  std::set<std::string> keys;
  for (const std::string& key : tile_rule_keys()) {
    keys.insert(key);
    EXPECT_TRUE(generated.count(key)) << "tile rule " << key << " has no case generator";
  }
  for (const std::string& op : generated) EXPECT_TRUE(keys.count(op)) << op << " has a generator but no tile rule";
}

// Each case's tiles on several grids (the rule's finest, coarser ones with remainders, one
// whole tile), prepared and not, with inputs poisoned outside each tile's `needs`.
TEST_P(GeneratedOps, TilesMatchTheReference) {
  const gen::Family& family = GetParam();
  std::map<std::string, int> tiled;
  TileScratch worker;  // every case's tiles on one worker's scratch, as an engine's nodes share it
  for (int i = 0; i < cases_per_family(); ++i) {
    const Drawn d = draw_case(family, i);
    const gen::Case& c = d.c;
    const uint32_t seed = d.seed;
    SCOPED_TRACE(trace_of(family, i, d));
    if (!d.error.empty()) {
      ADD_FAILURE() << "the generator drew a case the reference refuses: " << d.error;
      continue;
    }
    const std::vector<Tensor>& want = d.want;
    if (!find_tile_rule(c.node)) continue;  // e.g. an op whose second output is used
    ++tiled[rule_key(c.node)];
    const int failed_before = failures_so_far();
    tiletest::check_tiling(c.node, c.inputs, c.tol, nullptr, &worker);
    if (failures_so_far() > failed_before) {
      keep_failure(c, family.name + "_" + std::to_string(seed), want);
      return;
    }
  }
  for (const std::string& op : family.ops)
    if (cases_per_family() >= static_cast<int>(family.ops.size())) EXPECT_GT(tiled[op], 0) << op << ": no case reached its tile rule";
}

// A sample of each family's cases as one-node models through the whole runtime.
// The grove.internal ops are left out: a model cannot hold them (the importer refuses the
// domain); the passes make them from the ONNX ops whose sessions run here.
TEST_P(GeneratedOps, SessionsMatchTheReference) {
  const gen::Family& family = GetParam();
  if (family.ops.front().starts_with(std::string(kGroveDomain) + ":")) GTEST_SKIP() << "the passes make these ops";
  std::vector<std::unique_ptr<Engine>> engines;
  for (int threads : {1, 2, 3}) engines.push_back(std::make_unique<Engine>(EngineOptions{.threads = threads, .pin = false}));
  const int count = std::max<int>(static_cast<int>(family.ops.size()), cases_per_family() / 8);
  for (int i = 0; i < count; ++i) {
    const Drawn d = draw_case(family, i);
    const gen::Case& c = d.c;
    const uint32_t seed = d.seed;
    SCOPED_TRACE(trace_of(family, i, d));
    if (!d.error.empty()) continue;  // reported by TilesMatchTheReference
    const std::vector<Tensor>& want = d.want;
    const std::string bytes = case_model(c, want);
    const TensorMap inputs = runtime_inputs(c);
    const int failed_before = failures_so_far();
    for (size_t e = 0; e < engines.size(); ++e)
      for (Schedule schedule : {Schedule::aspen, Schedule::barrier})
        for (ConvLayout layout : {ConvLayout::channels_last, ConvLayout::nchw}) {
          if (schedule == Schedule::barrier && layout == ConvLayout::nchw) continue;
          Session session = make_session(*engines[e], model_from_graph(load_onnx_bytes(bytes, "generated.onnx")),
                                         {.schedule = schedule, .conv_layout = layout, .tuning = "off"},
                                         {.poison_buffers = true});
          const TensorMap got = session.run(inputs);
          for (size_t k = 0, o = 0; k < c.node.outputs.size(); ++k) {
            if (c.node.outputs[k].empty()) continue;
            const Tensor& w = want[o++];
            const Tensor& g = got.at(c.node.outputs[k]);
            ASSERT_EQ(shape_str(g.shape()), shape_str(w.shape())) << c.node.outputs[k];
            const std::vector<double> gv = g.to_f64(), wv = w.to_f64();
            for (size_t j = 0; j < wv.size(); ++j)
              if (gv[j] != wv[j] && !tiletest::close(gv[j], wv[j], w.dtype() == DType::f32 ? std::max(c.tol, 1e-5) : 0)) {
                ADD_FAILURE() << c.node.outputs[k] << " element " << j << ": got " << gv[j] << ", want " << wv[j]
                              << " (threads " << e + 1 << (schedule == Schedule::barrier ? ", barrier" : "")
                              << (layout == ConvLayout::nchw ? ", nchw" : "") << ")";
                break;
              }
          }
        }
    if (failures_so_far() > failed_before) {
      keep_failure(c, family.name + "_session_" + std::to_string(seed), want);
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GeneratedOps, ::testing::ValuesIn(gen::all_families()), family_name);
