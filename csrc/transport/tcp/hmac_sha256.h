// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the TCP transport's challenge-response:
// a process proves it holds HOROVOD_SECRET_KEY by answering HMAC(key, nonce || rank) to a fresh
// random nonce, so the key itself never crosses the network. Written here rather than taken from
// OpenSSL so that the engine links nothing more; it hashes a few dozen bytes per connection, so
// speed does not matter (about 1 us per call).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hvd {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t bytes);
  Sha256Digest Finish();  // the object is spent afterwards

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

Sha256Digest HmacSha256(const std::string& key, const void* msg, size_t bytes);
// Equal digests, in time independent of where they differ (no timing oracle for the proof).
bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b);
std::string DigestHex(const Sha256Digest& d);

}  // namespace hvd
