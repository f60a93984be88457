// The semantic pass over one method of a program FlatBuffers verified: every index in range,
// every tensor inside its arena or segment, argument kinds, devices that match their arenas, no
// instruction writing over its own inputs (program_file.h lists it all).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/program_file.h"
#include "format/program_file_internal.h"
#include "format/size_exprs.h"

// Header-only XXH3 (Debian's libxxhash-dev): the runtime links no xxhash library.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "baton/core/check.h"
#include "baton/core/device.h"
#include "baton/core/dtype.h"
#include "baton/core/file.h"
#include "baton/core/tensor.h"

namespace baton::format::detail {
namespace {

struct ArgRange {
  int arena;
  uint64_t begin, end;
  bool written;
  const char* list;  // "inputs", "outputs", "src", "dst"
  uint32_t position;
  int value;
};

// Walks one method and checks everything the runtime will rely on. Linear in the method's size
// (plus a sort of each instruction's arguments).
class MethodVerifier {
 public:
  MethodVerifier(const fb::Method& method, int method_index, const fb::Program& program,
                 const uint8_t* file_begin)
      : m_(method), program_(program), file_begin_(file_begin) {
    where_ = fmt::format("methods[{}] ('{}')", method_index, str(method.name()));
  }

  Status run() {
    BATON_TRY(verify_arenas());
    BATON_TRY(verify_dynamic());
    BATON_TRY(verify_values());
    BATON_TRY(verify_io());
    BATON_TRY(verify_state());
    BATON_TRY(verify_operators());
    BATON_TRY(verify_delegates());
    BATON_TRY(verify_instructions());
    BATON_TRY(verify_data_symbols());
    return Status();
  }

 private:
  // A data-dependent symbol's source is a tensor that has the symbol as one of its dimensions and
  // is written by exactly one kernel instruction (the runtime binds the symbol when that kernel
  // has run) and by nothing else: not a delegate call or a copy. No input's sizes may depend on
  // such a symbol (so no source is an input).
  Status verify_data_symbols() {
    // Which size expressions depend on a data-dependent symbol (operands come first).
    const uint32_t nexpr = vsize(m_.size_exprs());
    std::vector<uint8_t> data_dependent(nexpr, 0);
    bool any = false;
    for (uint32_t i = 0; i < nexpr; ++i) {
      const fb::SizeExpr* e = m_.size_exprs()->Get(i);
      if (e->op() == fb::SizeOp::Symbol) {
        data_dependent[i] = m_.symbols()->Get(static_cast<uint32_t>(e->value()))->source() >= 0;
      }
      for (uint32_t j = 0; j < vsize(e->operands()); ++j) {
        data_dependent[i] |= data_dependent[e->operands()->Get(j)];
      }
      any = any || data_dependent[i];
    }
    if (!any) return Status();
    // A call's inputs give their sizes before it runs: none may depend on a data-dependent size.
    for (uint32_t in = 0; in < vsize(m_.inputs()); ++in) {
      const fb::Tensor* t = tensor_at(m_.inputs()->Get(in));
      for (uint32_t d = 0; t != nullptr && d < vsize(t->dims()); ++d) {
        BATON_CHECK_OR_RETURN(!data_dependent[t->dims()->Get(d)], InvalidProgram,
                              "{}: input '{}' axis {} depends on a data-dependent size, which "
                              "only a kernel gives while the call runs",
                              where_, str(t->name()), d);
      }
    }
    std::vector<int> sources;
    for (uint32_t s = 0; s < vsize(m_.symbols()); ++s) {
      const fb::Symbol* sym = m_.symbols()->Get(s);
      if (sym->source() < 0) continue;
      const std::string field = fmt::format("{}.symbols[{}] ('{}')", where_, s, str(sym->name()));
      const int v = sym->source();
      // The kernel may produce any count from none: the range the runtime checks is 0..max.
      BATON_CHECK_OR_RETURN(sym->min() == 0, InvalidProgram,
                            "{}: a data-dependent size's range starts at 0, not {}", field,
                            sym->min());
      BATON_CHECK_OR_RETURN(std::find(sources.begin(), sources.end(), v) == sources.end(),
                            InvalidProgram, "{}: source = {} is another symbol's source too", field,
                            v);
      sources.push_back(v);
      BATON_CHECK_OR_RETURN(
          static_cast<uint32_t>(v) < vsize(m_.values()) && tensor_at(v) != nullptr, InvalidProgram,
          "{}: source = {} is not a tensor value", field, v);
      const fb::Tensor* t = tensor_at(v);
      bool has_dim = false;
      for (uint32_t d = 0; d < vsize(t->dims()); ++d) {
        const fb::SizeExpr* e = m_.size_exprs()->Get(t->dims()->Get(d));
        has_dim = has_dim || (e->op() == fb::SizeOp::Symbol && e->value() == s);
      }
      BATON_CHECK_OR_RETURN(has_dim, InvalidProgram,
                            "{}: its source '{}' has no dimension that is the symbol", field,
                            str(t->name()));
      // (A source that is an input was refused above: its dims name the symbol.)
      int kernels = 0, others = 0;
      auto writes = [&](const flatbuffers::Vector<int32_t>* outs) {
        for (uint32_t o = 0; outs != nullptr && o < outs->size(); ++o) {
          if (outs->Get(o) == v) return true;
        }
        return false;
      };
      for (uint32_t i = 0; i < vsize(m_.instructions()); ++i) {
        const fb::Instruction* ins = m_.instructions()->Get(i);
        if (const auto* k = ins->instruction_as_KernelCall()) {
          kernels += writes(k->outputs()) ? 1 : 0;
        } else if (const auto* d = ins->instruction_as_DelegateCall()) {
          others += writes(d->outputs()) ? 1 : 0;
        } else if (const auto* c = ins->instruction_as_DeviceCopy()) {
          others += c->dst() == v ? 1 : 0;
        }
      }
      BATON_CHECK_OR_RETURN(kernels == 1 && others == 0, InvalidProgram,
                            "{}: its source '{}' must be written by one kernel instruction and "
                            "nothing else; {} kernel calls and {} other instructions write it",
                            field, str(t->name()), kernels, others);
    }
    // One kernel gives one count (the runtime binds one symbol per instruction).
    for (uint32_t i = 0; i < vsize(m_.instructions()); ++i) {
      const auto* k = m_.instructions()->Get(i)->instruction_as_KernelCall();
      if (k == nullptr) continue;
      int written = 0;
      for (uint32_t o = 0; o < vsize(k->outputs()); ++o) {
        const int v = k->outputs()->Get(o);
        written += std::find(sources.begin(), sources.end(), v) != sources.end() ? 1 : 0;
      }
      BATON_CHECK_OR_RETURN(written <= 1, InvalidProgram,
                            "{}.instructions[{}] writes {} data-dependent sizes' sources; a kernel "
                            "gives at most one",
                            where_, i, written);
    }
    return Status();
  }

