#pragma once

// Helpers of the GGUF tests: files and buffers in and out, a log capture,
// value comparison, and a builder of GGUF bytes for valid and broken files.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml.h"
#include "gguf.h"
#include "log_capture.h"

namespace gguftest {

using loomtest::LogCapture;

struct GgufDeleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;

inline std::string data_path(const std::string & name) {
    return std::string(LOOM_TEST_DATA) + "/" + name;
}

inline std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline void write_bytes(const std::string & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::string temp_path(const std::string & name) {
    return (std::filesystem::temp_directory_path() / ("loom_test_gguf_" + std::to_string(getpid()) + "_" + name))
        .string();
}

inline GgufPtr load_file(const std::string & path, ggml_context ** ctx = nullptr, bool no_alloc = true) {
    return GgufPtr(gguf_init_from_file(path.c_str(), {no_alloc, ctx}));
}

inline GgufPtr load_buffer(const std::vector<uint8_t> & bytes, ggml_context ** ctx = nullptr, bool no_alloc = true) {
    return GgufPtr(gguf_init_from_buffer(bytes.data(), bytes.size(), {no_alloc, ctx}));
}

inline int64_t key(const gguf_context * ctx, const char * name) {
    const int64_t id = gguf_find_key(ctx, name);
    EXPECT_GE(id, 0) << name;
    return id;
}

// Whether two keys hold the same type and value.
inline bool same_value(const gguf_context * a, int64_t ia, const gguf_context * b, int64_t ib) {
    if (gguf_get_kv_type(a, ia) != gguf_get_kv_type(b, ib) || gguf_get_arr_n(a, ia) != gguf_get_arr_n(b, ib)) {
        return false;
    }
    const bool      is_array = gguf_get_kv_type(a, ia) == GGUF_TYPE_ARRAY;
    const gguf_type type     = is_array ? gguf_get_arr_type(a, ia) : gguf_get_kv_type(a, ia);
    if (is_array && type != gguf_get_arr_type(b, ib)) {
        return false;
    }
    const size_t n = gguf_get_arr_n(a, ia);
    if (type == GGUF_TYPE_STRING) {
        if (!is_array) {
            return std::strcmp(gguf_get_val_str(a, ia), gguf_get_val_str(b, ib)) == 0;
        }
        for (size_t i = 0; i < n; ++i) {
            if (std::strcmp(gguf_get_arr_str(a, ia, i), gguf_get_arr_str(b, ib, i)) != 0) {
                return false;
            }
        }
        return true;
    }
    const void * da   = is_array ? gguf_get_arr_data(a, ia) : gguf_get_val_data(a, ia);
    const void * db   = is_array ? gguf_get_arr_data(b, ib) : gguf_get_val_data(b, ib);
    const size_t size = n * (type == GGUF_TYPE_UINT8 || type == GGUF_TYPE_INT8 || type == GGUF_TYPE_BOOL ? 1
                             : type == GGUF_TYPE_UINT16 || type == GGUF_TYPE_INT16                       ? 2
                             : type == GGUF_TYPE_UINT64 || type == GGUF_TYPE_INT64 || type == GGUF_TYPE_FLOAT64
                                 ? 8
                                 : 4);
    return n == 0 || std::memcmp(da, db, size) == 0;
}

// ---------------------------------------------------------------------------
// Builder of GGUF bytes, for valid and deliberately broken files.

class Builder {
public:
    explicit Builder(uint32_t version = 3) : version_(version) {}

    Builder & raw(const void * p, size_t n) {
        const auto * c = static_cast<const uint8_t *>(p);
        b_.insert(b_.end(), c, c + n);
        return *this;
    }
    Builder & u32(uint32_t v) { return raw(&v, 4); }
    Builder & i32(int32_t v) { return raw(&v, 4); }
    Builder & u64(uint64_t v) { return raw(&v, 8); }
    Builder & f32(float v) { return raw(&v, 4); }
    // A count, length or dimension in the version's width.
    Builder & len(uint64_t v) { return version_ == 1 ? u32(uint32_t(v)) : u64(v); }
    Builder & str(const std::string & s) { return len(s.size()).raw(s.data(), s.size()); }

    Builder & header(uint64_t n_tensors, uint64_t n_kv) {
        raw("GGUF", 4).u32(version_);
        return len(n_tensors).len(n_kv);
    }
    Builder & kv_u32(const std::string & k, uint32_t v) { return str(k).i32(GGUF_TYPE_UINT32).u32(v); }
    Builder & kv_str(const std::string & k, const std::string & v) { return str(k).i32(GGUF_TYPE_STRING).str(v); }
    Builder & tensor(const std::string & name, std::vector<uint64_t> ne, int32_t type, uint64_t offset) {
        str(name).u32(uint32_t(ne.size()));
        for (uint64_t d : ne) {
            len(d);
        }
        return i32(type).u64(offset);
    }
    Builder & pad(size_t a = 32) {
        while (b_.size() % a != 0) {
            b_.push_back(0);
        }
        return *this;
    }
    Builder & zeros(size_t n) {
        b_.insert(b_.end(), n, 0);
        return *this;
    }

    const std::vector<uint8_t> & bytes() const { return b_; }
    size_t                       size() const { return b_.size(); }

private:
    uint32_t             version_;
    std::vector<uint8_t> b_;
};

// A small valid file: five keys (string, u32, f32 array, string array,
// bool), two tensors of 32 bytes each so that the file ends exactly at the
// end of the last tensor (every shorter prefix is invalid).
inline std::vector<uint8_t> small_file(uint32_t version) {
    Builder b(version);
    b.header(2, 5);
    b.kv_str("general.architecture", "llama");
    b.kv_u32("llama.block_count", 5);
    b.str("scores").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_FLOAT32).len(3).f32(0.5f).f32(-1.0f).f32(2.0f);
    b.str("tokens").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING).len(2).str("<s>").str("\xE2\x96\x81hi");
    b.str("flag").i32(GGUF_TYPE_BOOL).raw("\x01", 1);
    b.tensor("a", {4, 2}, GGML_TYPE_F32, 0);
    b.tensor("b", {8}, GGML_TYPE_I32, 32);
    b.pad();
    for (int i = 0; i < 8; ++i) {
        b.f32(float(i) + 0.25f);
    }
    for (int i = 0; i < 8; ++i) {
        b.i32(-i);
    }
    return b.bytes();
}

} // namespace gguftest
