// XXH3-64 compiled for AVX2 (CMake adds -mavx2 to this file only); checksum.cpp calls it only on
// CPUs that have AVX2. Nothing else is in this file, so no AVX2 code can reach other callers
// through an inline function the linker merges.
#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace baton::format::detail {

uint64_t xxh3_64_avx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace baton::format::detail
