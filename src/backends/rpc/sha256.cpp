// SHA-256 through OpenSSL's libcrypto: the key of the tensor content cache.

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

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

Sha256 content_key(const void * data, size_t size) {
    const auto * bytes  = static_cast<const uint8_t *>(data);
    const size_t leaves = (size + k_content_leaf_bytes - 1) / k_content_leaf_bytes;
    // 8 bytes of size, then one digest per leaf.
    std::vector<uint8_t> joined(8 + leaves * sizeof(Sha256));
    for (int i = 0; i < 8; ++i) {
        joined[size_t(i)] = uint8_t(uint64_t(size) >> (8 * i));
    }
    auto hash_leaves = [&](size_t first, size_t step) {
        for (size_t i = first; i < leaves; i += step) {
            const size_t at = i * k_content_leaf_bytes;
            const Sha256 h  = sha256(bytes + at, std::min(k_content_leaf_bytes, size - at));
            std::memcpy(joined.data() + 8 + i * sizeof(Sha256), h.data(), h.size());
        }
    };
    const size_t n_threads =
        std::min<size_t>({leaves, std::max(1u, std::thread::hardware_concurrency()), size_t(16)});
    std::vector<std::thread> threads;
    for (size_t k = 1; k < n_threads; ++k) {
        threads.emplace_back(hash_leaves, k, n_threads);
    }
    hash_leaves(0, std::max<size_t>(n_threads, 1));
    for (std::thread & t : threads) {
        t.join();
    }
    return sha256(joined.data(), joined.size());
}

Sha256 content_probe(const void * data, size_t size) {
    const auto * bytes = static_cast<const uint8_t *>(data);
    uint8_t      n[8];
    for (int i = 0; i < 8; ++i) {
        n[i] = uint8_t(uint64_t(size) >> (8 * i));
    }
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    bool ok = md != nullptr && EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) == 1 &&
              EVP_DigestUpdate(md.get(), n, sizeof(n)) == 1;
    if (size <= k_probe_samples * k_probe_sample_bytes) {
        ok = ok && EVP_DigestUpdate(md.get(), bytes, size) == 1;
    } else {
        const size_t span = size - k_probe_sample_bytes; // where the last piece starts
        for (size_t i = 0; i < k_probe_samples; ++i) {
            const size_t at = i + 1 == k_probe_samples ? span : span / (k_probe_samples - 1) * i;
            ok = ok && EVP_DigestUpdate(md.get(), bytes + at, k_probe_sample_bytes) == 1;
        }
    }
    Sha256       out{};
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md.get(), out.data(), &len) == 1;
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
