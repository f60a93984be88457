#include "compiler/emit.h"

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/state.h"

namespace baton::compiler {
namespace {

fb::DeviceType fb_device(Device d) { return static_cast<fb::DeviceType>(d.type); }

// The file's size operations are core/symbolic.h's, code for code.
static_assert(static_cast<int>(fb::SizeOp::Const) == static_cast<int>(sym::Op::Const) &&
              static_cast<int>(fb::SizeOp::Symbol) == static_cast<int>(sym::Op::Symbol) &&
              static_cast<int>(fb::SizeOp::Add) == static_cast<int>(sym::Op::Add) &&
              static_cast<int>(fb::SizeOp::Mul) == static_cast<int>(sym::Op::Mul) &&
              static_cast<int>(fb::SizeOp::FloorDiv) == static_cast<int>(sym::Op::FloorDiv) &&
              static_cast<int>(fb::SizeOp::CeilDiv) == static_cast<int>(sym::Op::CeilDiv) &&
              static_cast<int>(fb::SizeOp::Min) == static_cast<int>(sym::Op::Min) &&
              static_cast<int>(fb::SizeOp::Max) == static_cast<int>(sym::Op::Max));

class Emitter {
 public:
  explicit Emitter(const EmitInput& in)
      : in_(in), g_(*in.graph), schedule_(*in.schedule), memory_(*in.memory) {}

  Result<EmitOutput> run() {
    BATON_CHECK_OR_RETURN(in_.lowered->size() == in_.partitions->partitions.size() &&
                              in_.backend_ids.size() == in_.partitions->partitions.size(),
                          Internal,
                          "{} partitions reached emission with {} lowered blobs and {} backend "
                          "ids: every delegate call needs one of each",
                          in_.partitions->partitions.size(), in_.lowered->size(),
                          in_.backend_ids.size());
    auto method = std::make_unique<fb::MethodT>();
    method_ = method.get();
    method_->name = "forward";
    for (size_t s = 0; s < g_.symbols.num_symbols(); ++s) {
      const sym::SymbolInfo& info = g_.symbols.symbol(s);
      auto symbol = std::make_unique<fb::SymbolT>();
      symbol->name = info.name;
      symbol->min = info.min;
      symbol->max = info.max;
      symbol->opt = info.opt;
      method_->symbols.push_back(std::move(symbol));
    }
    if (in_.fallbacks != nullptr) {
      for (const CpuFallback& f : *in_.fallbacks) {
        auto fb_entry = std::make_unique<fb::FallbackT>();
        fb_entry->node = f.node;
        fb_entry->op = f.op;
        fb_entry->reason = f.reason;
        method_->fallbacks.push_back(std::move(fb_entry));
      }
    }
    for (int v : schedule_.inputs) method_->inputs.push_back(tensor_value(v));
    for (const Step& s : schedule_.steps) {
      auto ins = std::make_unique<fb::InstructionT>();
      switch (s.kind) {
        case StepKind::Kernel:
          ins->instruction.Set(kernel_call(s));
          ++out_.summary.kernel_calls;
          break;
        case StepKind::Delegate:
          ins->instruction.Set(delegate_call(s));
          ++out_.summary.delegate_calls;
          break;
        case StepKind::Copy: {
          fb::DeviceCopyT c;
          c.src = tensor_value(s.inputs[0]);
          c.dst = tensor_value(s.outputs[0]);
          ins->instruction.Set(std::move(c));
          ++out_.summary.copies;
          break;
        }
      }
      method_->instructions.push_back(std::move(ins));
    }
    for (int v : schedule_.outputs) method_->outputs.push_back(tensor_value(v));
    if (in_.state != nullptr) {
      for (const StateBinding& b : *in_.state) {
        auto st = std::make_unique<fb::StateT>();
        st->name = b.name;
        st->value = tensor_value(b.value);
        st->update = tensor_value(b.update);
        method_->state.push_back(std::move(st));
      }
    }
    // A data-dependent symbol names the value whose kernel gives it a size (emitted above: the
    // dead-node pass keeps that kernel).
    for (size_t s = 0; s < g_.symbols.num_symbols(); ++s) {
      const int source = g_.symbols.symbol(s).source;
      if (source >= 0) method_->symbols[s]->source = tensor_value(source);
    }
    BATON_TRY(storage());
    out_.program.producer = in_.producer;
    out_.program.methods.push_back(std::move(method));
    out_.summary.opset = g_.opset;
    return std::move(out_);
  }

