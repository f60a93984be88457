#include "compiler/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "baton/core/check.h"
#include "baton/core/file.h"
#include "compiler/onnx_tensor.h"
#include "compiler/passes.h"
#include "ops/constant.h"
#include "runtime/kernel.h"

namespace baton::compiler {

std::string IrNode::describe() const {
  std::string out = op_type + " node '" + name + "'";
  return out;
}

bool touches_data_dependent_size(const Graph& graph, const IrNode& node) {
  if (!graph.symbols.has_data_symbols()) return false;
  for (const std::vector<int>* ids : {&node.inputs, &node.outputs}) {
    for (int id : *ids) {
      if (id < 0) continue;
      for (sym::SizeExpr e : graph.values[id].dims) {
        if (graph.symbols.uses_data_symbol(e)) return true;
      }
    }
  }
  return false;
}

const ops::AttrValue& IrNode::attr(std::string_view attr_name) const {
  static const ops::AttrValue kMissing = ops::AttrValue::absent(ops::AttrKind::Int);
  const int index = def == nullptr ? -1 : def->attr_index(attr_name);
  if (index < 0 || static_cast<size_t>(index) >= attrs.size()) return kMissing;
  return attrs[static_cast<size_t>(index)];
}

namespace {

// Any opset is read; each operator's definition decides from which opset Baton runs it (the
// registry refuses a node whose op has no definition at the model's opset, naming the first
// opset it supports).
constexpr int kMinOpset = 1;
constexpr int kMaxOpset = 21;

// Protobuf parses at most 2^31 - 1 bytes; a larger model keeps its weights in external data.
constexpr uint64_t kMaxModelBytes = INT_MAX - 1;
constexpr std::string_view kProtobufLimitNote =
    "ONNX protobufs are limited to 2 GiB (store the weights as external data: "
    "onnx.save_model(model, path, save_as_external_data=True))";

std::string attr_type_name(int type) {
  return onnx::AttributeProto_AttributeType_Name(
      static_cast<onnx::AttributeProto_AttributeType>(type));
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string source, std::filesystem::path base_dir,
           const ImportOptions& options)
      : model_(model), base_dir_(std::move(base_dir)), options_(options) {
    graph_.source = std::move(source);
  }

  Result<Graph> run() {
    BATON_CHECK_OR_RETURN(model_.has_graph(), InvalidArgument,
                          "'{}' is an ONNX model without a graph", graph_.source);
    BATON_TRY(read_opsets());
    graph_.producer = model_.producer_name();
    if (!model_.producer_version().empty()) graph_.producer += " " + model_.producer_version();
    const onnx::GraphProto& g = model_.graph();
    for (const auto& init : g.initializer()) BATON_TRY(add_initializer(init));
    BATON_CHECK_OR_RETURN(
        g.sparse_initializer_size() == 0, NotSupported,
        "'{}' has {} sparse initializers (GraphProto field "
        "'sparse_initializer', the first '{}'), which Baton does not support",
        graph_.source, g.sparse_initializer_size(),
        g.sparse_initializer_size() > 0 ? g.sparse_initializer(0).values().name() : std::string());
    for (const auto& shape : options_.input_shapes) {
      const bool known = std::any_of(g.input().begin(), g.input().end(), [&](const auto& in) {
        return in.name() == shape.name && by_name_.count(in.name()) == 0;
      });
      BATON_CHECK_OR_RETURN(
          known, InvalidArgument,
          "a shape was given for '{}', which is not an input of '{}' (inputs: {})", shape.name,
          graph_.source, input_names());
    }
    for (const auto& input : g.input()) BATON_TRY(add_input(input));
    BATON_TRY(check_dims_used());
    // Every value name the nodes write: add_contrib_node's own names must not take one.
    for (const auto& n : g.node()) model_names_.insert(n.output().begin(), n.output().end());
    for (int i = 0; i < g.node_size(); ++i) BATON_TRY(add_any_node(g.node(i), i));
    for (const auto& output : g.output()) {
      auto it = by_name_.find(output.name());
      BATON_CHECK_OR_RETURN(
          it != by_name_.end(), InvalidArgument,
          "graph output '{}' of '{}' is produced by no node, initializer or input", output.name(),
          graph_.source);
      graph_.outputs.push_back(it->second);
    }
    BATON_CHECK_OR_RETURN(!graph_.outputs.empty(), InvalidArgument,
                          "'{}' has no graph outputs (GraphProto field 'output' is empty)",
                          graph_.source);
    BATON_TRY(report_unsupported());
    BATON_TRY(shape_error());
    return std::move(graph_);
  }

 private:
  Status read_opsets() {
    int opset = -1;
    for (const auto& imp : model_.opset_import()) {
      // The version is an int64 in the file: check it before narrowing (2^32 + 17 is not 17).
      BATON_CHECK_OR_RETURN(imp.version() >= 0 && imp.version() <= INT_MAX, InvalidArgument,
                            "'{}': ModelProto field 'opset_import' gives domain '{}' version {}, "
                            "which is no ONNX opset",
                            graph_.source, imp.domain(), imp.version());
      if (imp.domain().empty() || imp.domain() == "ai.onnx")
        opset = static_cast<int>(imp.version());
      else
        other_domains_[imp.domain()] = static_cast<int>(imp.version());
    }
    // A model may use only other domains (training ops, custom ops); its nodes are then checked
    // one by one and reported as unsupported with their domains.
    if (opset <= 0) {
      graph_.opset = 0;
      return Status();
    }
    BATON_CHECK_OR_RETURN(opset >= kMinOpset && opset <= kMaxOpset, NotSupported,
                          "'{}' uses ai.onnx opset {}; Baton supports opsets {} to {}. Re-export "
                          "the model with an opset in that range (torch.onnx.export(..., "
                          "opset_version=17)) or convert it with onnx.version_converter",
                          graph_.source, opset, kMinOpset, kMaxOpset);
    graph_.opset = opset;
    return Status();
  }

  Status add_initializer(const onnx::TensorProto& init) {
    BATON_ASSIGN_OR_RETURN(OnnxTensor t,
                           read_onnx_tensor(init, base_dir_, "initializer '" + init.name() + "'"));
    IrValue v;
    v.name = init.name();
    v.dtype = t.dtype;
    v.sizes = std::move(t.sizes);
    v.shape_known = true;
    v.constant = std::move(t.data);
    const int id = graph_.add_value(std::move(v));
    by_name_[init.name()] = id;
    return Status();
  }

