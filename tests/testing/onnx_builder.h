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
  static void attr_ints(onnx::NodeProto& n, const std::string& name,
                        const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  std::vector<uint8_t> bytes() const {
    std::string s;
    model_.SerializeToString(&s);
    return {s.begin(), s.end()};
  }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name,
                         const std::vector<int64_t>& dims, int elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("N");
    }
  }

  onnx::ModelProto model_;
};

}  // namespace baton::testing
