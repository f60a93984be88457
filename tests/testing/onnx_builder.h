// Builds ONNX models in C++ for compiler tests (through libonnx's protobuf classes).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace baton::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 17) {
    model_.set_ir_version(8);
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    model_.set_producer_name("baton-tests");
    model_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // dims: >= 0 fixed, -1 symbolic ("N").
  void input(const std::string& name, const std::vector<int64_t>& dims, int elem = 1) {
    value_info(graph().add_input(), name, dims, elem);
  }
  // dims: >= 0 fixed, -1 symbolic, named in order by `params` ({"batch", "seq"}).
  void input_named(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<std::string>& params, int elem = 1) {
    value_info(graph().add_input(), name, dims, elem, params);
  }
  void output(const std::string& name, const std::vector<int64_t>& dims, int elem = 1) {
    value_info(graph().add_output(), name, dims, elem);
  }
  void initializer(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<float>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  void initializer_int64(const std::string& name, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "",
                        const std::string& domain = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    n->set_domain(domain);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name,
                        const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  // A one-element float32 tensor attribute (ConstantOfShape's `value`).
  static void attr_float_tensor(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(1);
    t->add_float_data(v);
  }

  std::vector<uint8_t> bytes() const {
    std::string s;
    model_.SerializeToString(&s);
    return {s.begin(), s.end()};
  }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name,
                         const std::vector<int64_t>& dims, int elem,
                         const std::vector<std::string>& params = {}) {
    size_t next_param = 0;
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param(next_param < params.size() ? params[next_param++] : "N");
    }
  }

  onnx::ModelProto model_;
};

// x[batch, in] -> MatMul(w1) -> middle -> MatMul(w2) -> y[batch, out]. A Relu in the middle keeps
// the graph in one GPU partition (the optimizer folds it into the first GEMM: fuse-linear); a Tanh
// stays a node of its own (three nodes); a Hardmax (a CPU kernel and no CUDA lowering) splits it
// into GPU, CPU, GPU. (It was Pow(h, 2) with an int64 exponent, until the pow-square pass made
// that a Mul the GPU takes.)
enum class Middle { Relu, Tanh, CpuOnly };
inline OnnxBuilder two_matmuls(int64_t batch, int64_t in, int64_t hidden, int64_t out,
                               Middle middle, const std::vector<float>& w1,
                               const std::vector<float>& w2) {
  OnnxBuilder b;
  b.input("x", {batch, in});
  b.initializer("w1", {in, hidden}, w1);
  b.initializer("w2", {hidden, out}, w2);
  b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  if (middle == Middle::Relu) {
    b.node("Relu", {"h"}, {"r"}, "relu");
  } else if (middle == Middle::Tanh) {
    b.node("Tanh", {"h"}, {"r"}, "tanh");
  } else {
    b.node("Hardmax", {"h"}, {"r"}, "hardmax_on_cpu");
  }
  b.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  b.output("y", {batch, out});
  return b;
}

}  // namespace baton::testing