  Status verify_device(fb::DeviceType type, int16_t index, const std::string& field) {
    const int code = static_cast<int>(type);
    BATON_CHECK_OR_RETURN(is_valid_device_type(code), InvalidProgram,
                          "{}: device_type = {} is not a known device type (0 = cpu, 1 = cuda)",
                          field, code);
    BATON_CHECK_OR_RETURN(index >= 0 && index <= kMaxDeviceIndex, InvalidProgram,
                          "{}: device_index = {} is out of range [0, {}]", field, index,
                          kMaxDeviceIndex);
    BATON_CHECK_OR_RETURN(type != fb::DeviceType::CPU || index == 0, InvalidProgram,
                          "{}: a cpu device must have device_index 0, found {}", field, index);
    return Status();
  }

  Status verify_arenas() {
    for (uint32_t i = 0; i < vsize(m_.arenas()); ++i) {
      const fb::Arena* a = m_.arenas()->Get(i);
      const std::string field = fmt::format("{}.arenas[{}]", where_, i);
      BATON_TRY(verify_device(a->device_type(), a->device_index(), field));
      BATON_CHECK_OR_RETURN(a->size() <= kMaxBytes, InvalidProgram,
                            "{}.size = {} exceeds the format's limit of {} bytes", field, a->size(),
                            kMaxBytes);
    }
    return Status();
  }

