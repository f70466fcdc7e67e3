// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit hash that, without the key, no one
// can steer into a collision. g4 keys cached KV and soft tokens by a hash of an image's pixels;
// with an unkeyed hash a client could craft two images that share a key and be served another
// image's cached state.
#pragma once
#include <cstddef>
#include <cstdint>

namespace g4 {

struct SipKey {
  uint64_t k0 = 0, k1 = 0;
};

// Incremental: update() any number of times, then final(). Equal to one call over the
// concatenated bytes.
class SipHasher {
 public:
  explicit SipHasher(SipKey key);
  void update(const void* data, size_t n);
  uint64_t final() const;

 private:
  void compress(uint64_t m);
  uint64_t v0_, v1_, v2_, v3_;
  uint64_t tail_ = 0;   // bytes not yet compressed, little-endian
  size_t tail_n_ = 0;   // how many (0..7)
  uint64_t total_ = 0;  // bytes seen
};

uint64_t siphash24(SipKey key, const void* data, size_t n);

// A key drawn once per process from std::random_device: hashes differ between runs, so nothing
// outside the process can precompute a collision.
SipKey process_sip_key();

}  // namespace g4