  const InputShape* shape_override(const std::string& name) const {
    for (const auto& s : options_.input_shapes) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  std::string input_names() const {
    std::string out;
    for (const auto& in : model_.graph().input()) {
      if (by_name_.count(in.name()) && graph_.values[by_name_.at(in.name())].constant) continue;
      out += (out.empty() ? "'" : ", '") + in.name() + "'";
    }
    return out.empty() ? "none" : out;
  }

  Status add_input(const onnx::ValueInfoProto& input) {
    // Older exporters list initializers among the inputs too; the initializer wins.
    if (by_name_.count(input.name())) return Status();
    const std::string where = fmt::format("input '{}' of '{}'", input.name(), graph_.source);
    BATON_CHECK_OR_RETURN(input.type().has_tensor_type(), NotSupported,
                          "{} is not a tensor (sequences, maps and optionals are not supported)",
                          where);
    const auto& tt = input.type().tensor_type();
    BATON_CHECK_OR_RETURN(is_valid_dtype(tt.elem_type()), NotSupported,
                          "{} has ONNX element type {} ({}), which Baton does not support", where,
                          tt.elem_type(), onnx_elem_type_name(tt.elem_type()));
    IrValue v;
    v.name = input.name();
    v.dtype = static_cast<DType>(tt.elem_type());
    const InputShape* given = shape_override(input.name());
    if (!tt.has_shape()) {
      if (given == nullptr) {
        // Reported after every input and node was looked at (shape_error()).
        shape_problems_.push_back(
            {where + " has no shape", fmt::format("--shape {}=D0xD1x...", input.name()), {}});
      } else {
        v.sizes = given->sizes;
      }
    } else {
      const auto& dims = tt.shape().dim();
      if (given != nullptr) {
        BATON_CHECK_OR_RETURN(given->sizes.size() == static_cast<size_t>(dims.size()),
                              InvalidArgument, "{} has rank {} but the given shape {} has rank {}",
                              where, dims.size(), shape_to_string(given->sizes),
                              given->sizes.size());
      }
      std::vector<std::string> symbolic;  // "'batch' at axis 0", one per dimension to fix
      // The symbol of each dimension --dim made dynamic.
      std::vector<std::optional<sym::SizeExpr>> dynamic(dims.size());
      for (int d = 0; d < dims.size(); ++d) {
        const auto& dim = dims.Get(d);
        if (dim.has_dim_value()) {
          BATON_CHECK_OR_RETURN(
              given == nullptr || given->sizes[d] == dim.dim_value(), InvalidArgument,
              "{}: the given shape {} sets dimension {} to {} but the model "
              "fixes it at {}",
              where, shape_to_string(given->sizes), d, given->sizes[d], dim.dim_value());
          v.sizes.push_back(dim.dim_value());
        } else if (given == nullptr && declared(dim.dim_param()) != nullptr &&
                   declared(dim.dim_param())->min == declared(dim.dim_param())->max &&
                   declared(dim.dim_param())->min >= 1) {
          // A range of one size (--dim batch=1..1) is that size: the dimension is static. As a
          // symbol it stayed "batch" on the inputs while shape inference folded what it reaches
          // to the number, so an output no longer matched its input (a state pair was refused).
          v.sizes.push_back(declared(dim.dim_param())->min);
          fixed_dims_.insert(dim.dim_param());
        } else if (given == nullptr && declared(dim.dim_param()) != nullptr) {
          BATON_ASSIGN_OR_RETURN(sym::SizeExpr e, symbol_for(*declared(dim.dim_param())));
          dynamic[d] = e;
          v.sizes.push_back(graph_.symbols.symbol(graph_.symbols.node(e).value).max);
        } else if (given == nullptr) {
          symbolic.push_back(fmt::format("'{}' at axis {}", dim.dim_param(), d));
          v.sizes.push_back(1);  // a placeholder: the compile stops before using it
        } else {
          v.sizes.push_back(given->sizes[d]);
        }
      }
      if (!symbolic.empty()) {
        // The hint keeps the sizes the model fixes and names the ones to choose.
        std::string list;
        for (size_t i = 0; i < symbolic.size(); ++i) {
          list += (i == 0 ? "" : i + 1 == symbolic.size() ? " and " : ", ") + symbolic[i];
        }
        shape_problems_.push_back(
            {fmt::format("{} has {} {}", where,
                         symbolic.size() == 1 ? "a symbolic dimension" : "symbolic dimensions",
                         list),
             fmt::format("--shape {}={}", input.name(), shape_hint(dims)), dim_fixes(dims)});
      }
      if (std::any_of(dynamic.begin(), dynamic.end(),
                      [](const auto& e) { return e.has_value(); })) {
        for (int d = 0; d < dims.size(); ++d) {
          v.dims.push_back(dynamic[d] ? *dynamic[d] : graph_.symbols.constant(v.sizes[d]));
        }
      }
    }
    for (int64_t s : v.sizes) {
      BATON_CHECK_OR_RETURN(s >= 0, InvalidArgument, "{} has a negative dimension in {}", where,
                            shape_to_string(v.sizes));
    }
    BATON_CHECK_OR_RETURN(v.sizes.size() <= static_cast<size_t>(kMaxRank), NotSupported,
                          "{} has rank {} ({}); Baton supports rank <= {}", where, v.sizes.size(),
                          shape_to_string(v.sizes), kMaxRank);
    BATON_CHECK_OR_RETURN(checked_nbytes(v.dtype, v.sizes).has_value(), InvalidArgument,
                          "{} of shape {}: its size in bytes overflows (or the product of its "
                          "nonzero dimensions does); check the dimensions",
                          where, shape_to_string(v.sizes));
    v.shape_known = true;
    const int id = graph_.add_value(std::move(v));
    by_name_[input.name()] = id;
    graph_.inputs.push_back(id);
    return Status();
  }

  Result<ops::NamedAttr> convert_attribute(const onnx::AttributeProto& a, const IrNode& node) {
    ops::NamedAttr out;
    out.name = a.name();
    out.onnx_type = attr_type_name(a.type());
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        out.value = ops::AttrValue::of_int(a.i());
        break;
      case onnx::AttributeProto::FLOAT:
        out.value = ops::AttrValue::of_float(a.f());
        break;
      case onnx::AttributeProto::STRING:
        out.value = ops::AttrValue::of_string(a.s());
        break;
      case onnx::AttributeProto::INTS:
        out.value = ops::AttrValue::of_ints({a.ints().begin(), a.ints().end()});
        break;
      case onnx::AttributeProto::FLOATS:
        out.value = ops::AttrValue::of_floats({a.floats().begin(), a.floats().end()});
        break;
      case onnx::AttributeProto::STRINGS: {
        // Baton's attributes have no list of strings: the list is carried as one string joined
        // by ',' (an attribute of kind String in the definition, which splits it again). The
        // recurrent layers' `activations` is the one such attribute.
        std::string joined;
        for (const std::string& s : a.strings()) joined += (joined.empty() ? "" : ",") + s;
        out.value = ops::AttrValue::of_string(std::move(joined));
        break;
      }
      case onnx::AttributeProto::TENSOR: {
        BATON_ASSIGN_OR_RETURN(
            OnnxTensor t,
            read_onnx_tensor(a.t(), base_dir_,
                             fmt::format("attribute '{}' of {}", a.name(), node.describe())));
        out.value = ops::AttrValue::of_tensor({t.dtype, std::move(t.sizes), std::move(t.data)});
        break;
      }
      default:
        break;  // graphs, sparse tensors, type protos: no definition of Baton's takes them
    }
    return out;
  }