  // Symbols and size expressions (format version 4): well-formed, in dependency order, and
  // computable with every symbol at its maximum (the values tensors' recorded sizes must equal).
  Status verify_dynamic() {
    constexpr uint32_t kMaxSymbols = 64;
    constexpr uint32_t kMaxExprs = 1u << 20;
    constexpr int64_t kMaxSymbolSize = int64_t{1} << 40;
    const uint32_t nsym = vsize(m_.symbols());
    BATON_CHECK_OR_RETURN(nsym <= kMaxSymbols, InvalidProgram,
                          "{}.symbols has {} entries, more than the format's {}", where_, nsym,
                          kMaxSymbols);
    std::vector<int64_t> max(nsym);
    for (uint32_t s = 0; s < nsym; ++s) {
      const fb::Symbol* sym = m_.symbols()->Get(s);
      const std::string field = fmt::format("{}.symbols[{}]", where_, s);
      BATON_CHECK_OR_RETURN(!str(sym->name()).empty(), InvalidProgram, "{} has no name", field);
      // A data-dependent size (source >= 0: NonZero's count) may be 0; a call's inputs give
      // the others, whose ranges start at 1.
      const int64_t lowest = sym->source() >= 0 ? 0 : 1;
      BATON_CHECK_OR_RETURN(
          lowest <= sym->min() && sym->min() <= sym->max() && sym->max() <= kMaxSymbolSize,
          InvalidProgram, "{} ('{}'): the range {}..{} is not within {}..{}", field,
          str(sym->name()), sym->min(), sym->max(), lowest, kMaxSymbolSize);
      BATON_CHECK_OR_RETURN(sym->source() >= -1, InvalidProgram, "{} ('{}'): source = {}", field,
                            str(sym->name()), sym->source());
      BATON_CHECK_OR_RETURN(
          sym->opt() == 0 || (sym->min() <= sym->opt() && sym->opt() <= sym->max()), InvalidProgram,
          "{} ('{}'): opt = {} lies outside {}..{}", field, str(sym->name()), sym->opt(),
          sym->min(), sym->max());
      max[s] = sym->max();
    }
    const uint32_t n = vsize(m_.size_exprs());
    BATON_CHECK_OR_RETURN(n <= kMaxExprs, InvalidProgram,
                          "{}.size_exprs has {} entries, more than the format's {}", where_, n,
                          kMaxExprs);
    for (uint32_t i = 0; i < n; ++i) {
      const fb::SizeExpr* e = m_.size_exprs()->Get(i);
      const std::string field = fmt::format("{}.size_exprs[{}]", where_, i);
      const uint32_t k = vsize(e->operands());
      switch (e->op()) {
        case fb::SizeOp::Const:
          BATON_CHECK_OR_RETURN(k == 0, InvalidProgram, "{}: a constant has {} operands", field, k);
          break;
        case fb::SizeOp::Symbol:
          BATON_CHECK_OR_RETURN(k == 0 && e->value() >= 0 && e->value() < nsym, InvalidProgram,
                                "{}: symbol {} is out of range [0, {}) (or has operands)", field,
                                e->value(), nsym);
          break;
        case fb::SizeOp::Add:
        case fb::SizeOp::Mul:
          BATON_CHECK_OR_RETURN(k >= 2, InvalidProgram, "{}: {} needs two or more operands, has {}",
                                field, fb::EnumNameSizeOp(e->op()), k);
          break;
        case fb::SizeOp::FloorDiv:
        case fb::SizeOp::CeilDiv:
        case fb::SizeOp::Min:
        case fb::SizeOp::Max:
          BATON_CHECK_OR_RETURN(k == 2, InvalidProgram, "{}: {} needs two operands, has {}", field,
                                fb::EnumNameSizeOp(e->op()), k);
          break;
        default:
          return BATON_ERROR(InvalidProgram, "{}: op {} is not a known size operation", field,
                             static_cast<int>(e->op()));
      }
      for (uint32_t j = 0; j < k; ++j) {
        BATON_CHECK_OR_RETURN(e->operands()->Get(j) < i, InvalidProgram,
                              "{}.operands[{}] = {}: operands must come earlier in the list", field,
                              j, e->operands()->Get(j));
      }
    }
    max_values_.assign(n, 0);
    if (Status st = evaluate_size_exprs(m_, max, max_values_); !st.ok()) {
      return BATON_ERROR(InvalidProgram, "{}.size_exprs with every symbol at its maximum: {}",
                         where_, st.message());
    }
    return Status();
  }

  Status verify_dims(const fb::Tensor& t, const std::string& field) {
    const uint32_t rank = vsize(t.sizes());
    const uint32_t n = vsize(t.dims());
    if (n == 0) return Status();
    BATON_CHECK_OR_RETURN(n == rank, InvalidProgram, "{}.dims has {} entries for a rank-{} tensor",
                          field, n, rank);
    BATON_CHECK_OR_RETURN(t.allocation() != fb::AllocationKind::Constant, InvalidProgram,
                          "{}: a constant cannot have dynamic dims", field);
    for (uint32_t d = 0; d < n; ++d) {
      const uint32_t e = t.dims()->Get(d);
      BATON_CHECK_OR_RETURN(e < max_values_.size(), InvalidProgram,
                            "{}.dims[{}] = {} is out of range [0, {})", field, d, e,
                            max_values_.size());
      BATON_CHECK_OR_RETURN(max_values_[e] == t.sizes()->Get(d), InvalidProgram,
                            "{}.dims[{}]: the expression's largest value {} disagrees with "
                            "sizes[{}] = {}",
                            field, d, max_values_[e], d, t.sizes()->Get(d));
    }
    return Status();
  }

