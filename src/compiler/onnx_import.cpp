#include "compiler/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "baton/core/check.h"
#include "compiler/onnx_tensor.h"
#include "ops/constant.h"
#include "runtime/kernel.h"

namespace baton::compiler {

std::string IrNode::describe() const {
  std::string out = op_type + " node '" + name + "'";
  return out;
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
    BATON_CHECK_OR_RETURN(g.sparse_initializer_size() == 0, NotSupported,
                          "'{}' has sparse initializers, which Baton does not support",
                          graph_.source);
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
    for (int i = 0; i < g.node_size(); ++i) BATON_TRY(add_node(g.node(i), i));
    for (const auto& output : g.output()) {
      auto it = by_name_.find(output.name());
      BATON_CHECK_OR_RETURN(
          it != by_name_.end(), InvalidArgument,
          "graph output '{}' of '{}' is produced by no node, initializer or input", output.name(),
          graph_.source);
      graph_.outputs.push_back(it->second);
    }
    BATON_CHECK_OR_RETURN(!graph_.outputs.empty(), InvalidArgument, "'{}' has no graph outputs",
                          graph_.source);
    BATON_TRY(report_unsupported());
    return std::move(graph_);
  }

 private:
  Status read_opsets() {
    int opset = -1;
    for (const auto& imp : model_.opset_import()) {
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
    BATON_CHECK_OR_RETURN(
        is_valid_dtype(tt.elem_type()), NotSupported,
        "{} has ONNX element type {} ({}), which Baton does not support", where, tt.elem_type(),
        onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(tt.elem_type())));
    IrValue v;
    v.name = input.name();
    v.dtype = static_cast<DType>(tt.elem_type());
    const InputShape* given = shape_override(input.name());
    if (!tt.has_shape()) {
      BATON_CHECK_OR_RETURN(given != nullptr, InvalidArgument,
                            "{} has no shape; Baton compiles static shapes: give one with "
                            "--shape {}=D0xD1x...",
                            where, input.name());
      v.sizes = given->sizes;
    } else {
      const auto& dims = tt.shape().dim();
      if (given != nullptr) {
        BATON_CHECK_OR_RETURN(given->sizes.size() == static_cast<size_t>(dims.size()),
                              InvalidArgument, "{} has rank {} but the given shape {} has rank {}",
                              where, dims.size(), shape_to_string(given->sizes),
                              given->sizes.size());
      }
      for (int d = 0; d < dims.size(); ++d) {
        const auto& dim = dims.Get(d);
        if (dim.has_dim_value()) {
          BATON_CHECK_OR_RETURN(
              given == nullptr || given->sizes[d] == dim.dim_value(), InvalidArgument,
              "{}: the given shape {} sets dimension {} to {} but the model "
              "fixes it at {}",
              where, shape_to_string(given->sizes), d, given->sizes[d], dim.dim_value());
          v.sizes.push_back(dim.dim_value());
        } else {
          BATON_CHECK_OR_RETURN(given != nullptr, InvalidArgument,
                                "{} has a symbolic dimension '{}' at axis {}; Baton compiles "
                                "static shapes: fix it with --shape {}=D0xD1x...",
                                where, dim.dim_param(), d, input.name());
          v.sizes.push_back(given->sizes[d]);
        }
      }
    }
    for (int64_t s : v.sizes) {
      BATON_CHECK_OR_RETURN(s >= 0, InvalidArgument, "{} has a negative dimension in {}", where,
                            shape_to_string(v.sizes));
    }
    BATON_CHECK_OR_RETURN(checked_nbytes(v.dtype, v.sizes).has_value(), InvalidArgument,
                          "{} of shape {}: its size in bytes overflows; check the dimensions",
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

  // A node whose op has a definition and a CPU kernel gets its attributes bound; any other is
  // recorded as unsupported, and run() reports every such node at once.
  Status bind(IrNode& node, std::span<const ops::NamedAttr> raw) {
    const std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    const ops::OpDef* def = ops::op_registry().find(node.op_type, node.domain, node.opset);
    // Constant nodes are folded here, so they need no kernel.
    const bool folded_here = node.domain.empty() && node.op_type == "Constant";
    const bool has_kernel =
        folded_here || runtime::kernel_registry().find(node.op_type, node.domain) != nullptr;
    if (def == nullptr || !has_kernel) {
      const ops::OpDef* later = ops::op_registry().earliest(node.op_type, node.domain);
      if (later != nullptr && has_kernel) {
        unsupported_.push_back(fmt::format(
            "node '{}': op '{}' (domain '{}') is supported from opset {}, the model uses opset {}",
            node.name, node.op_type, domain, later->since_version, node.opset));
      } else {
        unsupported_.push_back(
            fmt::format("node '{}': op '{}' (domain '{}', opset {}) has no Baton kernel", node.name,
                        node.op_type, domain, node.opset));
      }
      return Status();
    }
    node.def = def;
    auto attrs = ops::bind_attributes(*def, raw, node.describe());
    if (!attrs.ok()) {
      if (attrs.code() != Error::NotSupported) return attrs.status();
      unsupported_.push_back(attrs.status().message());
      return Status();
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

  Status add_node(const onnx::NodeProto& proto, int index) {
    IrNode node;
    node.name = proto.name().empty() ? fmt::format("{}_{}", proto.op_type(), index) : proto.name();
    node.op_type = proto.op_type();
    node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
    if (node.domain.empty()) {
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
    for (const std::string& out : proto.output()) {
      if (out.empty()) {
        node.outputs.push_back(-1);
        continue;
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
    BATON_TRY(bind(node, raw));
    if (node.def != nullptr && node.domain.empty() && node.op_type == "Constant") {
      BATON_CHECK_OR_RETURN(node.outputs.size() == 1 && node.outputs[0] >= 0, InvalidArgument,
                            "{} must have one output", node.describe());
      BATON_TRY(fold_constant_node(node, node.outputs[0]));
      graph_.values[node.outputs[0]].producer = -1;
      node.dead = true;
    }
    graph_.nodes.push_back(std::move(node));
    return Status();
  }

  Status report_unsupported() const {
    if (unsupported_.empty()) return Status();
    std::string message = fmt::format("'{}' uses {} unsupported node{}:", graph_.source,
                                      unsupported_.size(), unsupported_.size() == 1 ? "" : "s");
    const size_t shown = std::min<size_t>(unsupported_.size(), 20);
    for (size_t i = 0; i < shown; ++i) message += "\n  " + unsupported_[i];
    if (shown < unsupported_.size())
      message += fmt::format("\n  ... and {} more", unsupported_.size() - shown);
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
  std::vector<std::string> unsupported_;
};

Result<onnx::ModelProto> parse_model(std::span<const uint8_t> bytes, const std::string& source) {
  BATON_CHECK_OR_RETURN(!bytes.empty(), InvalidArgument, "'{}' is empty, not an ONNX model",
                        source);
  BATON_CHECK_OR_RETURN(bytes.size() < static_cast<size_t>(INT_MAX), NotSupported,
                        "'{}' is {} bytes; ONNX protobufs are limited to 2 GiB (store the weights "
                        "as external data)",
                        source, bytes.size());
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  onnx::ModelProto model;
  const bool parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  BATON_CHECK_OR_RETURN(parsed && model.has_graph() && model.ir_version() > 0, InvalidArgument,
                        "'{}' is not an ONNX model (it does not parse as an ONNX ModelProto with "
                        "a graph)",
                        source);
  return model;
}

}  // namespace

Result<Graph> import_onnx_bytes(std::span<const uint8_t> bytes, const std::string& source,
                                const std::filesystem::path& base_dir,
                                const ImportOptions& options) {
  BATON_ASSIGN_OR_RETURN(onnx::ModelProto model, parse_model(bytes, source));
  return Importer(model, source, base_dir, options).run();
}

Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK_OR_RETURN(in.good(), IoError, "cannot open model '{}'", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return import_onnx_bytes(bytes, path, std::filesystem::path(path).parent_path(), options);
}

}  // namespace baton::compiler