  // Why the ops users meet most often have no kernel, and what to do instead: the reason appended
  // to the node's line ("" for the others).
  static std::string why_unsupported(const IrNode& node) {
    if (!node.domain.empty()) return "";
    const std::string& op = node.op_type;
    if (op == "Scan") {
      return ": Scan is not compiled (a Baton program runs every node on every call; If and "
             "Loop are, when their condition and trip count are known at compile time); export "
             "the model with the scan unrolled, e.g. by the tracing exporter, or keep this part "
             "outside the program";
    }
    if (op == "Unique" || op == "NonMaxSuppression" || op == "Compress") {
      return ": its output size depends on the input's values; of such ops Baton runs only "
             "NonZero so far (a data-dependent size, docs/dynamic_shapes.md)";
    }
    return "";
  }

  // A node whose op has a definition and a CPU kernel gets its attributes bound; any other is
  // recorded as unsupported, and run() reports every such node at once.
  Status bind(IrNode& node, std::span<const ops::NamedAttr> raw) {
    const std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    const ops::OpDef* def = ops::op_registry().find(node.op_type, node.domain, node.opset);
    // Constant nodes are folded here, so they need no kernel.
    const bool folded_here = node.domain.empty() && node.op_type == "Constant";
    const bool has_kernel =
        folded_here || runtime::kernel_registry().find(node.op_type, node.domain) != nullptr;
    // A node of an If's branch waits: inference reports it only if its branch is kept.
    auto refuse = [&](std::string why) {
      if (node.guards.empty()) {
        unsupported_.push_back(std::move(why));
      } else {
        node.unsupported = std::move(why);
        node.def = nullptr;
      }
      return Status();
    };
    if (def == nullptr || !has_kernel) {
      const ops::OpDef* later = ops::op_registry().earliest(node.op_type, node.domain);
      if (later != nullptr && has_kernel) {
        return refuse(fmt::format(
            "node '{}': op '{}' (domain '{}') is supported from opset {}, the model uses opset {}",
            node.name, node.op_type, domain, later->since_version, node.opset));
      }
      return refuse(fmt::format("node '{}': op '{}' (domain '{}', opset {}) has no Baton kernel{}",
                                node.name, node.op_type, domain, node.opset,
                                why_unsupported(node)));
    }
    node.def = def;
    auto attrs = ops::bind_attributes(*def, raw, node.describe());
    if (!attrs.ok()) {
      if (attrs.code() != Error::NotSupported) return attrs.status();
      return refuse(attrs.status().message());
    }
    node.attrs = std::move(attrs).value();
    return Status();
  }

  // Constant nodes become compile-time values; they never reach the program as kernels.
  Status fold_constant_node(IrNode& node, int output) {
    std::vector<ops::OutputInfo> out(1);
    BATON_TRY(ops::infer(*node.def, node.name, {}, node.attrs, out));
    ops::TensorValue t = ops::constant_value(node.attrs, *node.def);
    IrValue& v = graph_.values[output];
    v.dtype = t.dtype;
    v.sizes = std::move(t.sizes);
    v.constant = std::move(t.data);
    v.shape_known = true;
    return Status();
  }

  // A node of the model or of a subgraph: com.microsoft ops as standard ones, If and Loop
  // folded or unrolled, the rest as they are.
  Status add_any_node(const onnx::NodeProto& proto, int index) {
    if (proto.domain() == "com.microsoft") {
      BATON_ASSIGN_OR_RETURN(const bool expanded, add_contrib_node(proto, index));
      if (expanded) return Status();
    }
    if ((proto.domain().empty() || proto.domain() == "ai.onnx") && proto.op_type() == "If") {
      return add_if(proto, index);
    }
    if ((proto.domain().empty() || proto.domain() == "ai.onnx") && proto.op_type() == "Loop") {
      return add_loop(proto, index);
    }
    return add_node(proto, index);
  }

  // A constant of our own (a Loop's iteration number, its condition): a value named `name`.
  int add_constant(const std::string& name, DType dtype, const void* bytes, size_t size) {
    IrValue v;
    v.name = name;
    v.dtype = dtype;
    v.shape_known = true;
    v.constant = std::make_shared<const std::vector<uint8_t>>(
        static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    const int id = graph_.add_value(std::move(v));
    by_name_[name] = id;
    return id;
  }

  // A value name of our own, unused by the model.
  std::string fresh_name(std::string n) const {
    while (by_name_.count(n) > 0 || model_names_.count(n) > 0) n += "_";
    return n;
  }

  // A one-output node of ours (Identity, Unsqueeze, Concat) over value names, writing `out`.
  Status add_helper(const std::string& op, const std::string& node_name,
                    const std::vector<std::string>& inputs, const std::string& out, int index,
                    std::optional<int64_t> axis = std::nullopt) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(node_name);
    for (const std::string& in : inputs) n.add_input(in);
    n.add_output(out);
    if (axis) {
      auto* a = n.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(*axis);
    }
    // At opset 13 at least (the first whose Identity, Unsqueeze and Concat Baton runs), or the
    // model's if later: these nodes are ours, not the model's.
    return add_node(n, index, std::max(graph_.opset, 13));
  }