  Status verify_tensor(const fb::Tensor& t, const std::string& field, uint64_t* bytes) {
    const int dtype_code = static_cast<int>(t.dtype());
    BATON_CHECK_OR_RETURN(is_valid_dtype(dtype_code), InvalidProgram,
                          "{}.dtype = {} is not a known element type", field, dtype_code);
    BATON_TRY(check_aligned(t.sizes(), file_begin_, field + ".sizes"));
    const uint32_t rank = vsize(t.sizes());
    BATON_CHECK_OR_RETURN(rank <= static_cast<uint32_t>(kMaxRank), InvalidProgram,
                          "{}.sizes has rank {}, more than the supported {}", field, rank,
                          kMaxRank);
    for (uint32_t d = 0; d < rank; ++d) {
      BATON_CHECK_OR_RETURN(t.sizes()->Get(d) >= 0, InvalidProgram, "{}.sizes[{}] = {} is negative",
                            field, d, t.sizes()->Get(d));
    }
    const std::span<const int64_t> sizes = span_of(t.sizes());
    auto nbytes = checked_nbytes(static_cast<DType>(dtype_code), sizes);
    BATON_CHECK_OR_RETURN(nbytes.has_value() && *nbytes <= kMaxBytes, InvalidProgram,
                          "{}.sizes {}: the element count or byte size overflows (limit {} bytes)",
                          field, shape_to_string(sizes), kMaxBytes);
    *bytes = *nbytes;
    if (uint32_t n = vsize(t.dim_order()); n != 0) {
      BATON_CHECK_OR_RETURN(n == rank, InvalidProgram,
                            "{}.dim_order has {} entries for a rank-{} tensor", field, n, rank);
      for (uint32_t d = 0; d < n; ++d) {
        BATON_CHECK_OR_RETURN(t.dim_order()->Get(d) == d, NotSupported,
                              "{}.dim_order[{}] = {}: only row-major (contiguous) tensors are "
                              "supported by this runtime",
                              field, d, t.dim_order()->Get(d));
      }
    }
    BATON_TRY(verify_device(t.device_type(), t.device_index(), field));
    BATON_TRY(verify_dims(t, field));
    // Kernels read elements through typed pointers: the bytes must start on an element boundary.
    const size_t element = dtype_size(static_cast<DType>(dtype_code));
    BATON_CHECK_OR_RETURN(t.allocation() == fb::AllocationKind::None || t.offset() % element == 0,
                          InvalidProgram,
                          "{}.offset = {} is not a multiple of the {}-byte {} element", field,
                          t.offset(), element, dtype_name(static_cast<DType>(dtype_code)));
    switch (t.allocation()) {
      case fb::AllocationKind::None:
        break;
      case fb::AllocationKind::Constant: {
        const int seg = t.constant_segment();
        BATON_CHECK_OR_RETURN(seg >= 0 && static_cast<uint32_t>(seg) < vsize(program_.segments()),
                              InvalidProgram, "{}.constant_segment = {} is out of range [0, {})",
                              field, seg, vsize(program_.segments()));
        const uint64_t seg_size = program_.segments()->Get(seg)->size();
        uint64_t end = 0;
        BATON_CHECK_OR_RETURN(!add_overflows(t.offset(), *nbytes, &end) && end <= seg_size,
                              InvalidProgram,
                              "{}: constant bytes [{}, {} + {}) lie outside segment {} of {} bytes",
                              field, t.offset(), t.offset(), *nbytes, seg, seg_size);
        BATON_CHECK_OR_RETURN(t.device_type() == fb::DeviceType::CPU, InvalidProgram,
                              "{}: constants must live on the cpu, found {}", field,
                              device_of(t).to_string());
        break;
      }
      case fb::AllocationKind::Arena: {
        const int arena = t.arena();
        BATON_CHECK_OR_RETURN(arena >= 0 && static_cast<uint32_t>(arena) < vsize(m_.arenas()),
                              InvalidProgram, "{}.arena = {} is out of range [0, {})", field, arena,
                              vsize(m_.arenas()));
        const fb::Arena* a = m_.arenas()->Get(arena);
        uint64_t end = 0;
        BATON_CHECK_OR_RETURN(!add_overflows(t.offset(), *nbytes, &end) && end <= a->size(),
                              InvalidProgram,
                              "{}: bytes [{}, {} + {}) lie outside arena {} of {} bytes", field,
                              t.offset(), t.offset(), *nbytes, arena, a->size());
        BATON_CHECK_OR_RETURN(
            a->device_type() == t.device_type() && a->device_index() == t.device_index(),
            InvalidProgram, "{} is on {} but its arena {} is on {}", field,
            device_of(t).to_string(), arena, device_of(*a).to_string());
        break;
      }
      default:
        return BATON_ERROR(InvalidProgram, "{}.allocation = {} is not a known allocation kind",
                           field, static_cast<int>(t.allocation()));
    }
    return Status();
  }

  Status verify_values() {
    nbytes_.assign(vsize(m_.values()), 0);
    for (uint32_t i = 0; i < vsize(m_.values()); ++i) {
      const fb::Value* v = m_.values()->Get(i);
      const std::string field = fmt::format("{}.values[{}]", where_, i);
      // FlatBuffers' verifier accepts a union whose type is set but whose table is absent.
      BATON_CHECK_OR_RETURN(v->value() != nullptr || v->value_type() == fb::ValueKind::NONE,
                            InvalidProgram,
                            "{}: the value's {} table is missing (the file is damaged or was "
                            "written by a faulty tool; compile the model again)",
                            field, fb::EnumNameValueKind(v->value_type()));
      switch (v->value_type()) {
        case fb::ValueKind::Null:
        case fb::ValueKind::Int:
        case fb::ValueKind::Float:
          break;
        case fb::ValueKind::String:
          // No text is the empty string: FlatBuffers' object API leaves an empty string out
          // (FusedConv's and Linear's `activation` when there is none), and every reader takes
          // a null string as empty.
          break;
        case fb::ValueKind::IntList:
          BATON_TRY(check_aligned(v->value_as_IntList()->items(), file_begin_, field + ".items"));
          break;
        case fb::ValueKind::FloatList:
          BATON_TRY(check_aligned(v->value_as_FloatList()->items(), file_begin_, field + ".items"));
          break;
        case fb::ValueKind::Tensor:
          BATON_TRY(verify_tensor(
              *v->value_as_Tensor(),
              fmt::format("{} (tensor '{}')", field, str(v->value_as_Tensor()->name())),
              &nbytes_[i]));
          break;
        default:
          return BATON_ERROR(InvalidProgram, "{}: value kind {} is not known", field,
                             static_cast<int>(v->value_type()));
      }
    }
    return Status();
  }

