#include "format/checksum.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

// Header-only XXH3 (Debian's libxxhash-dev): the runtime links no xxhash library.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace baton::format {
namespace detail {
// checksum_avx2.cpp, compiled for AVX2; called only where the CPU has it.
uint64_t xxh3_64_avx2(const void* data, size_t size);
}  // namespace detail

namespace {

constexpr uint64_t kParallelBytes = uint64_t{16} << 20;
constexpr unsigned kMaxThreads = 8;

uint64_t chunk_count(uint64_t size) { return (size + kChecksumChunkSize - 1) / kChecksumChunkSize; }

// Hashes chunk `k` of the flattened chunk list: `first[i]` is the index of segment i's first chunk.
uint64_t hash_chunk(std::span<const std::span<const uint8_t>> segments,
                    const std::vector<uint64_t>& first, uint64_t k) {
  const size_t seg =
      static_cast<size_t>(std::upper_bound(first.begin(), first.end(), k) - first.begin()) - 1;
  const uint64_t begin = (k - first[seg]) * kChecksumChunkSize;
  const uint64_t size = std::min(kChecksumChunkSize, segments[seg].size() - begin);
  return xxh3_64(segments[seg].subspan(begin, size));
}

}  // namespace

uint64_t xxh3_64(std::span<const uint8_t> bytes) {
#ifdef BATON_XXH3_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return detail::xxh3_64_avx2(bytes.data(), bytes.size());
#endif
  return XXH3_64bits(bytes.data(), bytes.size());
}

uint64_t segment_checksum(std::span<const uint8_t> bytes) {
  const std::span<const uint8_t> one[] = {bytes};
  return segment_checksums(one, 1)[0];
}

std::vector<uint64_t> segment_checksums(std::span<const std::span<const uint8_t>> segments,
                                        unsigned threads) {
  // first[i]: index of segment i's first chunk in the flattened list; one extra entry, the total.
  std::vector<uint64_t> first(segments.size() + 1, 0);
  uint64_t bytes = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    first[i + 1] = first[i] + chunk_count(segments[i].size());
    bytes += segments[i].size();
  }
  const uint64_t chunks = first.back();
  std::vector<uint64_t> chunk_hashes(chunks);
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t k = next++; k < chunks; k = next++) {
      chunk_hashes[k] = hash_chunk(segments, first, k);
    }
  };
  if (threads == 0) {
    threads = bytes < kParallelBytes
                  ? 1
                  : std::clamp(std::thread::hardware_concurrency(), 1u, kMaxThreads);
  }
  threads = static_cast<unsigned>(std::min<uint64_t>(threads, std::max<uint64_t>(chunks, 1)));
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (at least this one) do the rest
    }
  }
  work();
  for (std::thread& t : helpers) t.join();

  std::vector<uint64_t> out(segments.size());
  std::vector<XXH64_canonical_t> canonical;
  for (size_t i = 0; i < segments.size(); ++i) {
    canonical.resize(first[i + 1] - first[i]);
    for (uint64_t k = first[i]; k < first[i + 1]; ++k) {
      XXH64_canonicalFromHash(&canonical[k - first[i]], chunk_hashes[k]);
    }
    out[i] = xxh3_64({reinterpret_cast<const uint8_t*>(canonical.data()),
                      canonical.size() * sizeof(XXH64_canonical_t)});
  }
  return out;
}

}  // namespace baton::format