  // A Loop whose trip count M is a constant (an initializer or a Constant node), whose cond input
  // is absent or a constant, and whose body passes its condition through unchanged runs exactly
  // M times: it is unrolled at import into M copies of the body, each iteration's values renamed
  // "<loop>/<k>/<name>", the iteration number a constant, the loop-carried values threaded from
  // one copy to the next, and each scan output Unsqueezed and Concatenated along a new first axis.
  // Up to kMaxUnroll iterations; a body with control flow of its own, a condition the body computes
  // (an early exit) or a trip count known only at run time is refused naming the Loop.
  static constexpr int64_t kMaxUnroll = 256;
  // The int64 scalar `name` as the nodes imported so far compute it, when that folds at compile:
  // shape arithmetic over static sizes (`for i in range(x.size(0))` exports its trip count as
  // Gather(Shape(x), 0)). Inferred and folded on a copy of the graph so far (constants are
  // shared, not copied) whose only output is `name`, so that only the nodes it depends on are
  // inferred twice and a problem elsewhere is reported where it is; the compile does it all to
  // the whole graph later. nullopt when it does not fold; `why` then says what inference said,
  // if anything.
  std::optional<int64_t> folded_int64(const std::string& name, std::string* why) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) return std::nullopt;
    Graph copy = graph_;
    copy.outputs = {it->second};
    eliminate_dead_nodes(copy);
    if (Result<FoldReport> folded = infer_and_fold(copy, options_.fold_limits); !folded.ok()) {
      *why = folded.status().message();
      return std::nullopt;
    }
    const IrValue& v = copy.values[static_cast<size_t>(it->second)];
    if (v.constant == nullptr || v.dtype != DType::Int64 || v.constant->size() != 8) {
      return std::nullopt;
    }
    int64_t out = 0;
    std::memcpy(&out, v.constant->data(), 8);
    return out;
  }

  Status add_loop(const onnx::NodeProto& proto, int index) {
    const std::string name = proto.name().empty() ? fmt::format("Loop_{}", index) : proto.name();
    auto refuse = [&](const std::string& why) {
      return BATON_ERROR(NotSupported,
                         "Loop node '{}': {}; Baton unrolls a Loop only when its trip count is a "
                         "constant of at most {} and its body keeps the condition as it is; "
                         "export the model with the loop unrolled (the tracing exporter), or keep "
                         "this part outside the program",
                         name, why, kMaxUnroll);
    };
    const onnx::GraphProto* body = nullptr;
    for (const auto& a : proto.attribute()) {
      if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH) body = &a.g();
    }
    BATON_CHECK_OR_RETURN(body != nullptr, InvalidArgument, "Loop node '{}' has no body graph",
                          name);
    BATON_CHECK_OR_RETURN(proto.input_size() >= 2, InvalidArgument,
                          "Loop node '{}' has {} inputs; a Loop has M, cond and its carried values",
                          name, proto.input_size());
    const int carried_count = proto.input_size() - 2;
    BATON_CHECK_OR_RETURN(
        body->input_size() == carried_count + 2 && body->output_size() >= carried_count + 1 &&
            proto.output_size() == body->output_size() - 1,
        InvalidArgument,
        "Loop node '{}': its body has {} inputs and {} outputs for {} carried "
        "values and {} node outputs",
        name, body->input_size(), body->output_size(), carried_count, proto.output_size());
    const int scan_count = body->output_size() - 1 - carried_count;
    // The trip count.
    auto constant_of = [&](const std::string& n) -> const IrValue* {
      auto it = by_name_.find(n);
      return it == by_name_.end() || !graph_.values[it->second].constant
                 ? nullptr
                 : &graph_.values[it->second];
    };
    if (proto.input(0).empty()) return refuse("it has no trip count M");
    int64_t trips = 0;
    if (const IrValue* m = constant_of(proto.input(0));
        m != nullptr && m->dtype == DType::Int64 && m->constant->size() == 8) {
      std::memcpy(&trips, m->constant->data(), 8);
    } else if (std::string why;
               const std::optional<int64_t> folded = folded_int64(proto.input(0), &why)) {
      trips = *folded;
    } else {
      return refuse(fmt::format(
          "its trip count '{}' is not a constant int64, nor computed from static sizes{}",
          proto.input(0), why.empty() ? "" : fmt::format(" (inferring it: {})", why)));
    }
    if (trips < 0 || trips > kMaxUnroll) {
      return refuse(fmt::format("its trip count is {}", trips));
    }
    if (!proto.input(1).empty()) {
      const IrValue* c = constant_of(proto.input(1));
      if (c == nullptr || c->dtype != DType::Bool || c->constant->size() != 1) {
        return refuse(fmt::format("its condition '{}' is not a constant bool", proto.input(1)));
      }
      if ((*c->constant)[0] == 0) trips = 0;
    }
    // The body's condition output must be its condition input, passed through.
    const std::string& cond_in = body->input(1).name();
    bool passes_condition = body->output(0).name() == cond_in;
    for (const auto& n : body->node()) {
      // Identity(cond) or Cast(cond, to=BOOL), as exporters write the pass-through.
      const bool cast_to_bool = n.op_type() == "Cast" && n.attribute_size() == 1 &&
                                n.attribute(0).name() == "to" &&
                                n.attribute(0).i() == onnx::TensorProto::BOOL;
      if ((n.op_type() == "Identity" || cast_to_bool) && n.input_size() == 1 &&
          n.input(0) == cond_in && n.output_size() == 1 && n.output(0) == body->output(0).name()) {
        passes_condition = true;
      }
      for (const auto& a : n.attribute()) {
        if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) {
          return refuse(
              fmt::format("its body's node '{}' ({}) has a subgraph", n.name(), n.op_type()));
        }
      }
    }
    if (!passes_condition) return refuse("its body computes its condition (an early exit)");
    if (trips == 0 && scan_count > 0) return refuse("it runs no iteration but has scan outputs");
    std::vector<std::string> carried;  // the current value name of each carried value
    for (int j = 0; j < carried_count; ++j) {
      BATON_CHECK_OR_RETURN(by_name_.count(proto.input(2 + j)) > 0, InvalidArgument,
                            "Loop node '{}' reads '{}', which nothing before it produces", name,
                            proto.input(2 + j));
      carried.push_back(proto.input(2 + j));
    }
    std::vector<std::vector<std::string>> scans(static_cast<size_t>(scan_count));
    // Unsqueeze-13's axes input (Baton runs its ops from opset 13 on), one for every scan.
    std::string axes;
    if (scan_count > 0 && trips > 0) {
      const int64_t zero = 0;
      axes = fresh_name(name + "/scan_axes");
      graph_.values[add_constant(axes, DType::Int64, &zero, 8)].sizes = {1};
    }
    for (int64_t k = 0; k < trips; ++k) {
      std::unordered_map<std::string, std::string> rename;
      const std::string prefix = fmt::format("{}/{}/", name, k);
      const std::string iter = fresh_name(prefix + "iteration");
      add_constant(iter, DType::Int64, &k, 8);
      rename[body->input(0).name()] = iter;
      const uint8_t yes = 1;
      const std::string cond = fresh_name(prefix + "condition");
      add_constant(cond, DType::Bool, &yes, 1);
      rename[cond_in] = cond;
      for (int j = 0; j < carried_count; ++j) rename[body->input(2 + j).name()] = carried[j];
      for (const auto& init : body->initializer()) {
        onnx::TensorProto copy = init;
        copy.set_name(fresh_name(prefix + init.name()));
        rename[init.name()] = copy.name();
        BATON_TRY(add_initializer(copy));
      }
      for (int i = 0; i < body->node_size(); ++i) {
        onnx::NodeProto n = body->node(i);
        n.set_name(prefix + (n.name().empty() ? fmt::format("{}_{}", n.op_type(), i) : n.name()));
        for (int a = 0; a < n.input_size(); ++a) {
          if (auto it = rename.find(n.input(a)); it != rename.end()) n.set_input(a, it->second);
        }
        for (int o = 0; o < n.output_size(); ++o) {
          if (n.output(o).empty()) continue;
          const std::string renamed = fresh_name(prefix + n.output(o));
          rename[n.output(o)] = renamed;
          n.set_output(o, renamed);
        }
        BATON_TRY(add_any_node(n, index));
      }
      auto after = [&](const std::string& n) {
        auto it = rename.find(n);
        return it == rename.end() ? n : it->second;  // an outer value the body passes on
      };
      for (int j = 0; j < carried_count; ++j) carried[j] = after(body->output(1 + j).name());
      for (int s2 = 0; s2 < scan_count; ++s2) {
        const std::string v = after(body->output(1 + carried_count + s2).name());
        const std::string unsqueezed = fresh_name(prefix + "scan_" + std::to_string(s2));
        BATON_TRY(add_helper("Unsqueeze", unsqueezed, {v, axes}, unsqueezed, index));
        scans[static_cast<size_t>(s2)].push_back(unsqueezed);
      }
    }
    // The Loop's outputs: the final carried values, then the scans concatenated.
    for (int j = 0; j < carried_count; ++j) {
      if (proto.output(j).empty()) continue;
      BATON_TRY(add_helper("Identity", fmt::format("{}/output_{}", name, j), {carried[j]},
                           proto.output(j), index));
    }
    for (int s2 = 0; s2 < scan_count; ++s2) {
      const std::string& out = proto.output(carried_count + s2);
      if (out.empty()) continue;
      BATON_TRY(add_helper("Concat", fmt::format("{}/scan_output_{}", name, s2),
                           scans[static_cast<size_t>(s2)], out, index, 0));
    }
    return Status();
  }

  // An If is imported as both of its branches, each node guarded by the condition (IrNode::
  // guards), and per output two Identity nodes, one from each branch's output, writing the If's
  // output value. Inference keeps the branch whose guard holds and drops the other before
  // inferring its shapes, so the condition must be known at compile time (a constant, or shape
  // arithmetic over static sizes): then the program is the chosen branch alone. Each branch's
  // names are visible to that branch only (by_name_ is restored after it), so sibling branches
  // may reuse names. Both branches are imported, so the dropped one must import too: a Loop it
  // cannot unroll there fails the compile (docs/support.md); an op Baton lacks waits for
  // inference, which reports it only if its branch is kept (IrNode::unsupported).
  Status add_if(const onnx::NodeProto& proto, int index) {
    const std::string name = proto.name().empty() ? fmt::format("If_{}", index) : proto.name();
    BATON_CHECK_OR_RETURN(proto.input_size() == 1 && !proto.input(0).empty(), InvalidArgument,
                          "If node '{}' has {} inputs; an If has one, its condition", name,
                          proto.input_size());
    auto cond = by_name_.find(proto.input(0));
    BATON_CHECK_OR_RETURN(cond != by_name_.end(), InvalidArgument,
                          "If node '{}' reads '{}', which no earlier node, initializer or graph "
                          "input produces",
                          name, proto.input(0));
    const int cond_id = cond->second;  // by_name_ is replaced below: no iterator into it
    const onnx::GraphProto* branches[2] = {nullptr, nullptr};  // then, else
    for (const auto& a : proto.attribute()) {
      if (a.type() != onnx::AttributeProto::GRAPH) continue;
      if (a.name() == "then_branch") branches[0] = &a.g();
      if (a.name() == "else_branch") branches[1] = &a.g();
    }
    BATON_CHECK_OR_RETURN(branches[0] != nullptr && branches[1] != nullptr, InvalidArgument,
                          "If node '{}' lacks its then_branch or else_branch graph attribute",
                          name);
    std::vector<int> branch_outputs[2];
    for (int b = 0; b < 2; ++b) {
      const onnx::GraphProto& g = *branches[b];
      BATON_CHECK_OR_RETURN(g.output_size() == proto.output_size(), InvalidArgument,
                            "If node '{}': its {} has {} outputs, the node {}", name,
                            b == 0 ? "then_branch" : "else_branch", g.output_size(),
                            proto.output_size());
      guards_.push_back({cond_id, b == 0, name});
      const std::unordered_map<std::string, int> outer = by_name_;
      for (const auto& init : g.initializer()) BATON_TRY(add_initializer(init));
      for (const auto& n : g.node()) model_names_.insert(n.output().begin(), n.output().end());
      for (int i = 0; i < g.node_size(); ++i) BATON_TRY(add_any_node(g.node(i), index));
      for (const auto& out : g.output()) {
        auto it = by_name_.find(out.name());
        BATON_CHECK_OR_RETURN(it != by_name_.end(), InvalidArgument,
                              "If node '{}': {} output '{}' is produced by no node of the branch "
                              "or of the graph around it",
                              name, b == 0 ? "then_branch" : "else_branch", out.name());
        branch_outputs[b].push_back(it->second);
      }
      by_name_ = outer;  // the branch's own values are not visible after it
      guards_.pop_back();
    }
    for (int o = 0; o < proto.output_size(); ++o) {
      BATON_CHECK_OR_RETURN(
          !proto.output(o).empty() && by_name_.count(proto.output(o)) == 0, InvalidArgument,
          "If node '{}' output {} is unnamed or already defined ('{}')", name, o, proto.output(o));
      int written = -1;
      for (int b = 0; b < 2; ++b) {
        const std::string input = graph_.values[branch_outputs[b][o]].name;
        // The else Identity writes the same value as the then Identity: it is added under a
        // name of its own and then pointed at that value (only one of them survives folding).
        const std::string out = b == 0 ? proto.output(o) : fresh_name(proto.output(o) + "/else");
        // Its input may be a branch-local value, no longer visible by name: for this node only
        // (whatever the name meant before is restored).
        const auto before = by_name_.find(input);
        const std::optional<int> previous =
            before == by_name_.end() ? std::nullopt : std::optional<int>(before->second);
        by_name_[input] = branch_outputs[b][o];
        guards_.push_back({cond_id, b == 0, name});
        const Status added = add_helper(
            "Identity", fmt::format("{}/{}_output_{}", name, b == 0 ? "then" : "else", o), {input},
            out, index);
        guards_.pop_back();
        if (previous) {
          by_name_[input] = *previous;
        } else {
          by_name_.erase(input);
        }
        BATON_TRY(added);
        if (b == 0) {
          written = graph_.nodes.back().outputs[0];
        } else {
          graph_.nodes.back().outputs[0] = written;  // the If's output is named by the then one
          by_name_.erase(out);
        }
      }
    }
    return Status();
  }

  // The com.microsoft ops onnxruntime's transformer optimizer writes, as the standard ops they
  // compute (at the opsets that define them, whatever the model's), so that the optimizer's
  // passes and every backend take them like an exporter's own (the GPU: Gelu, LayerNorm and its
  // residual Add fused). Returns false for an op it does not know, which is then reported
  // unsupported with the others.
  //   Gelu(X) = Gelu(X), erf form;  BiasGelu(A, B) = Gelu(A + B);
  //   FastGelu(X, bias?) = Gelu(X [+ bias]), tanh form (0.5 x (1 + tanh(0.79788456 (x + 0.044715
  //   x^3))), onnxruntime's formula);
  //   SkipLayerNormalization(input, skip, gamma, beta?, bias?; epsilon = 1e-12) =
  //   LayerNormalization(input + skip [+ bias], gamma, beta; axis -1, epsilon), its fourth output
  //   (input_skip_bias_sum) the sum. Its mean and inv_std_var outputs (training) are refused.
  Result<bool> add_contrib_node(const onnx::NodeProto& proto, int index) {
    const std::string& op = proto.op_type();
    if (op != "Gelu" && op != "BiasGelu" && op != "FastGelu" && op != "SkipLayerNormalization") {
      return false;
    }
    const std::string name = proto.name().empty() ? fmt::format("{}_{}", op, index) : proto.name();
    auto input = [&](int i) { return i < proto.input_size() ? proto.input(i) : std::string(); };
    auto output = [&](int i) { return i < proto.output_size() ? proto.output(i) : std::string(); };
    // A value name of our own for an intermediate result, unused by the model.
    auto fresh = [&](const std::string& what) {
      std::string n = fmt::format("{}/{}", name, what);
      while (by_name_.count(n) > 0 || model_names_.count(n) > 0) n += "_";
      return n;
    };
    auto standard = [&](const std::string& type, const std::string& suffix,
                        std::vector<std::string> ins, std::vector<std::string> outs) {
      onnx::NodeProto n;
      n.set_name(name + suffix);
      n.set_op_type(type);
      for (auto& i : ins) n.add_input(std::move(i));
      for (auto& o : outs) n.add_output(std::move(o));
      return n;
    };
    auto gelu = [&](const std::string& x, const char* approximate) {
      onnx::NodeProto n = standard("Gelu", "", {x}, {output(0)});
      onnx::AttributeProto* a = n.add_attribute();
      a->set_name("approximate");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(approximate);
      return n;
    };
    BATON_CHECK_OR_RETURN(!output(0).empty(), InvalidArgument,
                          "node '{}' (com.microsoft {}) has no first output", name, op);
    if (op == "Gelu") {
      BATON_TRY(add_node(gelu(input(0), "none"), index, 20));
      return true;
    }
    if (op == "BiasGelu" || op == "FastGelu") {
      std::string x = input(0);
      if (!input(1).empty()) {
        const std::string sum = fresh("biased");
        BATON_TRY(add_node(standard("Add", "/bias", {x, input(1)}, {sum}), index, 14));
        x = sum;
      }
      BATON_TRY(add_node(gelu(x, op == "FastGelu" ? "tanh" : "none"), index, 20));
      return true;
    }
    // SkipLayerNormalization.
    BATON_CHECK_OR_RETURN(output(1).empty() && output(2).empty(), NotSupported,
                          "node '{}' (com.microsoft SkipLayerNormalization) uses its mean or "
                          "inv_std_var output (training statistics), which Baton does not compute",
                          name);
    float epsilon = 1e-12f;
    for (const auto& a : proto.attribute()) {
      if (a.name() == "epsilon") epsilon = a.f();
    }
    const bool bias = !input(4).empty();
    const std::string sum = (!bias && !output(3).empty()) ? output(3) : fresh("sum");
    BATON_TRY(add_node(standard("Add", "/skip", {input(0), input(1)}, {sum}), index, 14));
    std::string normalized = sum;
    if (bias) {
      normalized = output(3).empty() ? fresh("sum_bias") : output(3);
      BATON_TRY(add_node(standard("Add", "/bias", {sum, input(4)}, {normalized}), index, 14));
    }
    std::vector<std::string> ln_inputs = {normalized, input(2)};
    if (!input(3).empty()) ln_inputs.push_back(input(3));
    onnx::NodeProto ln = standard("LayerNormalization", "", std::move(ln_inputs), {output(0)});
    onnx::AttributeProto* eps = ln.add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(epsilon);
    onnx::AttributeProto* axis = ln.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
    BATON_TRY(add_node(ln, index, 17));
    return true;
  }

  // `opset`: the ai.onnx opset of a node the importer wrote itself (add_contrib_node); 0: the
  // model's.
  Status add_node(const onnx::NodeProto& proto, int index, int opset = 0) {
    IrNode node;
    node.name = proto.name().empty() ? fmt::format("{}_{}", proto.op_type(), index) : proto.name();
    node.op_type = proto.op_type();
    node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
    if (node.domain.empty() && opset > 0) {
      node.opset = opset;
    } else if (node.domain.empty()) {
      BATON_CHECK_OR_RETURN(graph_.opset > 0, InvalidArgument,
                            "{} is an ai.onnx op but '{}' does not import the ai.onnx operator "
                            "set (no opset_import entry for domain '')",
                            node.describe(), graph_.source);
      node.opset = graph_.opset;
    } else {
      auto it = other_domains_.find(node.domain);
      node.opset = it == other_domains_.end() ? 0 : it->second;
    }
    std::vector<ops::NamedAttr> raw;
    for (const auto& a : proto.attribute()) {
      BATON_ASSIGN_OR_RETURN(ops::NamedAttr attr, convert_attribute(a, node));
      raw.push_back(std::move(attr));
    }
    for (const std::string& in : proto.input()) {
      if (in.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      auto it = by_name_.find(in);
      BATON_CHECK_OR_RETURN(it != by_name_.end(), InvalidArgument,
                            "{} (node {} of '{}') reads '{}', which no earlier node, initializer "
                            "or graph input produces (the graph is not topologically sorted, or "
                            "uses an outer-scope value)",
                            node.describe(), index, graph_.source, in);
      node.inputs.push_back(it->second);
    }
    const int node_index = static_cast<int>(graph_.nodes.size());
    // An optional output left unnamed: dropped at the end of the list; before a named one (an
    // LSTM's Y when only Y_h is read) it becomes a value of its own that nothing reads, since a
    // node's outputs are positional.
    int last_named = -1;
    for (int o = 0; o < proto.output_size(); ++o) {
      if (!proto.output(o).empty()) last_named = o;
    }
    for (int o = 0; o <= last_named; ++o) {
      std::string out = proto.output(o);
      if (out.empty()) {
        out = fmt::format("{}/unread_output_{}", node.name, o);
        while (by_name_.count(out) > 0 || model_names_.count(out) > 0) out += "_";
      }
      BATON_CHECK_OR_RETURN(by_name_.count(out) == 0, InvalidArgument,
                            "{} of '{}' writes '{}', which is already defined (ONNX graphs are "
                            "single-assignment)",
                            node.describe(), graph_.source, out);
      IrValue v;
      v.name = out;
      v.producer = node_index;
      const int id = graph_.add_value(std::move(v));
      by_name_[out] = id;
      node.outputs.push_back(id);
    }
    node.guards = guards_;
    BATON_TRY(bind(node, raw));
    if (node.def != nullptr && node.domain.empty() && node.op_type == "Constant") {
      BATON_CHECK_OR_RETURN(node.outputs.size() == 1 && node.outputs[0] >= 0, InvalidArgument,
                            "{} has {} outputs ({}); a Constant has exactly one, named",
                            node.describe(), proto.output_size(), fmt::join(proto.output(), ", "));
      BATON_TRY(fold_constant_node(node, node.outputs[0]));
      graph_.values[node.outputs[0]].producer = -1;
      node.dead = true;
    }
    graph_.nodes.push_back(std::move(node));
    return Status();
  }

  // Every input whose shape the model leaves open, in one error with the flags that fix them
  // all: a model with a dynamic batch and sequence names both dimensions of every input at once.
  Status shape_error() const {
    if (shape_problems_.empty()) return Status();
    std::string fixes, dim_fixes;
    for (const ShapeProblem& p : shape_problems_) {
      fixes += (fixes.empty() ? "" : " ") + p.fix;
      for (const std::string& f : p.dim_fixes) {
        if (dim_fixes.find(f) == std::string::npos) dim_fixes += (dim_fixes.empty() ? "" : " ") + f;
      }
    }
    // Named symbolic dimensions can also stay dynamic: --dim NAME=MIN..MAX.
    const std::string or_dims =
        dim_fixes.empty()
            ? std::string()
            : fmt::format(
                  "; or keep them dynamic with {}, each MIN..MAX the range of sizes to "
                  "serve",
                  dim_fixes);
    // "<name>" placeholders stand for the symbolic dimensions; "D0xD1x..." for a missing shape.
    const bool named = fixes.find('<') != std::string::npos;
    const char* each = named ? ", each <name> replaced by a size" : "";
    if (shape_problems_.size() == 1) {
      return BATON_ERROR(InvalidArgument, "{}: {} {}{}{}", shape_problems_[0].what,
                         named ? "fix it with" : "give one with", fixes, each, or_dims);
    }
    std::string message =
        fmt::format("{} inputs of '{}' have shapes the model leaves open:", shape_problems_.size(),
                    graph_.source);
    for (const ShapeProblem& p : shape_problems_) message += "\n  " + p.what;
    message += fmt::format("\nfix them with {}{}{}", fixes, each, or_dims);
    return BATON_ERROR(InvalidArgument, "{}", message);
  }

  // `--shape` text for `dims`: the sizes the model fixes, <name> for each symbolic one.
  static std::string shape_hint(
      const google::protobuf::RepeatedPtrField<onnx::TensorShapeProto_Dimension>& dims) {
    std::string out;
    for (int d = 0; d < dims.size(); ++d) {
      if (d > 0) out += "x";
      const auto& dim = dims.Get(d);
      if (dim.has_dim_value()) {
        out += std::to_string(dim.dim_value());
      } else {
        out += "<" + (dim.dim_param().empty() ? fmt::format("D{}", d) : dim.dim_param()) + ">";
      }
    }
    return out;
  }

  Status report_unsupported() const {
    if (unsupported_.empty()) return Status();
    std::string message = fmt::format("'{}' uses {} unsupported node{}:", graph_.source,
                                      unsupported_.size(), unsupported_.size() == 1 ? "" : "s");
    const size_t shown = std::min<size_t>(unsupported_.size(), 20);
    for (size_t i = 0; i < shown; ++i) message += "\n  " + unsupported_[i];
    if (shown < unsupported_.size())
      message += fmt::format("\n  ... and {} more", unsupported_.size() - shown);
    if (const Status shapes = shape_error(); !shapes.ok()) message += "\nAlso: " + shapes.message();
    message += "\nSupported ops:";
    for (std::string_view n : runtime::kernel_registry().names()) message += fmt::format(" {}", n);
    return BATON_ERROR(NotSupported, "{}", message);
  }

  const onnx::ModelProto& model_;
  std::filesystem::path base_dir_;
  const ImportOptions& options_;
  Graph graph_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, int> other_domains_;
  std::unordered_set<std::string> model_names_;
  std::vector<std::string> unsupported_;
  // The conditions of the If branches being imported (add_if), outermost first.
  std::vector<IrNode::Guard> guards_;
  struct ShapeProblem {
    std::string what;  // "input 'x' of 'm.onnx' has a symbolic dimension 'N' at axis 0"
    std::string fix;   // "--shape x=<N>x4"
    std::vector<std::string> dim_fixes;  // "--dim N=MIN..MAX", one per named symbolic dimension
  };

  // The range that governs dimension `name`: its own --dim, or for --dim NAME=OTHER, OTHER's
  // (make_compile_setup checked that OTHER has one), so both become one symbol.
  const DimRange* declared(const std::string& name) const {
    if (name.empty()) return nullptr;
    for (const DimRange& d : options_.dims) {
      if (d.name != name) continue;
      if (d.same_as.empty()) return &d;
      for (const DimRange& t : options_.dims) {
        if (t.name == d.same_as && t.same_as.empty()) return &t;
      }
      return nullptr;
    }
    return nullptr;
  }

  // The graph's symbol for a declared dimension, made on first use.
  Result<sym::SizeExpr> symbol_for(const DimRange& d) {
    if (auto e = graph_.symbols.find_symbol(d.name)) return *e;
    // Sizes start at 1: an empty batch is not served, and a zero would let size expressions
    // divide by zero (a Reshape's -1 over a dynamic dimension).
    BATON_CHECK_OR_RETURN(d.min >= 1 && d.min <= d.max, InvalidArgument,
                          "--dim {}={}..{}: the range must satisfy 1 <= MIN <= MAX", d.name, d.min,
                          d.max);
    BATON_CHECK_OR_RETURN(d.opt == 0 || (d.min <= d.opt && d.opt <= d.max), InvalidArgument,
                          "--dim {}={}..{}@{}: the size to tune for lies outside the range", d.name,
                          d.min, d.max, d.opt);
    return graph_.symbols.add_symbol(d.name, d.min, d.max, d.opt);
  }

  // Every --dim names a symbolic dimension of some input: a typo would otherwise pass silently.
  Status check_dims_used() const {
    std::vector<std::string> params;  // the inputs' symbolic dimensions, once each
    for (const auto& in : model_.graph().input()) {
      if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
      for (const auto& dim : in.type().tensor_type().shape().dim()) {
        if (!dim.dim_param().empty() &&
            std::find(params.begin(), params.end(), dim.dim_param()) == params.end())
          params.push_back(dim.dim_param());
      }
    }
    for (const DimRange& d : options_.dims) {
      // A range is used when it made a symbol (its name's, or one NAME=OTHER points to); an
      // alias when its name is an input's dimension.
      if (d.same_as.empty()
              ? graph_.symbols.find_symbol(d.name).has_value() || fixed_dims_.count(d.name) > 0
              : std::find(params.begin(), params.end(), d.name) != params.end())
        continue;
      std::string names;
      for (const std::string& p : params) names += (names.empty() ? "'" : ", '") + p + "'";
      return BATON_ERROR(InvalidArgument,
                         "--dim {}: '{}' is not a symbolic dimension of an input of '{}' left open "
                         "(its inputs' symbolic dimensions: {})",
                         d.name, d.name, graph_.source, names.empty() ? "none" : names);
    }
    return Status();
  }

  static std::vector<std::string> dim_fixes(
      const google::protobuf::RepeatedPtrField<onnx::TensorShapeProto_Dimension>& dims) {
    std::vector<std::string> out;
    for (const auto& dim : dims) {
      if (!dim.has_dim_value() && !dim.dim_param().empty())
        out.push_back(fmt::format("--dim {}=MIN..MAX", dim.dim_param()));
    }
    return out;
  }
  std::vector<ShapeProblem> shape_problems_;
  std::set<std::string> fixed_dims_;  // --dim NAME=N..N: static, no symbol made
};

