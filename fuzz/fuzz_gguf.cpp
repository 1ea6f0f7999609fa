// libFuzzer target over the GGUF reader: every input is parsed in the three
// reading modes (metadata only, tensors without data, tensors with data);
// whatever loads is walked through the accessors and serialised again, and
// its invariants are checked (a violation aborts, which the fuzzer reports).

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ggml.h"
#include "gguf.h"

namespace {

void quiet(ggml_log_level, const char *, void *) {}

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

void walk(const gguf_context * g, ggml_context * tctx, size_t input_size, bool has_data) {
    const int64_t n_kv = gguf_get_n_kv(g);
    for (int64_t i = 0; i < n_kv; ++i) {
        check(gguf_find_key(g, gguf_get_key(g, i)) == i);
        const gguf_type type = gguf_get_kv_type(g, i);
        const size_t    n    = gguf_get_arr_n(g, i);
        if (type == GGUF_TYPE_ARRAY) {
            const gguf_type elem = gguf_get_arr_type(g, i);
            check(gguf_type_name(elem) != nullptr && elem != GGUF_TYPE_ARRAY);
            if (elem == GGUF_TYPE_STRING) {
                size_t total = 0;
                for (size_t j = 0; j < n; ++j) {
                    total += std::strlen(gguf_get_arr_str(g, i, j));
                }
                check(total <= input_size);
            } else if (n > 0) {
                volatile uint8_t sink = static_cast<const uint8_t *>(gguf_get_arr_data(g, i))[0];
                (void) sink;
            }
        } else if (type == GGUF_TYPE_STRING) {
            check(std::strlen(gguf_get_val_str(g, i)) <= input_size);
        } else {
            check(n == 1);
            volatile uint8_t sink = *static_cast<const uint8_t *>(gguf_get_val_data(g, i));
            (void) sink;
        }
    }

    const size_t  alignment = gguf_get_alignment(g);
    const int64_t n_tensors = gguf_get_n_tensors(g);
    check(alignment != 0 && (alignment & (alignment - 1)) == 0);
    for (int64_t i = 0; i < n_tensors; ++i) {
        const char * name   = gguf_get_tensor_name(g, i);
        const size_t offset = gguf_get_tensor_offset(g, i);
        const size_t size   = gguf_get_tensor_size(g, i);
        check(gguf_find_tensor(g, name) == i);
        check(offset % alignment == 0);
        check(gguf_get_data_offset(g) + offset + size <= input_size);
        if (tctx != nullptr) {
            ggml_tensor * t = ggml_get_tensor(tctx, name);
            check(t != nullptr && ggml_nbytes(t) == size && t->type == gguf_get_tensor_type(g, i));
            if (has_data && size > 0) {
                const volatile uint8_t * p = static_cast<const uint8_t *>(t->data);
                (void) p[0];
                (void) p[size - 1];
            }
        }
    }

    // The writer over what the reader accepted. The padding after the
    // metadata is as large as the alignment the input asks for (up to 2 GiB),
    // so the bytes are only produced for moderate alignments.
    const size_t meta_size = gguf_get_meta_size(g);
    check(meta_size >= 24 && meta_size % alignment == 0);
    if (meta_size <= (size_t(1) << 20)) {
        std::vector<uint8_t> meta(meta_size);
        gguf_get_meta_data(g, meta.data());
        check(std::memcmp(meta.data(), "GGUF", 4) == 0);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static const bool init = [] {
        ggml_log_set(quiet, nullptr);
        return true;
    }();
    (void) init;

    if (gguf_context * g = gguf_init_from_buffer(data, size, {true, nullptr})) {
        walk(g, nullptr, size, false);
        gguf_free(g);
    }
    for (bool no_alloc : {true, false}) {
        ggml_context * tctx = nullptr;
        gguf_context * g    = gguf_init_from_buffer(data, size, {no_alloc, &tctx});
        check((g == nullptr) == (tctx == nullptr));
        if (g != nullptr) {
            walk(g, tctx, size, !no_alloc);
            gguf_free(g);
            ggml_free(tctx);
        }
    }
    return 0;
}
