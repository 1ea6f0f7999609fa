// The server's content cache (Note [Content cache keys] in content_cache.h).

#include "content_cache.h"


#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "core/common.h"

namespace loom::rpc {

namespace {

// Blocks on the system's ordinary pages. Not on huge pages (MADV_HUGEPAGE):
// where the kernel compacts memory for them when asked
// (transparent_hugepage/defrag "madvise", the kernel's default), every kept
// upload's fresh memory waited for that, and uploads of new content to a
// caching server ran at 0.05 of the socket's speed instead of 0.49
// (bench_rpc 64). The kept copies are read once per hit, where page size
// does not matter.
uint8_t * alloc_pages(size_t size) {
    return size == 0 ? nullptr : static_cast<uint8_t *>(std::aligned_alloc(64, (size + 63) / 64 * 64));
}

} // namespace

Blob::Blob(size_t size) : data_(alloc_pages(size)), size_(size) {}

Blob::~Blob() {
    std::free(data_);
}

namespace {

// Writes a file whole or not at all (through a temporary name).
bool write_file(const std::string & path, const uint8_t * data, size_t n) {
    std::random_device rd;
    const std::string  tmp = path + ".tmp" + std::to_string(rd());
    std::ofstream      out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char *>(data), std::streamsize(n));
    out.close();
    if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        LOOM_LOG_WARN("rpc server: cannot write cache file %s\n", path.c_str());
        return false;
    }
    return true;
}

} // namespace

bool ContentCache::may_hold(const Sha256 & probe) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (by_probe_.count(probe) != 0) {
            return true;
        }
    }
    return !dir_.empty() && std::ifstream(dir_ + "/" + to_hex(probe) + ".probe").good();
}

std::shared_ptr<const Blob> ContentCache::find(const Sha256 & key, size_t size, const Sha256 * probe) {
    std::vector<std::pair<uint64_t, std::shared_ptr<const Blob>>> unkeyed; // copies taken under the lock
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = by_key_.find(key); it != by_key_.end()) {
            Entry & e = entries_.at(it->second);
            lru_.splice(lru_.begin(), lru_, e.lru);
            return e.bytes->size() == size ? e.bytes : nullptr;
        }
        for (auto & [id, e] : entries_) {
            if (!e.key && e.bytes->size() == size && (probe == nullptr || e.probe == *probe)) {
                unkeyed.emplace_back(id, e.bytes);
            }
        }
    }
    // The candidates' keys, hashed outside the lock.
    std::shared_ptr<const Blob> hit;
    for (auto & [id, bytes] : unkeyed) {
        const Sha256                k = content_key(bytes->data(), bytes->size());
        std::lock_guard<std::mutex> lock(mutex_);
        auto                        it = entries_.find(id);
        if (it == entries_.end() || it->second.key) {
            continue;
        }
        if (by_key_.count(k) != 0) {
            erase_locked(it); // the same content under another entry
            continue;
        }
        it->second.key = k;
        by_key_[k]     = id;
        if (k == key) {
            lru_.splice(lru_.begin(), lru_, it->second.lru);
            hit = bytes;
        }
    }
    if (hit || dir_.empty()) {
        return hit;
    }
    auto bytes = read_file(key);
    return bytes && bytes->size() == size ? bytes : nullptr;
}

std::shared_ptr<const Blob> ContentCache::read_file(const Sha256 & key) {
    std::ifstream in(dir_ + "/" + to_hex(key), std::ios::binary | std::ios::ate);
    if (!in) {
        return nullptr;
    }
    const std::streamoff n = in.tellg();
    if (n < 0) {
        return nullptr;
    }
    std::shared_ptr<Blob> bytes = take(size_t(n));
    in.seekg(0);
    if (!bytes->ok() || !in.read(reinterpret_cast<char *>(bytes->data()), n)) {
        return nullptr;
    }
    if (content_key(bytes->data(), bytes->size()) != key) {
        LOOM_LOG_WARN("rpc server: cache file %s does not match its hash; ignored\n", to_hex(key).c_str());
        return nullptr;
    }
    const Sha256                probe = content_probe(bytes->data(), bytes->size());
    std::lock_guard<std::mutex> lock(mutex_);
    insert_locked(bytes, probe, key);
    return bytes;
}

std::shared_ptr<Blob> ContentCache::take(size_t size) {
    std::shared_ptr<Blob> reused;
    if (size <= max_bytes_) {
        std::lock_guard<std::mutex> lock(mutex_);
        while (bytes_ + size > max_bytes_ && !lru_.empty()) {
            std::shared_ptr<Blob> old = erase_locked(entries_.find(lru_.back()));
            if (!reused && old && old->size() == size) {
                reused = std::move(old);
            }
        }
    }
    return reused ? reused : std::make_shared<Blob>(size);
}

void ContentCache::put(std::shared_ptr<Blob> bytes) {
    const Sha256                probe = content_probe(bytes->data(), bytes->size());
    std::optional<Sha256>       key;
    if (!dir_.empty()) {
        key = content_key(bytes->data(), bytes->size());
        if (write_file(dir_ + "/" + to_hex(*key), bytes->data(), bytes->size())) {
            write_file(dir_ + "/" + to_hex(probe) + ".probe", nullptr, 0);
        }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    insert_locked(std::move(bytes), probe, key);
}

void ContentCache::insert_locked(std::shared_ptr<Blob> bytes, const Sha256 & probe,
                                 const std::optional<Sha256> & key) {
    // Content of no bytes is not kept (keeps(0) is false): there is nothing
    // to save, and two empty entries would compare null data.
    if (bytes->size() == 0 || bytes->size() > max_bytes_ || (key && by_key_.count(*key) != 0)) {
        return;
    }
    // Kept already? Only entries of the same probe can hold the same bytes.
    for (auto [p, end] = by_probe_.equal_range(probe); p != end; ++p) {
        Entry & e = entries_.at(p->second);
        if (e.bytes->size() == bytes->size() && std::memcmp(e.bytes->data(), bytes->data(), bytes->size()) == 0) {
            lru_.splice(lru_.begin(), lru_, e.lru);
            if (key && !e.key) {
                e.key        = key;
                by_key_[*key] = p->second;
            }
            return;
        }
    }
    while (bytes_ + bytes->size() > max_bytes_ && !lru_.empty()) {
        erase_locked(entries_.find(lru_.back()));
    }
    const uint64_t id = next_id_++;
    lru_.push_front(id);
    bytes_ += bytes->size();
    by_probe_.emplace(probe, id);
    if (key) {
        by_key_[*key] = id;
    }
    entries_[id] = {std::move(bytes), probe, key, lru_.begin()};
}

std::shared_ptr<Blob> ContentCache::erase_locked(std::map<uint64_t, Entry>::iterator it) {
    Entry & e = it->second;
    bytes_ -= e.bytes->size();
    if (e.key) {
        by_key_.erase(*e.key);
    }
    for (auto [p, end] = by_probe_.equal_range(e.probe); p != end; ++p) {
        if (p->second == it->first) {
            by_probe_.erase(p);
            break;
        }
    }
    lru_.erase(e.lru);
    // Copies of an entry's bytes are taken under the lock, so no other
    // holder means none can appear.
    std::shared_ptr<Blob> bytes = std::move(e.bytes);
    entries_.erase(it);
    return bytes.use_count() == 1 ? bytes : nullptr;
}

} // namespace loom::rpc
