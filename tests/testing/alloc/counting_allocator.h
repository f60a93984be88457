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
  // Every allocation in the process since the scope opened.
  int64_t count() const;
  // Those made on threads other than the one that opened the scope (a library's background
  // threads, or a CPU kernel's workers).
  int64_t other_threads() const;
  // With BATON_ALLOC_BACKTRACES=1 in the environment, the call stacks of the first allocations
  // counted (up to 8), written to stderr; nothing otherwise.
  static void print_backtraces();

 private:
  int64_t start_;
  int64_t start_other_;
};

// Failure injection: while a FailAllocation scope is open, the `nth` allocation made on the
// thread that opened it (1 = the next) returns null, as malloc does when memory runs out, so
// operator new throws std::bad_alloc there; every other allocation succeeds. fired() says whether
// the scope's failure happened (false: the code under test made fewer than `nth` allocations).
class FailAllocation {
 public:
  explicit FailAllocation(int64_t nth);
  ~FailAllocation();
  bool fired() const;
};

}  // namespace baton::testing