  const fb::Tensor* tensor_at(int index) const {
    if (index < 0 || static_cast<uint32_t>(index) >= vsize(m_.values())) return nullptr;
    return m_.values()->Get(index)->value_as_Tensor();
  }

  Status check_index(int index, const std::string& field) {
    BATON_CHECK_OR_RETURN(index >= 0 && static_cast<uint32_t>(index) < vsize(m_.values()),
                          InvalidProgram, "{} = {} is out of range [0, {})", field, index,
                          vsize(m_.values()));
    return Status();
  }

  Status check_tensor(int index, const std::string& field) {
    BATON_TRY(check_index(index, field));
    BATON_CHECK_OR_RETURN(tensor_at(index) != nullptr, InvalidProgram,
                          "{} = {} refers to a value of kind {}, not a tensor", field, index,
                          fb::EnumNameValueKind(m_.values()->Get(index)->value_type()));
    return Status();
  }

  // A tensor an instruction writes must be planned memory (never a read-only constant).
  Status check_writable(int index, const std::string& field) {
    BATON_TRY(check_tensor(index, field));
    BATON_CHECK_OR_RETURN(tensor_at(index)->allocation() == fb::AllocationKind::Arena,
                          InvalidProgram,
                          "{} = {} (tensor '{}') is written by the instruction but is not in an "
                          "arena",
                          field, index, str(tensor_at(index)->name()));
    return Status();
  }

  // A tensor that is read (by an instruction, or by the caller as a method output) must have
  // storage, unless it is a method input the caller binds.
  Status check_readable(int index, const std::string& field, std::string_view reader) {
    BATON_TRY(check_tensor(index, field));
    BATON_CHECK_OR_RETURN(
        is_input_[index] || tensor_at(index)->allocation() != fb::AllocationKind::None,
        InvalidProgram, "{} = {} (tensor '{}') is read {} but has no storage", field, index,
        str(tensor_at(index)->name()), reader);
    return Status();
  }

  // Method inputs are arena memory that set_input copies into, or memory the caller binds (never
  // a read-only constant); method outputs have storage the caller can read. Records which values
  // are inputs as a flag per value for check_readable (searching the inputs on every read made
  // verification quadratic).
  Status verify_io() {
    is_input_.assign(vsize(m_.values()), 0);
    for (uint32_t i = 0; i < vsize(m_.inputs()); ++i) {
      const int v = m_.inputs()->Get(i);
      const std::string field = fmt::format("{}.inputs[{}]", where_, i);
      BATON_TRY(check_tensor(v, field));
      BATON_CHECK_OR_RETURN(tensor_at(v)->allocation() != fb::AllocationKind::Constant,
                            InvalidProgram,
                            "{} = {} (tensor '{}') is a constant; a method input must be in an "
                            "arena or have no storage",
                            field, v, str(tensor_at(v)->name()));
      // One tensor is one input: binding it twice could only mean two callers' data in one
      // place, and the runtime keeps one record per input tensor.
      BATON_CHECK_OR_RETURN(is_input_[v] == 0, InvalidProgram,
                            "{} = {} (tensor '{}') is listed as an input twice", field, v,
                            str(tensor_at(v)->name()));
      is_input_[v] = 1;
    }
    for (uint32_t i = 0; i < vsize(m_.outputs()); ++i) {
      BATON_TRY(check_readable(m_.outputs()->Get(i), fmt::format("{}.outputs[{}]", where_, i),
                               "as a method output"));
    }
    return Status();
  }

