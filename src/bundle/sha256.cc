#include "bundle/sha256.h"

#include <openssl/evp.h>

#include <algorithm>

#include "support/status.h"

namespace kiln::bundle {

struct Sha256::Context {
  EVP_MD_CTX* md = nullptr;
  ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  ctx_->md = EVP_MD_CTX_new();
  KILN_CHECK(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1,
             "OpenSSL cannot start a SHA-256");
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t size) {
  if (size > 0)
    KILN_CHECK(EVP_DigestUpdate(ctx_->md, data, size) == 1, "OpenSSL's SHA-256 update failed");
}

void Sha256::UpdateZeros(size_t size) {
  static const uint8_t kZeros[256] = {};
  for (size_t done = 0; done < size; done += sizeof(kZeros))
    Update(kZeros, std::min(sizeof(kZeros), size - done));
}

Digest Sha256::Finish() {
  Digest d{};
  unsigned int n = 0;
  KILN_CHECK(EVP_DigestFinal_ex(ctx_->md, d.data(), &n) == 1 && n == d.size(),
             "OpenSSL's SHA-256 failed");
  return d;
}

Digest Sha256Of(const void* data, size_t size) {
  Sha256 h;
  h.Update(data, size);
  return h.Finish();
}

Digest Sha256WithBlanks(const uint8_t* data, size_t size, std::vector<size_t> blanks) {
  std::sort(blanks.begin(), blanks.end());
  Sha256 h;
  size_t at = 0;
  for (size_t b : blanks) {
    KILN_CHECK(b >= at && b + 32 <= size, "digest fields overlap or lie outside the bytes");
    h.Update(data + at, b - at);
    h.UpdateZeros(32);
    at = b + 32;
  }
  h.Update(data + at, size - at);
  return h.Finish();
}

std::string HexString(const uint8_t* data, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    s += kHex[data[i] >> 4];
    s += kHex[data[i] & 15];
  }
  return s;
}

}  // namespace kiln::bundle
