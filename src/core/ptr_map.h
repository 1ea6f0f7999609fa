#pragma once

// A flat hash map keyed by pointers, for per-graph bookkeeping in hot paths
// (the scheduler looks up every tensor of a graph several times per call).
// Open addressing with linear probing; clear() keeps the capacity, so a map
// reused call after call stops allocating once it has grown. An empty slot
// holds a null key, so the null key's value lives beside the slots.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace loom {

template <typename V> class PtrMap {
  public:
    V * find(const void * key) {
        if (key == nullptr) return has_null_ ? &null_value_ : nullptr;
        if (slots_.empty()) return nullptr;
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            Slot & s = slots_[i];
            if (s.key == key) return &s.value;
            if (s.key == nullptr) return nullptr;
        }
    }
    const V * find(const void * key) const { return const_cast<PtrMap *>(this)->find(key); }
    bool      contains(const void * key) const { return find(key) != nullptr; }

    // The value of key, inserted as V{} when absent.
    V & operator[](const void * key) {
        if (key == nullptr) {
            if (!has_null_) {
                has_null_   = true;
                null_value_ = V{};
                ++size_;
            }
            return null_value_;
        }
        if ((size_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            Slot & s = slots_[i];
            if (s.key == key) return s.value;
            if (s.key == nullptr) {
                s.key   = key;
                s.value = V{};
                ++size_;
                return s.value;
            }
        }
    }

    void clear() {
        if (size_ == 0) return;
        for (Slot & s : slots_) s.key = nullptr;
        has_null_ = false;
        size_     = 0;
    }
    void reserve(size_t n) {
        while (slots_.size() < n * 2) grow();
    }
    size_t size() const { return size_; }

    template <typename F> void for_each(F && f) const {
        if (has_null_) f(static_cast<const void *>(nullptr), null_value_);
        for (const Slot & s : slots_) {
            if (s.key != nullptr) f(s.key, s.value);
        }
    }

  private:
    struct Slot {
        const void * key = nullptr;
        V            value{};
    };

    size_t hash(const void * key) const {
        // Fibonacci hashing of the address (allocations are aligned, so the
        // low bits carry little information).
        return size_t((uint64_t(reinterpret_cast<uintptr_t>(key)) * 0x9e3779b97f4a7c15ull) >> shift_) & mask_;
    }

    void grow() {
        const size_t      cap = slots_.empty() ? 64 : slots_.size() * 2;
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(cap, Slot{});
        mask_  = cap - 1;
        shift_ = 64;
        for (size_t c = cap; c > 1; c >>= 1) --shift_;
        size_ = has_null_ ? 1 : 0;
        for (Slot & s : old) {
            if (s.key != nullptr) (*this)[s.key] = std::move(s.value);
        }
    }

    std::vector<Slot> slots_;
    size_t            mask_  = 0;
    int               shift_ = 64;
    size_t            size_  = 0;
    bool              has_null_ = false;
    V                 null_value_{};
};

} // namespace loom
