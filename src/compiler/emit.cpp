#include "compiler/emit.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "baton/core/check.h"
#include "baton/core/tensor.h"
#include "compiler/memory_plan.h"
#include "compiler/passes.h"

namespace baton::compiler {
namespace {

enum class StepKind { Kernel, Delegate, Copy };

struct Step {
  StepKind kind = StepKind::Kernel;
  int node = -1;
  int partition = -1;
  std::vector<int> inputs;  // IR value ids; -1 = absent optional input
  std::vector<int> outputs;
  Device device;
};

// The working set of values: the graph's plus host/device twins made by transfers.
struct ValueTable {
  std::vector<IrValue> values;
  std::vector<Device> device;
  std::map<std::pair<int, std::pair<int, int>>, int> twins;  // (value, device) -> twin

  // The copy of `v` on `d` and whether it was made just now (so the caller inserts the copy).
  std::pair<int, bool> twin(int v, Device d) {
    const auto key = std::make_pair(v, std::make_pair(static_cast<int>(d.type), int{d.index}));
    if (auto it = twins.find(key); it != twins.end()) return {it->second, false};
    IrValue copy = values[v];
    copy.name = values[v].name + "@" + d.to_string();
    copy.constant = nullptr;
    values.push_back(std::move(copy));
    device.push_back(d);
    const int id = static_cast<int>(values.size()) - 1;
    twins[key] = id;
    return {id, true};
  }
};

fb::DeviceType fb_device(Device d) { return static_cast<fb::DeviceType>(d.type); }

class Emitter {
 public:
  explicit Emitter(const EmitInput& in) : in_(in), g_(*in.graph) {
    table_.values = g_.values;
    table_.device.assign(g_.values.size(), Device::cpu());
  }

  Result<EmitOutput> run() {
    BATON_TRY(schedule());
    propagate_devices();
    insert_transfers();
    BATON_TRY(build());
    return std::move(out_);
  }

 private:
  Status schedule() {
    std::vector<uint8_t> emitted(in_.partitions->partitions.size(), 0);
    for (int node : in_.partitions->order) {
      const IrNode& n = g_.nodes[node];
      if (n.partition >= 0) {
        if (emitted[n.partition]) continue;
        emitted[n.partition] = 1;
        const Partition& p = in_.partitions->partitions[n.partition];
        BATON_CHECK_OR_RETURN(static_cast<size_t>(p.index) < in_.lowered->size() &&
                                  static_cast<size_t>(p.index) < in_.labels.size(),
                              InvalidArgument,
                              "partition '{}' has no lowered blob: every delegate call needs one",
                              p.name);
        Step s;
        s.kind = StepKind::Delegate;
        s.partition = p.index;
        s.inputs = p.inputs;
        s.outputs = p.outputs;
        steps_.push_back(std::move(s));
      } else {
        Step s;
        s.kind = StepKind::Kernel;
        s.node = node;
        s.inputs = n.inputs;
        s.outputs = n.outputs;
        s.device = Device::cpu();
        steps_.push_back(std::move(s));
      }
    }
    return Status();
  }

  // One pass over the delegate calls: each call runs on its partition's target_device, and every
  // tensor it produces (each output of a multi-output call included) lives there. What it reads
  // must be there too; insert_transfers makes it so. Tensors no delegate touches stay on the cpu.
  void propagate_devices() {
    for (Step& s : steps_) {
      if (s.kind != StepKind::Delegate) continue;
      s.device = in_.labels[s.partition];
      for (int v : s.outputs) table_.device[v] = s.device;
    }
    if (in_.io == MethodIo::Device) {
      // A method input lives where the first instruction that reads it runs.
      for (int v : g_.inputs) {
        for (const Step& s : steps_) {
          if (std::find(s.inputs.begin(), s.inputs.end(), v) != s.inputs.end()) {
            table_.device[v] = s.device;
            break;
          }
        }
      }
    }
  }