  // State (Method.state, version 5): each entry's value and update are arena tensors on the
  // same bytes with the same dtype, sizes and dims, neither a method input or output nor in
  // another entry, and the name is unique and not empty. The runtime zeroes those bytes and
  // keeps them across calls, so no other planned tensor may share them: the compiler plans them
  // live for the whole call, and check_no_overlap refuses any instruction that would write the
  // one over the other except the update itself (drop_output_on_first_input).
  Status verify_state() {
    std::vector<uint8_t> is_state(vsize(m_.values()), 0);  // a value or update of an entry
    update_of_.assign(vsize(m_.values()), -1);
    const uint32_t n = vsize(m_.state());
    BATON_CHECK_OR_RETURN(n == 0 || program_.version() >= 5, InvalidProgram,
                          "{}.state has {} entries in a version {} program; state came with "
                          "version 5 (the file is damaged or was written by a faulty tool)",
                          where_, n, program_.version());
    std::vector<std::string_view> names;
    for (uint32_t i = 0; i < n; ++i) {
      const fb::State* st = m_.state()->Get(i);
      const std::string field = fmt::format("{}.state[{}]", where_, i);
      const std::string_view name = str(st->name());
      BATON_CHECK_OR_RETURN(!name.empty(), InvalidProgram, "{}.name is empty", field);
      BATON_CHECK_OR_RETURN(std::find(names.begin(), names.end(), name) == names.end(),
                            InvalidProgram, "{}.name '{}' names an earlier entry too", field, name);
      names.push_back(name);
      for (const auto& [v, what] : {std::pair{st->value(), "value"}, {st->update(), "update"}}) {
        const std::string f = fmt::format("{}.{}", field, what);
        BATON_TRY(check_tensor(v, f));
        const fb::Tensor* t = tensor_at(v);
        BATON_CHECK_OR_RETURN(t->allocation() == fb::AllocationKind::Arena, InvalidProgram,
                              "{} = {} (tensor '{}') is not in an arena; state lives in one", f, v,
                              str(t->name()));
        BATON_CHECK_OR_RETURN(is_input_[v] == 0 && !is_output(v), InvalidProgram,
                              "{} = {} (tensor '{}') is also a method input or output; state is "
                              "neither",
                              f, v, str(t->name()));
        BATON_CHECK_OR_RETURN(is_state[v] == 0, InvalidProgram,
                              "{} = {} (tensor '{}') is state twice", f, v, str(t->name()));
        is_state[v] = 1;
      }
      const fb::Tensor* a = tensor_at(st->value());
      const fb::Tensor* b = tensor_at(st->update());
      const auto same = [](const auto* x, const auto* y) {
        return vsize(x) == vsize(y) &&
               (vsize(x) == 0 || std::equal(x->begin(), x->end(), y->begin()));
      };
      BATON_CHECK_OR_RETURN(
          a->arena() == b->arena() && a->offset() == b->offset() && a->dtype() == b->dtype() &&
              same(a->sizes(), b->sizes()) && same(a->dims(), b->dims()),
          InvalidProgram,
          "{}: value '{}' and update '{}' must be one tensor's bytes (same arena, offset, dtype "
          "and sizes); got arena {} offset {} and arena {} offset {}",
          field, str(a->name()), str(b->name()), a->arena(), a->offset(), b->arena(), b->offset());
      update_of_[st->value()] = st->update();
    }
    return Status();
  }

  bool is_output(int v) const {
    for (uint32_t i = 0; i < vsize(m_.outputs()); ++i) {
      if (m_.outputs()->Get(i) == v) return true;
    }
    return false;
  }

  Status verify_operators() {
    for (uint32_t i = 0; i < vsize(m_.operators()); ++i) {
      BATON_CHECK_OR_RETURN(!str(m_.operators()->Get(i)->name()).empty(), InvalidProgram,
                            "{}.operators[{}].name is missing (empty): a kernel call cannot name "
                            "its op",
                            where_, i);
    }
    return Status();
  }

  Status verify_delegates() {
    for (uint32_t i = 0; i < vsize(m_.delegates()); ++i) {
      const fb::Delegate* d = m_.delegates()->Get(i);
      const std::string field = fmt::format("{}.delegates[{}] ('{}')", where_, i, str(d->name()));
      BATON_CHECK_OR_RETURN(!str(d->backend()).empty(), InvalidProgram, "{}.backend is missing",
                            field);
      BATON_TRY(verify_device(d->device_type(), d->device_index(), field));
      for (uint32_t k = 0; k < vsize(d->compile_specs()); ++k) {
        BATON_CHECK_OR_RETURN(d->compile_specs()->Get(k)->key() != nullptr, InvalidProgram,
                              "{}.compile_specs[{}].key is missing", field, k);
      }
      const int seg = d->blob_segment();
      BATON_CHECK_OR_RETURN(seg != -1, InvalidProgram,
                            "{} (backend '{}') has no blob (blob_segment = -1): the program was "
                            "written without the partition's lowered engine; recompile the model",
                            field, str(d->backend()));
      BATON_CHECK_OR_RETURN(seg >= 0 && static_cast<uint32_t>(seg) < vsize(program_.segments()),
                            InvalidProgram, "{}.blob_segment = {} is out of range [0, {})", field,
                            seg, vsize(program_.segments()));
    }
    return Status();
  }

  // Records the arena bytes of the tensors in `list` (an instruction's inputs or outputs) for
  // check_no_overlap. Values without arena storage, and empty tensors, occupy nothing.
  void add_ranges(const flatbuffers::Vector<int32_t>* list, const char* name, bool written) {
    for (uint32_t k = 0; k < vsize(list); ++k) add_range(list->Get(k), name, k, written);
  }
  void add_range(int v, const char* name, uint32_t position, bool written) {
    const fb::Tensor* t = tensor_at(v);
    if (t == nullptr || t->allocation() != fb::AllocationKind::Arena || nbytes_[v] == 0) return;
    ranges_.push_back(
        {t->arena(), t->offset(), t->offset() + nbytes_[v], written, name, position, v});
  }

  std::string describe(const ArgRange& r) const {
    return fmt::format("{}[{}] = {} (tensor '{}', arena {} bytes [{}, {}))", r.list, r.position,
                       r.value, str(tensor_at(r.value)->name()), r.arena, r.begin, r.end);
  }

