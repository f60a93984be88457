// CPU kernels of the elementwise operators, one per row of ops/elementwise.h: a unary kernel
// over the row's functor, or a broadcasting binary kernel (elementwise_kernels.h). Every dtype the
// row allows is instantiated (float16 and bfloat16 computed in float); the row's attributes are
// read once, at create.
#include <memory>

#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/kernels.h"
#include "ops/elementwise.h"

namespace baton::kernels::cpu {
namespace {

// The attribute values of a call, in its row's order.
ops::ElementwiseArgs args_of(const runtime::KernelCall& call) {
  ops::ElementwiseArgs args{};
  const ops::ElementwiseRow* row = ops::find_elementwise(call.def->name);
  for (size_t i = 0; row != nullptr && i < row->num_attrs; ++i) {
    const ops::ElementwiseAttr& a = row->attrs[i];
    args[i] = a.kind == ops::ElementwiseAttrKind::Flag ? static_cast<double>(call.attr_int(a.name))
                                                       : call.attr_float(a.name);
  }
  return args;
}

template <typename Fn, uint32_t kTypes>
Result<std::unique_ptr<runtime::Kernel>> create_unary_row(const runtime::KernelCall& call) {
  return create_unary<Fn, kTypes>(call, args_of(call));
}

template <typename Fn, uint32_t kA, uint32_t kB>
Result<std::unique_ptr<runtime::Kernel>> create_binary_row(const runtime::KernelCall& call) {
  return create_binary<Fn, kA, kB>(call, args_of(call));
}

}  // namespace

void register_elementwise(runtime::KernelRegistry& registry) {
  using namespace ::baton::ops;  // the rows name their functors and type sets unqualified
#define BATON_UNARY_KERNEL(Name, since, types, out, attrs, cpu, device) \
  registry.add({#Name, "", {}, &create_unary_row<Name##Fn, (types).bits()>});
#define BATON_BINARY_KERNEL(Name, since, a_types, b_types, out, attrs, cpu, device) \
  registry.add({#Name, "", {}, &create_binary_row<Name##Fn, (a_types).bits(), (b_types).bits()>});
  BATON_UNARY_OPS(BATON_UNARY_KERNEL)
  BATON_BINARY_OPS(BATON_BINARY_KERNEL)
#undef BATON_UNARY_KERNEL
#undef BATON_BINARY_KERNEL
}

}  // namespace baton::kernels::cpu
