// Module: the convenience API. Loads a program, loads one method, and runs it on Tensors.
//
//   baton::register_builtins();
//   auto module = baton::extension::Module::load("model.baton");
//   auto outputs = module->run({input});   // std::vector<baton::Tensor> on the host
//
// run() copies inputs into the method's planned memory and copies outputs into new host
// tensors: simple, and it allocates. For the hot path use method(): set_input / bind_input,
// execute, output — which allocates nothing.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "baton/runtime/program.h"

namespace baton::extension {

class Module {
 public:
  static Result<Module> load(const std::string& path, std::string_view method = "forward",
                             const runtime::MethodOptions& options = {});
  static Result<Module> from_program(std::shared_ptr<const runtime::Program> program,
                                     std::string_view method = "forward",
                                     const runtime::MethodOptions& options = {});

  const runtime::Program& program() const { return *program_; }
  runtime::Method& method() { return *method_; }

  // Inputs in method order; their count, dtypes and shapes must match (errors say which one is
  // wrong and how). Returns host copies of the outputs.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);

  // Zero-copy: binds the caller's buffers (pointer, dtype, shape and device in each view, e.g.
  // Tensor::view() of a tensor from allocate_tensor) as the method's inputs and outputs, and
  // executes; outputs land in the caller's memory. Device rules: Method::bind_input. With a
  // StreamGuard the results may still be in flight on return (docs/device-contract.md).
  Status run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs);

 private:
  Result<std::vector<Tensor>> run_impl(const std::vector<Tensor>& inputs);
  Module(std::shared_ptr<const runtime::Program> program, std::unique_ptr<runtime::Method> method)
      : program_(std::move(program)), method_(std::move(method)) {}
  std::shared_ptr<const runtime::Program> program_;
  std::unique_ptr<runtime::Method> method_;
};

}  // namespace baton::extension