  // No instruction may write a byte that it also reads or writes through another argument: CPU
  // kernels are out-variant (none is declared in-place safe: they read inputs while writing
  // outputs, and Identity is a memcpy), a delegate binds each tensor separately, and a copy is a
  // memcpy. The compiler's memory plan never does it (an instruction's inputs and outputs are
  // live at once); a damaged or hand-made file can. Sorted by start, a range overlaps an earlier
  // one exactly when it starts before the furthest end seen so far, so one sweep finds any pair.
  Status check_no_overlap(const std::string& field, std::string_view what) {
    // Stable: of two ranges that start together, the one listed first is reported as overlapped.
    std::stable_sort(ranges_.begin(), ranges_.end(), [](const ArgRange& a, const ArgRange& b) {
      return a.arena != b.arena ? a.arena < b.arena : a.begin < b.begin;
    });
    const ArgRange* reach_any = nullptr;      // furthest-reaching range of this arena so far
    const ArgRange* reach_written = nullptr;  // furthest-reaching written range so far
    for (const ArgRange& r : ranges_) {
      if (reach_any != nullptr && reach_any->arena != r.arena) reach_any = reach_written = nullptr;
      const ArgRange* hit = r.written ? reach_any : reach_written;
      if (hit != nullptr && hit->end > r.begin) {
        const ArgRange& w = r.written ? r : *hit;
        const ArgRange& o = r.written ? *hit : r;
        return BATON_ERROR(InvalidProgram,
                           "{} ({}): {} overlaps {}: an instruction may not write over its own "
                           "inputs or outputs (kernels do not run in place); the file is damaged "
                           "or was not written by baton's compiler",
                           field, what, describe(w), describe(o));
      }
      if (reach_any == nullptr || r.end > reach_any->end) reach_any = &r;
      if (r.written && (reach_written == nullptr || r.end > reach_written->end)) reach_written = &r;
    }
    return Status();
  }

  // The exceptions to check_no_overlap, both an instruction whose only output lies exactly on
  // its first input: a layout operator (Reshape, Flatten, Squeeze, Unsqueeze, Identity), a view
  // the compiler planned (compiler/memory_plan.h), whose kernel copies nothing then; and an
  // in-place operator (ScatterND, ScatterElements) whose first input is a state value and whose
  // output is that value's update (Method.state), whose kernel then scatters into those bytes.
  // Any other overlap, partial or with another argument, is still refused.
  void drop_output_on_first_input(const fb::Operator& op) {
    const bool view = is_view_op(str(op.domain()), str(op.name()));
    if (!view && !is_in_place_op(str(op.domain()), str(op.name()))) return;
    const ArgRange* in = nullptr;
    const ArgRange* out = nullptr;
    size_t outputs = 0;
    for (const ArgRange& r : ranges_) {
      if (!r.written && r.position == 0) in = &r;
      if (r.written) {
        out = &r;
        ++outputs;
      }
    }
    if (in == nullptr || out == nullptr || outputs != 1 || in->arena != out->arena ||
        in->begin != out->begin || in->end != out->end ||
        (!view && update_of_[in->value] != out->value)) {
      return;
    }
    ranges_.erase(ranges_.begin() + (out - ranges_.data()));
  }

  // The exception to check_no_overlap for a delegate: an output on exactly the bytes of an input
  // that is a state value whose update it is (Method.state). The delegate's engine updates the
  // state in place (the "in_place" compile spec, which the CUDA delegate checks at every call);
  // any other overlap is still refused.
  void drop_state_updates() {
    for (size_t o = 0; o < ranges_.size();) {
      const ArgRange& out = ranges_[o];
      bool in_place = false;
      for (const ArgRange& in : ranges_) {
        in_place = in_place ||
                   (out.written && !in.written && in.arena == out.arena && in.begin == out.begin &&
                    in.end == out.end && update_of_[in.value] == out.value);
      }
      if (in_place) {
        ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(o));
      } else {
        ++o;
      }
    }
  }

  template <typename T>
  Status each(const flatbuffers::Vector<int32_t>* list, const std::string& field, T&& check) {
    for (uint32_t k = 0; k < vsize(list); ++k) {
      BATON_TRY(check(list->Get(k), fmt::format("{}[{}]", field, k)));
    }
    return Status();
  }