  // A consumer on another device reads a twin made by a copy right before its first use there;
  // later consumers on that device share the twin. So values pass from partition to partition on
  // one device without visiting the host, and a device->host->same-device round trip never
  // appears: the device value stays valid for every later reader on its device.
  void insert_transfers() {
    std::vector<Step> result;
    for (Step& s : steps_) {
      for (int& v : s.inputs) {
        if (v < 0 || table_.values[v].constant) continue;
        if (table_.device[v] == s.device) continue;
        const auto [twin, fresh] = table_.twin(v, s.device);
        if (fresh) result.push_back(copy_step(v, twin));
        v = twin;
      }
      result.push_back(std::move(s));
    }
    outputs_ = g_.outputs;
    if (in_.io == MethodIo::Host) {
      for (int& v : outputs_) {
        if (table_.values[v].constant || table_.device[v].is_cpu()) continue;
        const auto [twin, fresh] = table_.twin(v, Device::cpu());
        if (fresh) result.push_back(copy_step(v, twin));
        v = twin;
      }
    }
    steps_ = std::move(result);
  }

  Step copy_step(int from, int to) {
    Step c;
    c.kind = StepKind::Copy;
    c.inputs = {from};
    c.outputs = {to};
    c.device = table_.device[to];
    return c;
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
      table_.values.push_back(std::move(v));
      table_.device.push_back(Device::cpu());
      return tensor_value(static_cast<int>(table_.values.size()) - 1);
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

  // Tensor values are emitted once each; storage is filled in after planning.
  int tensor_value(int v) {
    if (auto it = fb_index_.find(v); it != fb_index_.end()) return it->second;
    const IrValue& iv = table_.values[v];
    const int index = emit_value([&](fb::ValueKindUnion& u) {
      fb::TensorT t;
      t.name = iv.name;
      t.dtype = static_cast<fb::ScalarType>(iv.dtype);
      t.sizes = iv.sizes;
      for (size_t d = 0; d < iv.sizes.size(); ++d) t.dim_order.push_back(static_cast<uint8_t>(d));
      const Device dev = iv.constant ? Device::cpu() : table_.device[v];
      t.device_type = fb_device(dev);
      t.device_index = dev.index;
      u.Set(std::move(t));
    });
    fb_index_[v] = index;
    return index;
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

  Status build() {
    auto method = std::make_unique<fb::MethodT>();
    method_ = method.get();
    method_->name = "forward";
    for (int v : g_.inputs) method_->inputs.push_back(tensor_value(v));

    std::vector<std::vector<uint8_t>> blobs;
    for (const Step& s : steps_) {
      auto ins = std::make_unique<fb::InstructionT>();
      switch (s.kind) {
        case StepKind::Kernel: {
          const IrNode& n = g_.nodes[s.node];
          fb::KernelCallT k;
          k.operator_ = operator_index(n);
          k.name = n.name;
          for (int v : s.inputs) k.inputs.push_back(v < 0 ? null_value() : tensor_value(v));
          for (const ops::AttrValue& a : n.attrs) k.attributes.push_back(attribute_value(a));
          for (int v : s.outputs) k.outputs.push_back(tensor_value(v));
          ins->instruction.Set(std::move(k));
          ++out_.summary.kernel_calls;
          break;
        }
        case StepKind::Delegate: {
          const Partition& p = in_.partitions->partitions[s.partition];
          const LoweredPartition& lp = (*in_.lowered)[s.partition];
          auto d = std::make_unique<fb::DelegateT>();
          d->backend = in_.backend_ids[s.partition];
          d->name = p.name;
          for (const auto& [key, value] : lp.compile_specs) {
            auto cs = std::make_unique<fb::CompileSpecT>();
            cs->key = key;
            cs->value = value;
            d->compile_specs.push_back(std::move(cs));
          }
          d->blob_segment = static_cast<int>(blobs.size());  // rebased after constants below
          blobs.push_back(lp.blob);
          method_->delegates.push_back(std::move(d));
          fb::DelegateCallT call;
          call.delegate = static_cast<int>(method_->delegates.size()) - 1;
          for (int v : s.inputs) call.inputs.push_back(tensor_value(v));
          for (int v : s.outputs) call.outputs.push_back(tensor_value(v));
          ins->instruction.Set(std::move(call));
          ++out_.summary.delegate_calls;
          break;
        }
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
    for (int v : outputs_) method_->outputs.push_back(tensor_value(v));

    // Constants: one segment, each tensor 64-byte aligned.
    std::vector<uint8_t> constants;
    std::vector<BufferRequest> requests;
    std::vector<int> request_value;
    for (const auto& [ir, fbv] : fb_index_) {
      const IrValue& iv = table_.values[ir];
      fb::TensorT& t = tensor_of(fbv);
      if (iv.constant) {
        constants.resize(align_up(constants.size(), 64));
        t.allocation = fb::AllocationKind::Constant;
        t.constant_segment = 0;
        t.offset = constants.size();
        constants.insert(constants.end(), iv.constant->begin(), iv.constant->end());
        out_.summary.constant_bytes += iv.constant->size();
        continue;
      }
      BufferRequest r;
      const auto bytes = checked_nbytes(iv.dtype, iv.sizes);
      BATON_CHECK_OR_RETURN(bytes.has_value(), Internal,
                            "value {} of shape {} reached emission with an overflowing size", ir,
                            shape_to_string(iv.sizes));
      r.bytes = *bytes;
      r.device = table_.device[ir];
      r.first = std::numeric_limits<int>::max();
      r.last = -1;
      requests.push_back(r);
      request_value.push_back(ir);
    }
    // Lifetimes from the final instruction order.
    std::map<int, size_t> request_of;
    for (size_t i = 0; i < request_value.size(); ++i) request_of[request_value[i]] = i;
    auto touch = [&](int v, int step) {
      auto it = request_of.find(v);
      if (it == request_of.end()) return;
      BufferRequest& r = requests[it->second];
      r.first = std::min(r.first, step);
      r.last = std::max(r.last, step);
    };
    const int end = static_cast<int>(steps_.size());
    // Method inputs stay intact for the whole call: a caller may set them once and execute many
    // times.
    for (int v : g_.inputs) {
      touch(v, -1);
      touch(v, end);
    }
    for (int s = 0; s < end; ++s) {
      for (int v : steps_[s].inputs) touch(v, s);
      for (int v : steps_[s].outputs) touch(v, s);
    }
    for (int v : outputs_) touch(v, end);
    const MemoryPlan plan = plan_memory(requests);
    for (const auto& a : plan.arenas) {
      auto arena = std::make_unique<fb::ArenaT>();
      arena->device_type = fb_device(a.device);
      arena->device_index = a.device.index;
      arena->size = a.size;
      method_->arenas.push_back(std::move(arena));
      out_.summary.arenas.emplace_back(a.device.to_string(), a.size);
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      fb::TensorT& t = tensor_of(fb_index_[request_value[i]]);
      t.allocation = fb::AllocationKind::Arena;
      t.arena = plan.arena[i];
      t.offset = plan.offset[i];
    }

    const int blob_base = constants.empty() ? 0 : 1;
    for (auto& d : method_->delegates) d->blob_segment += blob_base;
    if (!constants.empty()) out_.segments.push_back(std::move(constants));
    for (auto& b : blobs) out_.segments.push_back(std::move(b));

    out_.program.producer = in_.producer;
    out_.program.methods.push_back(std::move(method));
    out_.summary.opset = g_.opset;
    return Status();
  }

  const EmitInput& in_;
  const Graph& g_;
  ValueTable table_;
  std::vector<Step> steps_;
  std::vector<int> outputs_;
  EmitOutput out_;
  fb::MethodT* method_ = nullptr;
  std::map<int, int> fb_index_;
  std::map<std::pair<std::string, int>, int> operators_;
  int null_index_ = -1;
};

}  // namespace

Result<EmitOutput> emit_program(const EmitInput& input) { return Emitter(input).run(); }

}  // namespace baton::compiler