// One top-level field of a serialized ModelProto, as the wire format lays it out.
struct WireField {
  int number = 0;
  int wire_type = 0;
  uint64_t begin = 0;         // offset of its tag
  uint64_t payload = 0;       // offset of a length-delimited field's bytes
  uint64_t payload_size = 0;  // their count
};

// Walks the top-level fields of `bytes` without interpreting them. Returns the offset where the
// walk stopped: bytes.size() when every byte belongs to a well-formed field.
uint64_t walk_fields(std::span<const uint8_t> bytes, std::vector<WireField>& fields) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  while (true) {
    const uint64_t at = static_cast<uint64_t>(in.CurrentPosition());
    if (at == bytes.size()) return at;
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return at;
    WireField f;
    f.number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    f.wire_type = static_cast<int>(WireFormatLite::GetTagWireType(tag));
    f.begin = at;
    if (f.wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return at;
      f.payload = static_cast<uint64_t>(in.CurrentPosition());
      f.payload_size = length;
      if (length > bytes.size() - f.payload || !in.Skip(static_cast<int>(length))) return at;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return at;
    }
    fields.push_back(f);
  }
}

std::string hex_bytes(std::span<const uint8_t> bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < bytes.size(); ++i)
    out += fmt::format("{}{:02x}", i ? " " : "", bytes[i]);
  return out;
}