 private:
  fb::KernelCallT kernel_call(const Step& s) {
    const IrNode& n = g_.nodes[s.node];
    fb::KernelCallT k;
    k.operator_ = operator_index(n);
    k.name = n.name;
    for (int v : s.inputs) k.inputs.push_back(v < 0 ? null_value() : tensor_value(v));
    for (const ops::AttrValue& a : n.attrs) k.attributes.push_back(attribute_value(a));
    for (int v : s.outputs) k.outputs.push_back(v < 0 ? null_value() : tensor_value(v));
    return k;
  }

  fb::DelegateCallT delegate_call(const Step& s) {
    const Partition& p = in_.partitions->partitions[s.partition];
    const LoweredPartition& lp = (*in_.lowered)[s.partition];
    auto d = std::make_unique<fb::DelegateT>();
    d->backend = in_.backend_ids[s.partition];
    d->name = p.name;
    d->device_type = static_cast<fb::DeviceType>(p.blob_device.type);
    d->device_index = p.blob_device.index;
    for (const auto& [key, value] : lp.compile_specs) {
      auto cs = std::make_unique<fb::CompileSpecT>();
      cs->key = key;
      cs->value = value;
      d->compile_specs.push_back(std::move(cs));
    }
    d->blob_segment = static_cast<int>(blobs_.size());  // rebased after the constants
    blobs_.push_back(&lp.blob);
    method_->delegates.push_back(std::move(d));
    fb::DelegateCallT call;
    call.delegate = static_cast<int>(method_->delegates.size()) - 1;
    for (int v : s.inputs) call.inputs.push_back(tensor_value(v));
    for (int v : s.outputs) call.outputs.push_back(tensor_value(v));
    return call;
  }

  int emit_value(const std::function<void(fb::ValueKindUnion&)>& fill) {
    auto v = std::make_unique<fb::ValueT>();
    fill(v->value);
    method_->values.push_back(std::move(v));
    return static_cast<int>(method_->values.size()) - 1;
  }

  int null_value() {
    if (null_index_ < 0) {
      null_index_ = emit_value([](fb::ValueKindUnion& u) { u.Set(fb::NullT()); });
    }
    return null_index_;
  }

  // The file's index of IR expression `e`, emitting its operands first: the file's list holds
  // only the expressions tensors use, in dependency order (docs/format.md).
  uint32_t size_expr(sym::SizeExpr e) {
    if (auto it = expr_index_.find(e); it != expr_index_.end()) return it->second;
    const sym::Node& node = g_.symbols.node(e);
    auto x = std::make_unique<fb::SizeExprT>();
    x->op = static_cast<fb::SizeOp>(node.op);
    x->value = node.value;
    for (sym::SizeExpr o : node.operands) x->operands.push_back(size_expr(o));
    method_->size_exprs.push_back(std::move(x));
    const auto index = static_cast<uint32_t>(method_->size_exprs.size() - 1);
    expr_index_[e] = index;
    return index;
  }

  int emit_tensor(const IrValue& iv) {
    return emit_value([&](fb::ValueKindUnion& u) {
      fb::TensorT t;
      t.name = iv.name;
      t.dtype = static_cast<fb::ScalarType>(iv.dtype);
      t.sizes = iv.sizes;
      for (size_t d = 0; d < iv.sizes.size(); ++d) t.dim_order.push_back(static_cast<uint8_t>(d));
      for (sym::SizeExpr e : iv.dims) t.dims.push_back(size_expr(e));
      const Device dev = iv.constant ? Device::cpu() : iv.device;
      t.device_type = fb_device(dev);
      t.device_index = dev.index;
      u.Set(std::move(t));
    });
  }

  // Graph tensors are emitted once each; storage is filled in at the end.
  int tensor_value(int v) {
    if (auto it = fb_index_.find(v); it != fb_index_.end()) return it->second;
    const int index = emit_tensor(g_.values[v]);
    fb_index_[v] = index;
    return index;
  }

