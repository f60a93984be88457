#include "baton/extension/module.h"

#include "baton/core/check.h"
#include "baton/runtime/device_allocator.h"

namespace baton::extension {

using runtime::Method;
using runtime::MethodOptions;
using runtime::Program;
using runtime::TensorInfo;

Result<Module> Module::load(const std::string& path, std::string_view method,
                            const MethodOptions& options) {
  BATON_ASSIGN_OR_RETURN(auto program, Program::load_file(path));
  return from_program(std::move(program), method, options);
}

Result<Module> Module::from_program(std::shared_ptr<const Program> program, std::string_view method,
                                    const MethodOptions& options) {
  // load_method turns an allocation failure into OutOfMemory itself.
  BATON_ASSIGN_OR_RETURN(auto m, program->load_method(method, options));
  return Module(std::move(program), std::move(m));
}

Result<std::vector<Tensor>> Module::run(const std::vector<Tensor>& inputs) {
  return out_of_memory_as_error("running method", method_->name(),
                                [&] { return run_impl(inputs); });
}

Result<std::vector<Tensor>> Module::run_impl(const std::vector<Tensor>& inputs) {
  Method& m = *method_;
  if (inputs.size() != m.num_inputs()) {
    std::string expected;
    for (size_t i = 0; i < m.num_inputs(); ++i) {
      const TensorInfo info = m.input_info(i);
      expected += fmt::format("{}'{}' {} {}", i ? ", " : "", info.name, dtype_name(info.dtype),
                              shape_to_string(info.sizes));
    }
    return BATON_ERROR(InvalidArgument, "method '{}' takes {} inputs ({}), got {}", m.name(),
                       m.num_inputs(), expected, inputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) BATON_TRY(m.set_input(i, inputs[i].view()));
  // Outputs bound by an earlier run(views) may point at memory the caller has since freed.
  for (size_t i = 0; i < m.num_outputs(); ++i) m.unbind_output(i);
  BATON_TRY(m.execute());
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const TensorView out = m.output(i);
    BATON_ASSIGN_OR_RETURN(
        Tensor t,
        Tensor::empty(out.dtype, std::vector<int64_t>(out.sizes.begin(), out.sizes.end())));
    BATON_TRY(runtime::copy_tensor(t.view(), out));
    outputs.push_back(std::move(t));
  }
  return outputs;
}

Status Module::run(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) {
  Method& m = *method_;
  BATON_CHECK_OR_RETURN(inputs.size() == m.num_inputs() && outputs.size() == m.num_outputs(),
                        InvalidArgument,
                        "method '{}' takes {} inputs and {} outputs, got {} and {}", m.name(),
                        m.num_inputs(), m.num_outputs(), inputs.size(), outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) BATON_TRY(m.bind_input(i, inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i) BATON_TRY(m.bind_output(i, outputs[i]));
  return m.execute();
}

}  // namespace baton::extension
