// Counts every heap allocation in the process while a CountAllocations scope is open.
//
// Link the `baton_counting_allocator` library: it replaces malloc, calloc, realloc,
// aligned_alloc, posix_memalign and memalign for the whole test binary (forwarding to glibc), so
// operator new, std containers, fmt, and OpenBLAS's own allocations are all counted, from any
// thread. Not available under AddressSanitizer, which owns malloc (counting_available() is false).
#pragma once

#include <cstdint>

namespace baton::testing {

bool counting_available();

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  int64_t count() const;

 private:
  int64_t start_;
};

}  // namespace baton::testing