// Which message-typed field of a ModelProto that walks cleanly fails to parse, as a message.
std::string damaged_field(std::span<const uint8_t> bytes, const std::vector<WireField>& fields) {
  using google::protobuf::FieldDescriptor;
  const auto* descriptor = onnx::ModelProto::descriptor();
  for (const WireField& f : fields) {
    const FieldDescriptor* field = descriptor->FindFieldByNumber(f.number);
    if (field == nullptr || field->type() != FieldDescriptor::TYPE_MESSAGE ||
        f.wire_type != google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      continue;
    }
    const google::protobuf::Message* prototype =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(field->message_type());
    if (prototype == nullptr) continue;
    std::unique_ptr<google::protobuf::Message> message(prototype->New());
    google::protobuf::io::CodedInputStream in(bytes.data() + f.payload,
                                              static_cast<int>(f.payload_size));
    in.SetTotalBytesLimit(INT_MAX);
    if (message->ParseFromCodedStream(&in) && in.ConsumedEntireMessage()) continue;
    return fmt::format(
        "its field '{}' (ModelProto field {}, {} bytes at byte offset {}) does not parse as an "
        "{}",
        field->name(), f.number, f.payload_size, f.payload, field->message_type()->full_name());
  }
  return "a nested message does not parse";
}

Result<onnx::ModelProto> parse_model(std::span<const uint8_t> bytes, const std::string& source) {
  BATON_CHECK_OR_RETURN(!bytes.empty(), InvalidArgument,
                        "'{}' is empty (0 bytes), not an ONNX model", source);
  BATON_CHECK_OR_RETURN(bytes.size() <= kMaxModelBytes, NotSupported, "'{}' is {} bytes; {}",
                        source, bytes.size(), kProtobufLimitNote);
  // First the wire format alone, so a failure can say where the bytes stop making sense.
  std::vector<WireField> fields;
  const uint64_t stop = walk_fields(bytes, fields);
  auto seen = [&](int number) {
    return std::any_of(fields.begin(), fields.end(),
                       [&](const WireField& f) { return f.number == number; });
  };
  constexpr int kIrVersion = 1, kGraph = 7;
  if (stop != bytes.size()) {
    // A prefix holding an IR version and a graph is a model followed by something else.
    BATON_CHECK_OR_RETURN(
        !(seen(kIrVersion) && seen(kGraph)), InvalidArgument,
        "'{}' is damaged: its first {} bytes are an ONNX model, but the bytes from offset {} (of "
        "{}: {} ...) do not parse as protobuf fields (trailing garbage, or a file cut short or "
        "written over); re-export the model",
        source, stop, stop, bytes.size(), hex_bytes(bytes.subspan(stop), 8));
    return BATON_ERROR(InvalidArgument,
                       "'{}' is not an ONNX model: its bytes do not parse as a protobuf "
                       "ModelProto (the wire format breaks at byte offset {} of {}; the file "
                       "starts with {})",
                       source, stop, bytes.size(), hex_bytes(bytes, 8));
  }
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream coded(bytes.data(), static_cast<int>(bytes.size()));
  coded.SetTotalBytesLimit(INT_MAX);
  const bool parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  if (!parsed) {
    BATON_CHECK_OR_RETURN(seen(kIrVersion) || seen(kGraph), InvalidArgument,
                          "'{}' is not an ONNX model: it does not parse as a protobuf ModelProto "
                          "({}; the file starts with {})",
                          source, damaged_field(bytes, fields), hex_bytes(bytes, 8));
    return BATON_ERROR(InvalidArgument, "'{}' is a damaged ONNX model: {}; re-export the model",
                       source, damaged_field(bytes, fields));
  }
  BATON_CHECK_OR_RETURN(model.has_graph() || model.ir_version() != 0, InvalidArgument,
                        "'{}' is not an ONNX model: it parses as a protobuf message but has "
                        "neither an ir_version nor a graph (ModelProto fields 1 and 7)",
                        source);
  BATON_CHECK_OR_RETURN(
      model.has_graph(), InvalidArgument,
      "'{}' is an ONNX model (ir_version {}) without a graph: ModelProto field 'graph' is {}; "
      "re-export the model",
      source, model.ir_version(),
      seen(kGraph) ? "present but not a length-delimited message (wrong wire type)" : "missing");
  BATON_CHECK_OR_RETURN(model.ir_version() > 0, InvalidArgument,
                        "'{}' has ir_version {}: ModelProto field 'ir_version' is {}. Every ONNX "
                        "model records the IR version it was written with (7 or newer for opset "
                        "13+); re-export the model, or set model.ir_version = onnx.IR_VERSION and "
                        "save it again",
                        source, model.ir_version(),
                        model.ir_version() < 0 ? "negative"
                        : seen(kIrVersion)     ? "0"
                                               : "missing");
  return model;
}

}  // namespace