  Status verify_instructions() {
    for (uint32_t i = 0; i < vsize(m_.instructions()); ++i) {
      const fb::Instruction* ins = m_.instructions()->Get(i);
      const std::string field = fmt::format("{}.instructions[{}]", where_, i);
      BATON_CHECK_OR_RETURN(
          ins->instruction() != nullptr || ins->instruction_type() == fb::InstructionKind::NONE,
          InvalidProgram,
          "{}: the instruction's {} table is missing (the file is damaged or was written by a "
          "faulty tool; compile the model again)",
          field, fb::EnumNameInstructionKind(ins->instruction_type()));
      switch (ins->instruction_type()) {
        case fb::InstructionKind::KernelCall: {
          const fb::KernelCall* k = ins->instruction_as_KernelCall();
          BATON_CHECK_OR_RETURN(
              k->operator_() >= 0 && static_cast<uint32_t>(k->operator_()) < vsize(m_.operators()),
              InvalidProgram, "{}.operator = {} is out of range [0, {})", field, k->operator_(),
              vsize(m_.operators()));
          BATON_TRY(each(k->inputs(), field + ".inputs", [&](int v, const std::string& f) {
            BATON_TRY(check_index(v, f));
            if (m_.values()->Get(v)->value_type() == fb::ValueKind::Null) return Status();
            return check_readable(v, f, "by the instruction");
          }));
          BATON_TRY(each(k->attributes(), field + ".attributes", [&](int v, const std::string& f) {
            BATON_TRY(check_index(v, f));
            // A tensor attribute (ConstantOfShape's `value`) is a constant: its bytes are read at
            // method load, never an input, an output or arena memory.
            const fb::Tensor* t = tensor_at(v);
            BATON_CHECK_OR_RETURN(t == nullptr || t->allocation() == fb::AllocationKind::Constant,
                                  InvalidProgram,
                                  "{} = {} is a tensor that is not a constant ('{}'); an attribute "
                                  "is a scalar, a list, a string or a constant tensor",
                                  f, v, str(t->name()));
            return Status();
          }));
          BATON_TRY(each(k->outputs(), field + ".outputs",
                         [&](int v, const std::string& f) { return check_writable(v, f); }));
          ranges_.clear();
          add_ranges(k->inputs(), "inputs", false);
          add_ranges(k->outputs(), "outputs", true);
          drop_output_on_first_input(*m_.operators()->Get(k->operator_()));
          BATON_TRY(check_no_overlap(
              field, fmt::format("{} node '{}'", str(m_.operators()->Get(k->operator_())->name()),
                                 str(k->name()))));
          break;
        }
        case fb::InstructionKind::DelegateCall: {
          const fb::DelegateCall* d = ins->instruction_as_DelegateCall();
          BATON_CHECK_OR_RETURN(
              d->delegate() >= 0 && static_cast<uint32_t>(d->delegate()) < vsize(m_.delegates()),
              InvalidProgram, "{}.delegate = {} is out of range [0, {})", field, d->delegate(),
              vsize(m_.delegates()));
          BATON_TRY(each(d->inputs(), field + ".inputs", [&](int v, const std::string& f) {
            return check_readable(v, f, "by the instruction");
          }));
          BATON_TRY(each(d->outputs(), field + ".outputs",
                         [&](int v, const std::string& f) { return check_writable(v, f); }));
          ranges_.clear();
          add_ranges(d->inputs(), "inputs", false);
          add_ranges(d->outputs(), "outputs", true);
          drop_state_updates();
          BATON_TRY(check_no_overlap(field,
                                     fmt::format("call of delegate {} '{}'", d->delegate(),
                                                 str(m_.delegates()->Get(d->delegate())->name()))));
          break;
        }
        case fb::InstructionKind::DeviceCopy: {
          const fb::DeviceCopy* c = ins->instruction_as_DeviceCopy();
          BATON_TRY(check_readable(c->src(), field + ".src", "by the instruction"));
          BATON_TRY(check_writable(c->dst(), field + ".dst"));
          const fb::Tensor* s = tensor_at(c->src());
          const fb::Tensor* d = tensor_at(c->dst());
          const bool same_sizes =
              vsize(s->sizes()) == vsize(d->sizes()) &&
              (vsize(s->sizes()) == 0 || std::memcmp(s->sizes()->data(), d->sizes()->data(),
                                                     sizeof(int64_t) * vsize(s->sizes())) == 0);
          BATON_CHECK_OR_RETURN(s->dtype() == d->dtype() && same_sizes, InvalidProgram,
                                "{}: copy from '{}' ({} {}) to '{}' ({} {}) changes dtype or shape",
                                field, str(s->name()), dtype_name(static_cast<DType>(s->dtype())),
                                shape_to_string(span_of(s->sizes())), str(d->name()),
                                dtype_name(static_cast<DType>(d->dtype())),
                                shape_to_string(span_of(d->sizes())));
          ranges_.clear();
          add_range(c->src(), "src", 0, false);
          add_range(c->dst(), "dst", 0, true);
          BATON_TRY(check_no_overlap(field, "copy"));
          break;
        }
        default:
          return BATON_ERROR(InvalidProgram, "{}: instruction kind {} is not known", field,
                             static_cast<int>(ins->instruction_type()));
      }
    }
    return Status();
  }

  const fb::Method& m_;
  const fb::Program& program_;
  const uint8_t* file_begin_;
  std::string where_;
  std::vector<uint8_t> is_input_;    // per value
  std::vector<int> update_of_;       // per value: the update of the state value it is, or -1
  std::vector<uint64_t> nbytes_;     // per value: a tensor's byte size, else 0
  std::vector<int64_t> max_values_;  // per size expression: its value with every symbol at max
  std::vector<ArgRange> ranges_;     // the instruction being checked
};

}  // namespace

Status verify_method(const fb::Method& method, int method_index, const fb::Program& program,
                     const uint8_t* file_begin) {
  return MethodVerifier(method, method_index, program, file_begin).run();
}

}  // namespace baton::format::detail