  // A bound attribute as a program value (tensor attributes become constant tensors).
  int attribute_value(const ops::AttrValue& a) {
    if (a.none) return null_value();
    if (a.kind == ops::AttrKind::Tensor) {
      IrValue v;
      v.name = "attribute";
      v.dtype = a.tensor.dtype;
      v.sizes = a.tensor.sizes;
      v.shape_known = true;
      v.constant = a.tensor.data;
      const int index = emit_tensor(v);
      attribute_constants_.emplace_back(index, a.tensor.data);
      return index;
    }
    return emit_value([&](fb::ValueKindUnion& u) {
      switch (a.kind) {
        case ops::AttrKind::Int: {
          fb::IntT x;
          x.value = a.i;
          u.Set(std::move(x));
          break;
        }
        case ops::AttrKind::Float: {
          fb::FloatT x;
          x.value = a.f;
          u.Set(std::move(x));
          break;
        }
        case ops::AttrKind::String: {
          fb::StringT x;
          x.value = a.s;
          u.Set(std::move(x));
          break;
        }
        case ops::AttrKind::Ints: {
          fb::IntListT x;
          x.items.assign(a.ints.begin(), a.ints.end());
          u.Set(std::move(x));
          break;
        }
        case ops::AttrKind::Floats: {
          fb::FloatListT x;
          x.items.assign(a.floats.begin(), a.floats.end());
          u.Set(std::move(x));
          break;
        }
        default:
          u.Set(fb::NullT());
          break;
      }
    });
  }

  fb::TensorT& tensor_of(int fb_value) { return *method_->values[fb_value]->value.AsTensor(); }

  int operator_index(const IrNode& n) {
    const auto key = std::make_pair(n.domain + "/" + n.op_type, n.opset);
    if (auto it = operators_.find(key); it != operators_.end()) return it->second;
    auto op = std::make_unique<fb::OperatorT>();
    op->name = n.op_type;
    op->domain = n.domain;
    op->opset = n.opset;
    method_->operators.push_back(std::move(op));
    const int index = static_cast<int>(method_->operators.size()) - 1;
    operators_[key] = index;
    return index;
  }

  // Constants into one segment (graph constants in value order, then tensor attributes, each
  // 64-byte aligned), every other tensor into its planned arena slot, arenas, blob segments.
  Status storage() {
    std::vector<uint8_t> constants;
    bool any_constant = false;
    auto place_constant = [&](int fb_value, const std::vector<uint8_t>& data) {
      any_constant = true;
      fb::TensorT& t = tensor_of(fb_value);
      constants.resize(align_up(constants.size(), 64));
      t.allocation = fb::AllocationKind::Constant;
      t.constant_segment = 0;
      t.offset = constants.size();
      constants.insert(constants.end(), data.begin(), data.end());
      out_.summary.constant_bytes += data.size();
    };
    for (const auto& [v, fbv] : fb_index_) {
      const IrValue& iv = g_.values[v];
      if (iv.constant) {
        place_constant(fbv, *iv.constant);
        continue;
      }
      auto slot = memory_.slots.find(v);
      BATON_CHECK_OR_RETURN(slot != memory_.slots.end(), Internal,
                            "value '{}' reached emission without a planned slot", iv.name);
      fb::TensorT& t = tensor_of(fbv);
      t.allocation = fb::AllocationKind::Arena;
      t.arena = slot->second.arena;
      t.offset = slot->second.offset;
    }
    for (const auto& [fbv, data] : attribute_constants_) place_constant(fbv, *data);
    for (const MemoryPlan::Arena& a : memory_.arenas) {
      auto arena = std::make_unique<fb::ArenaT>();
      arena->device_type = fb_device(a.device);
      arena->device_index = a.device.index;
      arena->size = a.size;
      method_->arenas.push_back(std::move(arena));
      out_.summary.arenas.emplace_back(a.device.to_string(), a.size);
    }
    // The constants segment exists whenever a tensor refers to it, even when every constant is
    // empty (a [0, 3] initializer): its tensors name segment 0, which must not be an engine blob
    // or missing.
    const int blob_base = any_constant ? 1 : 0;
    for (auto& d : method_->delegates) d->blob_segment += blob_base;
    if (any_constant) out_.segments.push_back(std::move(constants));
    for (const std::vector<uint8_t>* b : blobs_) out_.segments.push_back(*b);
    return Status();
  }

  const EmitInput& in_;
  const Graph& g_;
  const Schedule& schedule_;
  const ValuePlan& memory_;
  EmitOutput out_;
  fb::MethodT* method_ = nullptr;
  std::map<int, int> fb_index_;                   // graph value -> program value
  std::map<sym::SizeExpr, uint32_t> expr_index_;  // IR expression -> Method.size_exprs index
  std::vector<std::pair<int, std::shared_ptr<const std::vector<uint8_t>>>> attribute_constants_;
  std::vector<const std::vector<uint8_t>*> blobs_;
  std::map<std::pair<std::string, int>, int> operators_;
  int null_index_ = -1;
};

}  // namespace

Result<EmitOutput> emit_program(const EmitInput& input) { return Emitter(input).run(); }

}  // namespace baton::compiler
