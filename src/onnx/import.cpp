#include "onnx/import.h"

#include <fcntl.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <set>
#include <sstream>

#include "ops/op_names.h"
#include "passes/passes.h"
#include "onnx/check_arity.h"
#include "onnx/external_data.h"
#include "ops/control_flow/control_flow.h"
#include "ops/op.h"

namespace grove {
namespace {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(what + ": cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A whole file mapped read-only: the model's bytes go from the page cache straight into the
// protobuf parser. (Reading through a stringstream copied a 438 MB BERT three times over:
// 2.2 GB of fresh pages and ~1.5 s of page faults before parsing began.)
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("load: cannot open '" + path + "'");
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      size_ = static_cast<size_t>(st.st_size);
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<const char*>(p);
    }
    ::close(fd);
    if (size_ > 0 && !data_) throw Error("load: cannot map '" + path + "'");
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  std::string_view bytes() const { return {data_ ? data_ : "", size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// The values one graph defines, each with how ("as an initializer", "by node 'n' (Relu)"), so
// a second definition is refused naming both. The rule is ONNX's checker's: graph inputs are
// unique in their graph but may shadow an outer name; an initializer may share its name with an
// input of its graph (an overridable default) but not with another initializer; a node output
// may not repeat any name of its graph or of an enclosing graph. Without it the later
// definition silently wins in one executor and the earlier in another.
struct Scope {
  std::string label;  // "the main graph", "subgraph 'body' of node 'loop' (Loop)"
  std::map<std::string, std::string> defined;
};

// What converting initializers needs besides the proto: where external data may be read
// from, and the memory budget the initializers are charged to.
struct ImportContext {
  std::filesystem::path base_dir;
  const Limits& limits;
  int64_t declared_bytes = 0;
  std::string path;                   // the model file, for messages
  std::map<std::string, int> opsets;  // the model's, shared by every subgraph
  // The graphs being converted, outermost first, each with the values defined in it so far:
  // ONNX's SSA rule forbids a subgraph's nodes to redefine any of them (see Scope).
  std::vector<const Scope*> scopes;
  // The node whose attributes are being converted: names the subgraphs in messages.
  std::string owner;
};

Graph convert_graph(onnx::GraphProto& gp, ImportContext& ctx, const std::string& label);

// Values stored in the typed field (float_data, int32_data, ...) that holds `dtype`.
int64_t typed_count(const onnx::TensorProto& tp, DType dtype) {
  switch (dtype) {
    case DType::f32: return tp.float_data_size();
    case DType::f64: return tp.double_data_size();
    case DType::i64: return tp.int64_data_size();
    case DType::u32: case DType::u64: return tp.uint64_data_size();
    default: return tp.int32_data_size();
  }
}

template <class Dst, class Field, class Conv>
void copy_field(Tensor& t, const Field& field, Conv conv) {
  Dst* p = reinterpret_cast<Dst*>(t.raw());
  for (int i = 0; i < field.size(); ++i) p[i] = conv(field.Get(i));
}

// widen_f16: float16 and bfloat16 initializers and attributes are widened to float32 once,
// here, for the ops to compute in; a tensor file (load_tensor_pb) keeps its 16-bit floats.
Tensor convert_tensor(const onnx::TensorProto& tp, ImportContext& ctx, bool widen_f16 = true) {
  const std::string& name = tp.name();
  DType dtype = dtype_from_onnx(tp.data_type());
  if (dtype == DType::undefined || dtype == DType::string)
    throw Unsupported("initializer '" + name + "' has unsupported data type " + std::to_string(tp.data_type()));
  Shape shape(tp.dims().begin(), tp.dims().end());
  int64_t count = 0;
  try {
    count = numel(shape);  // checked: negative dims and overflowing products are errors
  } catch (const Error& e) {
    throw e.prefixed("initializer '" + name + "': ");
  }
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  auto size_error = [&](int64_t held, const char* unit) {
    return Error("initializer '" + name + "' holds " + std::to_string(held) + " " + unit + ", shape " +
                 shape_str(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
                 std::to_string(unit[0] == 'b' ? bytes : count));
  };
  // The declared size must be backed by data actually in the file (or its external file)
  // before anything is allocated: a few bytes of dims may not claim gigabytes.
  std::optional<ExternalData> external;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    external.emplace(tp, ctx.base_dir);
    if (static_cast<int64_t>(external->length()) != bytes) throw size_error(static_cast<int64_t>(external->length()), "bytes");
  } else if (tp.has_raw_data()) {
    if (static_cast<int64_t>(tp.raw_data().size()) != bytes) throw size_error(static_cast<int64_t>(tp.raw_data().size()), "bytes");
  } else if (typed_count(tp, dtype) != count) {
    throw size_error(typed_count(tp, dtype), "values");
  }
  // 16-bit floats are widened to float32 below: charge what is finally held.
  const bool widen = widen_f16 && (dtype == DType::f16 || dtype == DType::bf16);
  charge_memory(ctx.declared_bytes, widen ? 2 * bytes : bytes, ctx.limits, "initializer '" + name + "'");
  Tensor t(dtype, shape);

  if (external) {
    external->read(t.raw());
  } else if (tp.has_raw_data()) {
    std::memcpy(t.raw(), tp.raw_data().data(), tp.raw_data().size());
  } else {
    auto same = [](auto v) { return v; };
    switch (dtype) {
      case DType::f32: copy_field<float>(t, tp.float_data(), same); break;
      case DType::f64: copy_field<double>(t, tp.double_data(), same); break;
      case DType::i64: copy_field<int64_t>(t, tp.int64_data(), same); break;
      case DType::i32: copy_field<int32_t>(t, tp.int32_data(), same); break;
      case DType::i16: copy_field<int16_t>(t, tp.int32_data(), [](int32_t v) { return static_cast<int16_t>(v); }); break;
      case DType::i8: copy_field<int8_t>(t, tp.int32_data(), [](int32_t v) { return static_cast<int8_t>(v); }); break;
      case DType::u8: copy_field<uint8_t>(t, tp.int32_data(), [](int32_t v) { return static_cast<uint8_t>(v); }); break;
      case DType::u16: case DType::f16: case DType::bf16:
        copy_field<uint16_t>(t, tp.int32_data(), [](int32_t v) { return static_cast<uint16_t>(v); }); break;
      case DType::boolean: copy_field<bool>(t, tp.int32_data(), [](int32_t v) { return v != 0; }); break;
      case DType::u32: copy_field<uint32_t>(t, tp.uint64_data(), [](uint64_t v) { return static_cast<uint32_t>(v); }); break;
      case DType::u64: copy_field<uint64_t>(t, tp.uint64_data(), same); break;
      default: throw Unsupported("initializer '" + name + "' has unsupported data type");
    }
  }

  if (widen) {
    Tensor wide(DType::f32, shape);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(t.raw());
    float* dst = wide.data<float>();
    auto to_f32 = dtype == DType::f16 ? f16_to_f32 : bf16_to_f32;
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = to_f32(src[i]);
    return wide;
  }
  return t;
}

void read_tensor_type(const onnx::TypeProto::Tensor& tt, ValueDecl& d) {
  d.dtype = dtype_from_onnx(tt.elem_type());
  if (!tt.has_shape()) return;
  d.has_shape = true;
  for (const auto& dim : tt.shape().dim()) {
    Dim x;
    if (dim.has_dim_value()) x.value = dim.dim_value();
    else x.param = dim.has_dim_param() ? dim.dim_param() : "?";
    d.dims.push_back(x);
  }
}

// An element type of a sequence: tensors only (a sequence of sequences or of maps is refused).
bool read_sequence_type(const onnx::TypeProto::Sequence& st, ValueDecl& d) {
  if (st.has_elem_type() && st.elem_type().value_case() != onnx::TypeProto::VALUE_NOT_SET &&
      !st.elem_type().has_tensor_type())
    return false;
  if (st.elem_type().has_tensor_type()) d.dtype = dtype_from_onnx(st.elem_type().tensor_type().elem_type());
  return true;
}

// A declared input or output: a tensor, a sequence of tensors, or an optional of either.
// An empty type (subgraph outputs often have one) says nothing: a tensor is assumed.
ValueDecl convert_value_info(const onnx::ValueInfoProto& vi, const std::string& path, const char* what) {
  ValueDecl d;
  d.name = vi.name();
  const onnx::TypeProto& type = vi.type();
  bool known = true;
  if (type.has_tensor_type()) {
    read_tensor_type(type.tensor_type(), d);
  } else if (type.has_sequence_type()) {
    d.kind = ValueKind::sequence;
    known = read_sequence_type(type.sequence_type(), d);
  } else if (type.has_optional_type()) {
    const onnx::TypeProto& inner = type.optional_type().elem_type();
    if (inner.has_tensor_type()) {
      d.kind = ValueKind::optional_tensor;
      read_tensor_type(inner.tensor_type(), d);
    } else if (inner.has_sequence_type()) {
      d.kind = ValueKind::optional_sequence;
      known = read_sequence_type(inner.sequence_type(), d);
    } else {
      known = false;
    }
  } else if (type.value_case() != onnx::TypeProto::VALUE_NOT_SET) {
    known = false;
  }
  if (!known)
    throw Unsupported(path + ": " + what + " '" + vi.name() +
                      "' is a map or a nested sequence; grove supports tensors, sequences of tensors and optionals");
  return d;
}

Attribute convert_attribute(onnx::AttributeProto& ap, ImportContext& ctx) {
  Attribute a;
  using AP = onnx::AttributeProto;
  switch (ap.type()) {
    case AP::INT: a.kind = Attribute::Kind::i; a.i = ap.i(); break;
    case AP::FLOAT: a.kind = Attribute::Kind::f; a.f = ap.f(); break;
    case AP::STRING: a.kind = Attribute::Kind::s; a.s = ap.s(); break;
    case AP::INTS: a.kind = Attribute::Kind::ints; a.ints.assign(ap.ints().begin(), ap.ints().end()); break;
    case AP::FLOATS: a.kind = Attribute::Kind::floats; a.floats.assign(ap.floats().begin(), ap.floats().end()); break;
    case AP::STRINGS: a.kind = Attribute::Kind::strings; a.strings.assign(ap.strings().begin(), ap.strings().end()); break;
    case AP::TENSOR: a.kind = Attribute::Kind::tensor; a.t = convert_tensor(ap.t(), ctx); break;
    case AP::GRAPH:
      a.kind = Attribute::Kind::graph;
      a.g = std::make_shared<const Graph>(
          convert_graph(*ap.mutable_g(), ctx, "subgraph '" + ap.name() + "' of " + ctx.owner));
      break;
    case AP::GRAPHS: a.kind = Attribute::Kind::graph; break;  // no op grove runs takes a list of graphs
    default: a.kind = Attribute::Kind::none; break;
  }
  return a;
}

// A Constant node's value as a tensor (value, value_float(s), value_int(s)).
Tensor constant_value(const Node& n) {
  if (n.has_attr("value")) return n.attr_tensor("value");
  if (n.has_attr("value_float")) return Tensor::scalar<float>(n.attr_float("value_float", 0));
  if (n.has_attr("value_int")) return Tensor::scalar<int64_t>(n.attr_int("value_int", 0));
  if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    return Tensor::from<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (n.has_attr("value_ints")) {
    auto v = n.attr_ints("value_ints");
    return Tensor::from<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  throw Unsupported(n.describe() + ": unsupported Constant attribute (only value, value_float(s), value_int(s))");
}

// What a model file asks grove to build, counted on the protobuf before any of it is
// converted: nodes, initializers (with Constant nodes' tensors) and the bytes those declare,
// in every subgraph. The bytes are summed in long double: many external tensors of up to 2^62
// declared bytes each cannot wrap the sum.
struct ProtoCounts {
  int64_t nodes = 0;
  int64_t initializers = 0;
  long double initializer_bytes = 0;
  long double largest_bytes = -1;  // the largest initializer, named in the error
  std::string largest;

  void add_tensor(const onnx::TensorProto& tp, long double bytes) {
    ++initializers;
    initializer_bytes += bytes;
    if (bytes > largest_bytes) largest_bytes = bytes, largest = tp.name();
  }
};

long double declared_tensor_bytes(const onnx::TensorProto& tp) {
  const DType dtype = dtype_from_onnx(tp.data_type());
  if (dtype == DType::undefined || dtype == DType::string) return 0;  // refused when converted
  int64_t count = 0;
  try {
    count = numel(Shape(tp.dims().begin(), tp.dims().end()));
  } catch (const Error&) {
    return 0;  // negative or overflowing dims: convert_tensor names the initializer
  }
  const long double bytes = static_cast<long double>(count) * static_cast<long double>(dtype_size(dtype));
  // A size the file's own data does not back is refused by convert_tensor, naming the
  // initializer, before anything is allocated: count what would be allocated. External data
  // counts as declared (its file is opened only when converted).
  if (tp.data_location() != onnx::TensorProto::EXTERNAL &&
      (tp.has_raw_data() ? static_cast<long double>(tp.raw_data().size()) != bytes : typed_count(tp, dtype) != count))
    return 0;
  // float16 and bfloat16 are widened to float32 when converted: what is finally held.
  return dtype == DType::f16 || dtype == DType::bf16 ? 2 * bytes : bytes;
}

// Nodes, initializers and their bytes in `graph` and every subgraph under it; throws when
// subgraphs nest deeper than the limit. The recursion is bounded twice: by the limit, and by
// protobuf's own nesting limit while parsing.
void count_proto(const onnx::GraphProto& graph, int depth, const Limits& limits, ProtoCounts& c) {
  if (depth > limits.max_subgraph_depth)
    throw Error("subgraphs nest deeper than " + std::to_string(limits.max_subgraph_depth) +
                " levels (the limit is Limits::max_subgraph_depth)");
  c.nodes += graph.node_size();
  for (const auto& tp : graph.initializer()) c.add_tensor(tp, declared_tensor_bytes(tp));
  for (const auto& node : graph.node())
    for (const auto& attr : node.attribute()) {
      if (attr.has_t()) c.add_tensor(attr.t(), declared_tensor_bytes(attr.t()));
      for (const auto& t : attr.tensors()) c.add_tensor(t, declared_tensor_bytes(t));
      if (attr.has_g()) count_proto(attr.g(), depth + 1, limits, c);
      for (const auto& g : attr.graphs()) count_proto(g, depth + 1, limits, c);
    }
}

// Refuses a model whose counts pass the limits, before its graph is built in memory.
void check_proto_counts(const onnx::ModelProto& model, const Limits& limits) {
  ProtoCounts c;
  count_proto(model.graph(), 0, limits, c);
  if (c.nodes > limits.max_nodes)
    throw Error("the model has " + std::to_string(c.nodes) + " nodes, over the limit of " +
                std::to_string(limits.max_nodes) + " (raise it with --max-nodes or Limits::max_nodes)");
  if (c.initializers > limits.max_initializers)
    throw Error("the model has " + std::to_string(c.initializers) + " initializers and constant tensors, over the limit of " +
                std::to_string(limits.max_initializers) + " (raise it with --max-initializers or Limits::max_initializers)");
  const int64_t limit = limits.memory_limit();
  if (c.initializer_bytes > static_cast<long double>(limit)) {
    char bytes[48], largest[48];
    std::snprintf(bytes, sizeof bytes, "%.0Lf", c.initializer_bytes);
    std::snprintf(largest, sizeof largest, "%.0Lf", c.largest_bytes);
    throw Error("the model's initializers and constant tensors declare " + std::string(bytes) + " bytes (the largest, '" +
                c.largest + "', " + largest + "), over the memory limit of " + std::to_string(limit) +
                " bytes (raise it with --max-memory or Limits::max_memory)");
  }
}

// Names a subgraph reads that it does not define itself: values of an enclosing graph.
std::vector<std::string> free_names(const Graph& body) {
  std::set<std::string> defined;
  for (const auto& in : body.inputs) defined.insert(in.name);
  for (const auto& [name, t] : body.initializers) defined.insert(name);
  for (const Node& n : body.nodes) defined.insert(n.outputs.begin(), n.outputs.end());
  std::set<std::string> free;
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) free.insert(name);
  };
  for (const Node& n : body.nodes) {
    for (const auto& in : n.inputs) read(in);
    for (const auto& c : n.captures) read(c);
  }
  for (const auto& out : body.outputs) read(out.name);
  return {free.begin(), free.end()};
}

// The outer-scope values a node's subgraphs read, together.
std::vector<std::string> outer_names_read(const Node& n) {
  std::set<std::string> names;
  for (const auto& [key, a] : n.attrs)
    if (a.g)
      for (auto& name : free_names(*a.g)) names.insert(name);
  return {names.begin(), names.end()};
}

// Records `name` as defined `how` in `scope`; throws naming both definitions when the name is
// already defined there or, with `outer_too`, in an enclosing graph. Empty names (omitted
// optional outputs) define nothing.
void define_value(Scope& scope, const ImportContext& ctx, const std::string& name, const std::string& how,
            bool outer_too) {
  if (name.empty()) return;
  auto twice = [&](const Scope& other, const std::string& first) {
    const bool same = &other == &scope;
    return Error(ctx.path + ": value '" + name + "' is defined twice: " + how + (same ? "" : " in " + scope.label) +
                 " and " + first + (same ? "" : " in " + other.label));
  };
  if (auto it = scope.defined.find(name); it != scope.defined.end()) throw twice(scope, it->second);
  if (outer_too)
    for (auto s = ctx.scopes.rbegin(); s != ctx.scopes.rend(); ++s)
      if (*s != &scope)
        if (auto it = (*s)->defined.find(name); it != (*s)->defined.end()) throw twice(**s, it->second);
  scope.defined.emplace(name, how);
}

// Makes `scope` the innermost while a graph converts, and restores the enclosing graph's
// owner afterwards, also when conversion throws.
class ScopeEntry {
 public:
  ScopeEntry(ImportContext& ctx, const Scope& scope) : ctx_(ctx), owner_(ctx.owner) { ctx.scopes.push_back(&scope); }
  ~ScopeEntry() {
    ctx_.scopes.pop_back();
    ctx_.owner = owner_;
  }
  ScopeEntry(const ScopeEntry&) = delete;
  ScopeEntry& operator=(const ScopeEntry&) = delete;

 private:
  ImportContext& ctx_;
  std::string owner_;
};

// A GraphProto as a Graph: the model's main graph (`label` empty) or a subgraph of one node.
Graph convert_graph(onnx::GraphProto& gp, ImportContext& ctx, const std::string& label) {
  const bool top_level = label.empty();
  Scope scope{top_level ? "the main graph" : label, {}};
  ScopeEntry entry(ctx, scope);
  for (const auto& vi : gp.input()) define_value(scope, ctx, vi.name(), "as a graph input", false);
  std::set<std::string> initializers;
  for (const auto& tp : gp.initializer()) {
    if (!initializers.insert(tp.name()).second)
      throw Error(ctx.path + ": value '" + tp.name() + "' is defined twice: as an initializer and as an initializer");
    // An initializer named like an input of its graph is that input's default, not a second value.
    const auto it = scope.defined.find(tp.name());
    if (it == scope.defined.end() || it->second != "as a graph input")
      define_value(scope, ctx, tp.name(), "as an initializer", false);
  }
  Graph g;
  g.path = ctx.path;
  g.name = gp.name();
  g.opsets = ctx.opsets;
  try {
    // Each initializer's protobuf bytes are dropped once converted, so the model is held
    // about once, not twice, at the peak of loading.
    for (onnx::TensorProto& tp : *gp.mutable_initializer()) {
      g.initializers[tp.name()] = convert_tensor(tp, ctx);
      delete tp.release_raw_data();
    }
  } catch (const Error& e) {
    throw e.prefixed(ctx.path + ": ");
  }
  for (const auto& vi : gp.input()) {
    ValueDecl d = convert_value_info(vi, ctx.path, "input");
    // A subgraph's inputs are its formal parameters, never overridable defaults.
    (top_level && g.initializers.count(vi.name()) ? g.defaults : g.inputs).push_back(d);
  }
  for (const auto& vi : gp.output()) g.outputs.push_back(convert_value_info(vi, ctx.path, "output"));

  int index = 0;
  for (auto& np : *gp.mutable_node()) {
    Node n;
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    ++index;
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    auto op = g.opsets.find(n.domain);
    n.opset = op == g.opsets.end() ? 0 : op->second;
    try {
      ctx.owner = n.describe();
      for (auto& ap : *np.mutable_attribute()) {
        // Names starting with grove_ are reserved for grove: a model carrying one is refused, so
        // nothing in a model can pass for a plan decision (those live in Node::decisions,
        // graph/node_decisions.h, which no attribute reaches).
        if (ap.name().rfind("grove_", 0) == 0)
          throw Error(n.describe() + ": attribute '" + ap.name() + "' is reserved for grove's passes");
        n.attrs[ap.name()] = convert_attribute(ap, ctx);
      }
      if (is_control_flow(n)) check_control_flow(n);
      // After the attributes: a node's own subgraphs see the names defined before it, not its
      // outputs (as ONNX's checker has it).
      for (const auto& out : n.outputs) define_value(scope, ctx, out, "by " + n.describe(), true);
      if (n.op_type == kConstant && n.domain.empty()) {
        if (n.outputs.size() != 1) throw Error(n.describe() + ": Constant must have one output");
        g.initializers[n.outputs[0]] = constant_value(n);
        continue;
      }
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.rfind(ctx.path + ": ", 0) == 0) throw;  // from a subgraph, already prefixed
      throw e.prefixed(ctx.path + ": " + (msg.rfind("node '", 0) == 0 ? "" : n.describe() + ": "));
    }
    n.captures = outer_names_read(n);
    g.nodes.push_back(std::move(n));
  }
  sort_topologically(g);
  widen_float16(g);
  return g;
}

}  // namespace

Graph load_onnx_bytes(std::string_view bytes, const std::string& path, const Limits& limits) {
  onnx::ModelProto model;
  if (bytes.empty()) throw Error(path + ": file is empty, not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    throw Error(path + ": models over 2 GiB must keep their weights in external data files");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw Error(path + ": not a valid ONNX model (the protobuf is truncated or corrupt)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    throw Error(path + ": the model has no graph nodes (truncated or not an ONNX model?)");

  try {
    check_proto_counts(model, limits);
  } catch (const Error& e) {
    throw e.prefixed(path + ": ");
  }
  ImportContext ctx{std::filesystem::path(path).parent_path(), limits};
  Graph g;
  g.name = model.graph().name();
  for (const auto& op : model.opset_import()) {
    // Versions start at 1; a 0 or negative version would find no operator schema at all.
    if (op.version() < 1 || op.version() > 10'000)
      throw Error(path + ": opset_import of domain '" + op.domain() + "' has an invalid version " +
                  std::to_string(op.version()));
    g.opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = static_cast<int>(op.version());
  }
  if (!g.opsets.count("")) g.opsets[""] = model.ir_version() >= 3 ? 1 : 1;

  ctx.path = path;
  ctx.opsets = g.opsets;
  Graph converted = convert_graph(*model.mutable_graph(), ctx, "");
  converted.path = path;
  converted.name = g.name;
  converted.opsets = g.opsets;
  for (const auto& prop : model.metadata_props()) converted.metadata[prop.key()] = prop.value();
  converted.producer_name = model.producer_name();
  converted.producer_version = model.producer_version();
  converted.domain = model.domain();
  converted.description = model.doc_string();
  converted.graph_description = model.graph().doc_string();
  converted.model_version = model.model_version();
  check_supported_ops(converted);
  check_node_arity(converted);
  return converted;
}

Graph load_onnx(const std::string& path, const Limits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not an ONNX model");
  MappedFile file(path);
  try {
    return load_onnx_bytes(file.bytes(), path, limits);
  } catch (const std::bad_alloc&) {
    throw Error(path + ": out of memory while loading (see --max-memory in docs/security.md)");
  }
}

Tensor load_tensor_pb(const std::string& path) {
  std::string bytes = read_file(path, "load tensor");
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) throw Error(path + ": not a valid serialized ONNX TensorProto");
  try {
    Limits limits;
    ImportContext ctx{std::filesystem::path(path).parent_path(), limits};
    return convert_tensor(tp, ctx, false);
  } catch (const Error& e) {
    throw e.prefixed(path + ": ");
  }
}

namespace {

Value convert_sequence(const onnx::SequenceProto& sp, DType declared, ImportContext& ctx) {
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.tensor_values_size() > 0)
    throw Unsupported("a sequence of non-tensors is not supported");
  std::vector<Tensor> items;
  for (const auto& tp : sp.tensor_values()) items.push_back(convert_tensor(tp, ctx, false));
  DType element = items.empty() ? declared : items.front().dtype();
  return Value::sequence(element == DType::undefined ? DType::f32 : element, std::move(items));
}

}  // namespace

Value load_value_pb(const std::string& path, const ValueDecl& decl) {
  if (decl.kind == ValueKind::tensor) return load_tensor_pb(path);
  std::string bytes = read_file(path, "load value");
  Limits limits;
  ImportContext ctx{std::filesystem::path(path).parent_path(), limits};
  try {
    if (decl.kind == ValueKind::sequence) {
      onnx::SequenceProto sp;
      if (!sp.ParseFromString(bytes)) throw Error("not a valid serialized ONNX SequenceProto");
      return convert_sequence(sp, decl.dtype, ctx);
    }
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes)) throw Error("not a valid serialized ONNX OptionalProto");
    if (op.has_tensor_value()) return convert_tensor(op.tensor_value(), ctx, false);
    if (op.has_sequence_value()) return convert_sequence(op.sequence_value(), decl.dtype, ctx);
    return Value();
  } catch (const Error& e) {
    throw e.prefixed(path + ": ");
  }
}

namespace {

// Op type -> names of its nodes the registry lacks, in `g` and every subgraph under it.
void collect_unsupported(const Graph& g, std::map<std::string, std::vector<std::string>>& missing) {
  const OpRegistry& reg = OpRegistry::builtin();
  for (const auto& n : g.nodes) {
    if (!reg.find(n)) missing[n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type].push_back(n.name);
    for (const auto& [key, a] : n.attrs)
      if (a.g) collect_unsupported(*a.g, missing);
  }
}

}  // namespace

void check_supported_ops(const Graph& g) {
  std::map<std::string, std::vector<std::string>> missing;
  collect_unsupported(g, missing);
  if (missing.empty()) return;
  std::string msg = g.path + ": unsupported ops:";
  for (const auto& [op, names] : missing) {
    msg += "\n  " + op + " (" + std::to_string(names.size()) + (names.size() == 1 ? " node: " : " nodes: ");
    for (size_t i = 0; i < names.size() && i < 5; ++i) msg += (i ? ", " : "") + names[i];
    if (names.size() > 5) msg += ", ...";
    msg += ")";
  }
  throw Unsupported(msg);
}

}  // namespace grove
