#include "platform/siphash.h"

#include <cstring>
#include <random>

namespace g4 {

namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = rotl(v1, 13);
  v1 ^= v0;
  v0 = rotl(v0, 32);
  v2 += v3;
  v3 = rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = rotl(v1, 17);
  v1 ^= v2;
  v2 = rotl(v2, 32);
}

}  // namespace

SipHasher::SipHasher(SipKey key)
    : v0_(key.k0 ^ 0x736f6d6570736575ull),
      v1_(key.k1 ^ 0x646f72616e646f6dull),
      v2_(key.k0 ^ 0x6c7967656e657261ull),
      v3_(key.k1 ^ 0x7465646279746573ull) {}

void SipHasher::compress(uint64_t m) {
  v3_ ^= m;
  sip_round(v0_, v1_, v2_, v3_);
  sip_round(v0_, v1_, v2_, v3_);
  v0_ ^= m;
}

void SipHasher::update(const void* data, size_t n) {
  const auto* b = static_cast<const unsigned char*>(data);
  total_ += n;
  size_t i = 0;
  if (tail_n_ == 0)  // whole words straight through (x86-64 and aarch64 Linux are little-endian)
    for (; i + 8 <= n; i += 8) {
      uint64_t m;
      std::memcpy(&m, b + i, 8);
      compress(m);
    }
  for (; i < n; ++i) {
    tail_ |= uint64_t(b[i]) << (8 * tail_n_);
    if (++tail_n_ == 8) {
      compress(tail_);
      tail_ = 0;
      tail_n_ = 0;
    }
  }
}

uint64_t SipHasher::final() const {
  SipHasher h = *this;
  h.compress(h.tail_ | (h.total_ << 56));
  h.v2_ ^= 0xff;
  for (int i = 0; i < 4; ++i) sip_round(h.v0_, h.v1_, h.v2_, h.v3_);
  return h.v0_ ^ h.v1_ ^ h.v2_ ^ h.v3_;
}

uint64_t siphash24(SipKey key, const void* data, size_t n) {
  SipHasher h(key);
  h.update(data, n);
  return h.final();
}

SipKey process_sip_key() {
  static const SipKey key = [] {
    std::random_device rd;
    const auto draw = [&rd] { return (uint64_t(rd()) << 32) ^ uint64_t(rd()); };
    return SipKey{draw(), draw()};
  }();
  return key;
}

}  // namespace g4
