// The format's checksums: XXH3-64 on whichever vector unit the CPU has gives xxHash's own values
// (computed with the reference build, SSE2), and a segment's hash of chunk hashes is the same on
// any number of threads.
#include "format/checksum.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace baton::format {
namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 131 + 7) & 0xff);
  return b;
}

TEST(ChecksumTest, Xxh3MatchesKnownValues) {
  const std::vector<uint8_t> b = pattern((5 << 20) + 3);
  const std::span<const uint8_t> all(b);
  EXPECT_EQ(xxh3_64({}), 0x2d06800538d394c2u);
  EXPECT_EQ(xxh3_64(all.first(1000)), 0x571d5cbfef44331bu);
  EXPECT_EQ(xxh3_64(all.first(1 << 20)), 0x6f7c82505ffbc516u);
  EXPECT_EQ(xxh3_64(all), 0x7083e2a2c8db75d6u);
}

// Chunk boundaries: empty, under one chunk, exactly one, one byte over, several and a tail.
TEST(ChecksumTest, SegmentChecksumsMatchTheDefinitionOnAnyNumberOfThreads) {
  const std::vector<uint8_t> b = pattern((5 << 20) + 3);
  const std::span<const uint8_t> all(b);
  const std::vector<std::span<const uint8_t>> segments = {
      all.first(0), all.first(1000), all.first(1 << 20), all.first((1 << 20) + 1), all};
  const std::vector<uint64_t> expected = {0x2d06800538d394c2u, 0xecc654ca665a48d1u,
                                          0xbd6589a249c244d8u, 0xcfa01ea287c96a3cu,
                                          0x542b4abccb659c41u};
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
    SCOPED_TRACE(threads);
    EXPECT_EQ(segment_checksums(segments, threads), expected);
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_EQ(segment_checksum(segments[i]), expected[i]);
  }
  EXPECT_TRUE(segment_checksums({}, 4).empty());
}

}  // namespace
}  // namespace baton::format
