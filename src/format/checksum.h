// The program format's checksums (docs/format.md, "Checksums"): XXH3-64 from xxHash.
//
// A segment's checksum is a hash of hashes, so that a large file can be verified on several
// threads: the XXH3-64 of the concatenated 8-byte big-endian (xxHash's canonical form) XXH3-64
// hashes of its 1 MiB chunks, the last chunk possibly shorter. In Python:
//   xxh3_64(b"".join(xxh3_64(seg[i:i + 2**20]).digest() for i in range(0, len(seg), 2**20)))
// The header and table are small and hashed in one piece (program_file.h: table_checksum).
//
// Thread-safe; allocates (a hash per chunk) and may start threads, which have all ended when the
// call returns.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace baton::format {

inline constexpr uint64_t kChecksumChunkSize = uint64_t{1} << 20;

// XXH3-64 (seed 0) of `bytes`, on the widest vector unit this CPU has (AVX2 where present).
uint64_t xxh3_64(std::span<const uint8_t> bytes);

// The checksum of one segment (above).
uint64_t segment_checksum(std::span<const uint8_t> bytes);

// The checksums of several segments, the chunks shared among up to `threads` threads (the calling
// thread included; 0: one per CPU, at most 8, and only the calling thread below 16 MiB in all).
std::vector<uint64_t> segment_checksums(std::span<const std::span<const uint8_t>> segments,
                                        unsigned threads = 0);

}  // namespace baton::format