Result<Graph> import_onnx_bytes(std::span<const uint8_t> bytes, const std::string& source,
                                const std::filesystem::path& base_dir,
                                const ImportOptions& options) {
  BATON_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(bytes, source));
  return Importer(model, source, base_dir, options).run();
}

Result<std::vector<ModelInput>> read_model_inputs(const std::string& onnx_path) {
  BATON_ASSIGN_OR_RETURN(
      const std::vector<uint8_t> bytes,
      read_regular_file(onnx_path, kMaxModelBytes, "ONNX model", kProtobufLimitNote));
  BATON_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(bytes, onnx_path));
  std::vector<ModelInput> out;
  std::unordered_map<std::string, int> initializers;
  for (const auto& init : model.graph().initializer()) initializers[init.name()] = 1;
  for (const auto& input : model.graph().input()) {
    if (initializers.count(input.name())) continue;
    ModelInput m{input.name(), {}};
    if (input.type().has_tensor_type() && input.type().tensor_type().has_shape()) {
      for (const auto& dim : input.type().tensor_type().shape().dim()) {
        m.dim_params.push_back(dim.has_dim_value() ? std::string() : dim.dim_param());
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options) {
  // A regular file only, its size checked before reading: /dev/zero never ends, a FIFO blocks, a
  // directory is not a model.
  BATON_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                         read_regular_file(path, kMaxModelBytes, "ONNX model", kProtobufLimitNote));
  return import_onnx_bytes(bytes, path, std::filesystem::path(path).parent_path(), options);
}

}  // namespace baton::compiler
