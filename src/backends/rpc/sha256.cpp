// SHA-256 through OpenSSL's libcrypto: the key of the tensor content cache.

#include <openssl/evp.h>

#include "core/common.h"
#include "protocol.h"

namespace loom::rpc {

Sha256 sha256(const void * data, size_t size) {
    Sha256       out{};
    unsigned int len = 0;
    const bool   ok  = EVP_Digest(data, size, out.data(), &len, EVP_sha256(), nullptr) == 1;
    LOOM_ASSERT(ok && len == out.size());
    return out;
}

std::string to_hex(const Sha256 & h) {
    static const char digits[] = "0123456789abcdef";
    std::string       s;
    s.reserve(h.size() * 2);
    for (uint8_t b : h) {
        s.push_back(digits[b >> 4]);
        s.push_back(digits[b & 15]);
    }
    return s;
}

} // namespace loom::rpc
