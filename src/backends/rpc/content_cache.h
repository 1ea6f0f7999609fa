#pragma once

// The server's cache of uploaded tensor contents, shared by its sessions.
//
// Note [Content cache keys]
// An entry is found by content_key, a SHA-256 over all of its bytes, which a
// client computes only after the server said it knows the entry's probe
// (content_probe: the size and 64 KiB of samples). Hashing a tensor whole
// costs more than sending it over a fast link, so the cache does not hash
// what it keeps when it keeps it: in memory an entry has its probe at once
// and its key when a lookup first asks for content of its size and probe
// (the lookup then hashes the candidates). New content therefore costs the
// client and the server a probe each, and the server a copy into the cache.
// Files (a cache folder) are named by the key, so with a folder the key is
// computed at once. Two uploads of equal content are kept once (equal
// probes and sizes are compared byte for byte).

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "protocol.h"

namespace loom::rpc {

// Bytes of one cache entry, large ones on 2 MiB pages: an entry is written
// once, whole, into fresh memory, where each 4 KiB page costs a fault.
class Blob {
  public:
    explicit Blob(size_t size);
    ~Blob();
    Blob(const Blob &)             = delete;
    Blob & operator=(const Blob &) = delete;

    uint8_t *       data() { return data_; }
    const uint8_t * data() const { return data_; }
    size_t          size() const { return size_; }
    bool            ok() const { return data_ != nullptr || size_ == 0; }

  private:
    uint8_t * data_;
    size_t    size_;
};

// In memory up to a byte budget (least recently used first out) and, with a
// folder, in files named by the key (and an empty file named by the probe);
// a file's content is checked against its name before use. No budget and no
// folder: it keeps nothing. Thread-safe.
class ContentCache {
  public:
    ContentCache(std::string dir, size_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

    bool enabled() const { return max_bytes_ > 0 || !dir_.empty(); }
    // Whether content of this size would be kept (in memory or in a file).
    // Content of no bytes is never kept: it costs nothing to send.
    bool keeps(size_t size) const { return enabled() && size != 0 && (size <= max_bytes_ || !dir_.empty()); }
    // Whether content with this probe may be held.
    bool may_hold(const Sha256 & probe);
    // The content whose key and size these are; probe (when known) narrows
    // the entries whose keys are still to be computed.
    std::shared_ptr<const Blob> find(const Sha256 & key, size_t size, const Sha256 * probe);
    // Memory for content of this size about to be kept: when the budget
    // pushes entries out for it (least recently used first), the memory of
    // one of the same size is reused, so a full cache writes into pages it
    // has instead of fresh ones (each costs a fault). Then filled and put.
    std::shared_ptr<Blob>       take(size_t size);
    void                        put(std::shared_ptr<Blob> bytes);

  private:
    struct Entry {
        std::shared_ptr<Blob>         bytes;
        Sha256                        probe;
        std::optional<Sha256>         key;
        std::list<uint64_t>::iterator lru;
    };
    void insert_locked(std::shared_ptr<Blob> bytes, const Sha256 & probe, const std::optional<Sha256> & key);
    // Its bytes, for reuse when no one else holds them.
    std::shared_ptr<Blob> erase_locked(std::map<uint64_t, Entry>::iterator it);
    std::shared_ptr<const Blob> read_file(const Sha256 & key);

    std::mutex                         mutex_;
    std::string                        dir_;
    size_t                             max_bytes_;
    size_t                             bytes_   = 0;
    uint64_t                           next_id_ = 1;
    std::map<uint64_t, Entry>          entries_;
    std::map<Sha256, uint64_t>         by_key_;
    std::multimap<Sha256, uint64_t>    by_probe_;
    std::list<uint64_t>                lru_; // most recent first
};

} // namespace loom::rpc
