// Serialisation of a gguf_context: the metadata into memory, then the file.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "core/common.h"
#include "ggml-backend.h"
#include "gguf_impl.h"

using loom::gguf::KeyValue;
using loom::gguf::TensorInfo;

namespace {

class MetaWriter {
public:
    explicit MetaWriter(std::vector<uint8_t> & out) : out_(out) {}

    void raw(const void * p, size_t n) {
        if (n == 0) {
            return;
        }
        const size_t at = out_.size();
        out_.resize(at + n);
        std::memcpy(out_.data() + at, p, n);
    }
    template <typename T>
    void num(T v) {
        raw(&v, sizeof(v));
    }
    void str(const std::string & s) {
        num(uint64_t(s.size()));
        raw(s.data(), s.size());
    }
    void str(const char * s) {
        const size_t n = std::strlen(s);
        num(uint64_t(n));
        raw(s, n);
    }

    void kv(const KeyValue & kv) {
        str(kv.key);
        if (kv.is_array) {
            num(int32_t(GGUF_TYPE_ARRAY));
            num(int32_t(kv.type));
            num(uint64_t(kv.count()));
        } else {
            num(int32_t(kv.type));
        }
        if (kv.type == GGUF_TYPE_STRING) {
            for (const std::string & s : kv.strings) {
                str(s);
            }
        } else {
            raw(kv.bytes.data(), kv.bytes.size());
        }
    }

    void tensor_info(const TensorInfo & info) {
        str(info.t.name);
        const int n_dims = ggml_n_dims(&info.t);
        num(uint32_t(n_dims));
        for (int j = 0; j < n_dims; ++j) {
            num(int64_t(info.t.ne[j]));
        }
        num(int32_t(info.t.type));
        num(uint64_t(info.offset));
    }

private:
    std::vector<uint8_t> & out_;
};

// The metadata without the padding that follows it: the padding can be far
// larger than the metadata (a file may ask for any power-of-two alignment),
// so it is counted and written as zeros, never materialised.
std::vector<uint8_t> build_meta(const gguf_context & ctx, const char * func) {
    std::vector<uint8_t> out;
    try {
        MetaWriter w(out);
        w.raw(GGUF_MAGIC, 4);
        w.num(uint32_t(GGUF_VERSION));
        w.num(int64_t(ctx.tensors.size()));
        w.num(int64_t(ctx.kv.size()));
        for (const KeyValue & kv : ctx.kv) {
            w.kv(kv);
        }
        for (const TensorInfo & info : ctx.tensors) {
            w.tensor_info(info);
        }
    } catch (const std::bad_alloc &) {
        loom::fail(func, "out of memory");
    }
    return out;
}

size_t padded_size(const std::vector<uint8_t> & meta, const gguf_context & ctx) {
    return loom::align_up(meta.size(), ctx.alignment);
}

bool write_all(std::FILE * f, const void * p, size_t n) {
    return n == 0 || std::fwrite(p, 1, n, f) == n;
}

bool write_zeros(std::FILE * f, uint64_t n) {
    static const uint8_t zeros[4096] = {};
    while (n > 0) {
        const size_t k = size_t(std::min<uint64_t>(n, sizeof(zeros)));
        if (!write_all(f, zeros, k)) {
            return false;
        }
        n -= k;
    }
    return true;
}

// Writes a tensor's bytes, from host memory or through its backend buffer
// (in pieces, so a large device tensor needs no full host copy).
bool write_tensor(std::FILE * f, const ggml_tensor & t, std::vector<uint8_t> & staging) {
    const size_t nbytes = ggml_nbytes(&t);
    if (t.buffer == nullptr) {
        return write_all(f, t.data, nbytes);
    }
    constexpr size_t piece = size_t(16) << 20;
    staging.resize(std::min(nbytes, piece));
    for (size_t done = 0; done < nbytes;) {
        const size_t n = std::min(piece, nbytes - done);
        ggml_backend_tensor_get(&t, staging.data(), done, n);
        if (!write_all(f, staging.data(), n)) {
            return false;
        }
        done += n;
    }
    return true;
}

// Tensors to be written with their data must have it, contiguous.
void check_writable(const gguf_context & ctx, bool only_meta, const char * func) {
    if (only_meta) {
        return;
    }
    for (const TensorInfo & info : ctx.tensors) {
        if (info.t.data == nullptr) {
            loom::fail(func, "tensor '%s' has no data (gguf_set_tensor_data, or only_meta)", info.t.name);
        }
        if (!ggml_is_contiguous(&info.t)) {
            loom::fail(func, "tensor '%s' is not contiguous", info.t.name);
        }
    }
}

// The whole file (or its meta data) into f from its position.
bool write_stream(const gguf_context & ctx, std::FILE * f, bool only_meta, const char * func) {
    const std::vector<uint8_t> meta = build_meta(ctx, func);
    bool ok = write_all(f, meta.data(), meta.size()) && write_zeros(f, padded_size(meta, ctx) - meta.size());
    if (ok && !only_meta) {
        std::vector<uint8_t> staging;
        uint64_t             written = 0; // bytes of the data section so far
        for (const TensorInfo & info : ctx.tensors) {
            LOOM_ASSERT(written == info.offset);
            const uint64_t end = written + ggml_nbytes(&info.t);
            // Each tensor is followed by padding up to the alignment.
            written = loom::align_up(end, ctx.alignment);
            ok      = write_tensor(f, info.t, staging) && write_zeros(f, written - end);
            if (!ok) {
                break;
            }
        }
    }
    return ok;
}

} // namespace

extern "C" {

size_t gguf_get_meta_size(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return padded_size(build_meta(*ctx, __func__), *ctx);
}

void gguf_get_meta_data(const gguf_context * ctx, void * data) {
    LOOM_REQUIRE(ctx != nullptr && data != nullptr, "ctx or data is NULL");
    const std::vector<uint8_t> meta = build_meta(*ctx, __func__);
    std::memcpy(data, meta.data(), meta.size());
    std::memset(static_cast<uint8_t *>(data) + meta.size(), 0, padded_size(meta, *ctx) - meta.size());
}

bool gguf_write_to_file(const gguf_context * ctx, const char * fname, bool only_meta) {
    LOOM_REQUIRE(ctx != nullptr && fname != nullptr, "ctx or fname is NULL");
    check_writable(*ctx, only_meta, __func__); // before the file is touched: a misuse leaves no partial file
    std::FILE * f = std::fopen(fname, "wb");
    if (f == nullptr) {
        LOOM_LOG_ERROR("%s: cannot open '%s' for writing: %s\n", __func__, fname, std::strerror(errno));
        return false;
    }
    const bool ok        = write_stream(*ctx, f, only_meta, "gguf_write_to_file");
    const int  close_err = std::fclose(f);
    if (!ok || close_err != 0) {
        LOOM_LOG_ERROR("%s: writing '%s' failed: %s\n", __func__, fname, std::strerror(errno));
        std::remove(fname);
        return false;
    }
    return true;
}

bool gguf_write_to_file_ptr(const gguf_context * ctx, FILE * file, bool only_meta) {
    LOOM_REQUIRE(ctx != nullptr && file != nullptr, "ctx or file is NULL");
    check_writable(*ctx, only_meta, __func__);
    if (!write_stream(*ctx, file, only_meta, "gguf_write_to_file_ptr") || std::fflush(file) != 0) {
        LOOM_LOG_ERROR("%s: writing failed: %s\n", __func__, std::strerror(errno));
        return false;
    }
    return true;
}

} // extern "C"
