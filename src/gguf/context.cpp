// The gguf_context accessors and setters. Ids and types passed by the caller
// are preconditions (they abort with the function's name); the data itself
// was validated when it was read or is the caller's own.

#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "core/common.h"
#include "core/types.h"
#include "gguf_impl.h"

using loom::gguf::KeyValue;
using loom::gguf::TensorInfo;

namespace loom::gguf {

size_t type_size(int type) {
    switch (type) {
        case GGUF_TYPE_UINT8:
        case GGUF_TYPE_INT8:
        case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16:
        case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32:
        case GGUF_TYPE_INT32:
        case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64:
        case GGUF_TYPE_INT64:
        case GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

size_t tensor_nbytes(ggml_type type, const int64_t ne[GGML_MAX_DIMS]) {
    const TypeInfo & ti     = type_info(type, "gguf");
    size_t           nbytes = ti.type_size * size_t(ne[0] / ti.blck_size);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        nbytes *= size_t(ne[i]);
    }
    return nbytes;
}

void set_contiguous_strides(ggml_tensor & t) {
    const TypeInfo & ti = type_info(t.type, "gguf");
    t.nb[0]             = ti.type_size;
    t.nb[1]             = ti.type_size * size_t(t.ne[0] / ti.blck_size);
    for (int i = 2; i < GGML_MAX_DIMS; ++i) {
        t.nb[i] = t.nb[i - 1] * size_t(t.ne[i - 1]);
    }
}

} // namespace loom::gguf

uint64_t gguf_context::data_size() const {
    if (tensors.empty()) {
        return 0;
    }
    const TensorInfo & last = tensors.back();
    return loom::align_up(last.offset + ggml_nbytes(&last.t), alignment);
}

void gguf_context::relayout() {
    uint64_t offset = 0;
    for (TensorInfo & info : tensors) {
        info.offset = offset;
        offset      = loom::align_up(offset + ggml_nbytes(&info.t), alignment);
    }
}

namespace {

// Setters can only fail by running out of memory; with no way to report that
// through a void C function, it is turned into an abort with a message
// instead of an exception crossing the C boundary.
template <typename F>
void guarded(const char * func, F && f) {
    try {
        f();
    } catch (const std::bad_alloc &) {
        loom::fail(func, "out of memory");
    }
}

const KeyValue & kv_at(const gguf_context * ctx, int64_t key_id, const char * func) {
    if (ctx == nullptr) [[unlikely]] {
        loom::fail(func, "ctx is NULL");
    }
    if (key_id < 0 || uint64_t(key_id) >= ctx->kv.size()) [[unlikely]] {
        loom::fail(func, "key id %lld out of range [0, %zu)", (long long) key_id, ctx->kv.size());
    }
    return ctx->kv[size_t(key_id)];
}

const TensorInfo & tensor_at(const gguf_context * ctx, int64_t tensor_id, const char * func) {
    if (ctx == nullptr) [[unlikely]] {
        loom::fail(func, "ctx is NULL");
    }
    if (tensor_id < 0 || uint64_t(tensor_id) >= ctx->tensors.size()) [[unlikely]] {
        loom::fail(func, "tensor id %lld out of range [0, %zu)", (long long) tensor_id, ctx->tensors.size());
    }
    return ctx->tensors[size_t(tensor_id)];
}

// The one element of a scalar key of the given type (an array of one element
// is accepted as well, as ggml does).
const KeyValue & single(const gguf_context * ctx, int64_t key_id, gguf_type type, const char * func) {
    const KeyValue & kv = kv_at(ctx, key_id, func);
    if (kv.type != type || kv.count() != 1) [[unlikely]] {
        loom::fail(func, "key '%s' holds %zu element(s) of type %s, not one %s", kv.key.c_str(), kv.count(),
                   gguf_type_name(kv.type), gguf_type_name(type));
    }
    return kv;
}

template <typename T>
T get_scalar(const gguf_context * ctx, int64_t key_id, gguf_type type, const char * func) {
    const KeyValue & kv = single(ctx, key_id, type, func);
    T                v;
    std::memcpy(&v, kv.bytes.data(), sizeof(v));
    return v;
}

int64_t find_key(const gguf_context * ctx, const char * key) {
    for (size_t i = 0; i < ctx->kv.size(); ++i) {
        if (ctx->kv[i].key == key) {
            return int64_t(i);
        }
    }
    return -1;
}

int64_t find_tensor(const gguf_context * ctx, const char * name) {
    for (size_t i = 0; i < ctx->tensors.size(); ++i) {
        if (std::strcmp(ctx->tensors[i].t.name, name) == 0) {
            return int64_t(i);
        }
    }
    return -1;
}

// Replaces (or adds) a key: the new pair goes to the end, as in ggml. The
// alignment key is checked and takes effect on the tensor layout.
void set_kv(gguf_context * ctx, KeyValue && kv, const char * func) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL (called from %s)", func);
    if (kv.key.empty()) [[unlikely]] {
        loom::fail(func, "the key is empty");
    }
    const bool is_alignment = kv.key == GGUF_KEY_GENERAL_ALIGNMENT;
    uint32_t   alignment    = 0;
    if (is_alignment) {
        if (kv.is_array || kv.type != GGUF_TYPE_UINT32) [[unlikely]] {
            loom::fail(func, "'%s' must be a u32", GGUF_KEY_GENERAL_ALIGNMENT);
        }
        std::memcpy(&alignment, kv.bytes.data(), sizeof(alignment));
        if (alignment == 0 || (alignment & (alignment - 1)) != 0) [[unlikely]] {
            loom::fail(func, "'%s' = %u is not a nonzero power of two", GGUF_KEY_GENERAL_ALIGNMENT, alignment);
        }
    }
    guarded(func, [&] {
        const int64_t old = find_key(ctx, kv.key.c_str());
        if (old >= 0) {
            ctx->kv.erase(ctx->kv.begin() + old);
        }
        ctx->kv.push_back(std::move(kv));
    });
    if (is_alignment) {
        ctx->alignment = alignment;
        ctx->relayout();
    }
}

template <typename T>
void set_scalar(gguf_context * ctx, const char * key, gguf_type type, T val, const char * func) {
    LOOM_REQUIRE(key != nullptr, "key is NULL (called from %s)", func);
    KeyValue kv;
    guarded(func, [&] {
        kv.key  = key;
        kv.type = type;
        kv.bytes.resize(sizeof(T));
    });
    std::memcpy(kv.bytes.data(), &val, sizeof(T));
    set_kv(ctx, std::move(kv), func);
}

} // namespace

extern "C" {

gguf_context * gguf_init_empty(void) {
    return new (std::nothrow) gguf_context();
}

void gguf_free(gguf_context * ctx) {
    delete ctx;
}

const char * gguf_type_name(gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8: return "u8";
        case GGUF_TYPE_INT8: return "i8";
        case GGUF_TYPE_UINT16: return "u16";
        case GGUF_TYPE_INT16: return "i16";
        case GGUF_TYPE_UINT32: return "u32";
        case GGUF_TYPE_INT32: return "i32";
        case GGUF_TYPE_FLOAT32: return "f32";
        case GGUF_TYPE_BOOL: return "bool";
        case GGUF_TYPE_STRING: return "str";
        case GGUF_TYPE_ARRAY: return "arr";
        case GGUF_TYPE_UINT64: return "u64";
        case GGUF_TYPE_INT64: return "i64";
        case GGUF_TYPE_FLOAT64: return "f64";
        default: return nullptr;
    }
}

uint32_t gguf_get_version(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return ctx->version;
}
size_t gguf_get_alignment(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return ctx->alignment;
}
size_t gguf_get_data_offset(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return ctx->data_offset;
}

int64_t gguf_get_n_kv(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return int64_t(ctx->kv.size());
}
int64_t gguf_find_key(const gguf_context * ctx, const char * key) {
    LOOM_REQUIRE(ctx != nullptr && key != nullptr, "ctx or key is NULL");
    return find_key(ctx, key);
}
const char * gguf_get_key(const gguf_context * ctx, int64_t key_id) {
    return kv_at(ctx, key_id, __func__).key.c_str();
}

gguf_type gguf_get_kv_type(const gguf_context * ctx, int64_t key_id) {
    const KeyValue & kv = kv_at(ctx, key_id, __func__);
    return kv.is_array ? GGUF_TYPE_ARRAY : kv.type;
}
gguf_type gguf_get_arr_type(const gguf_context * ctx, int64_t key_id) {
    const KeyValue & kv = kv_at(ctx, key_id, __func__);
    LOOM_REQUIRE(kv.is_array, "key '%s' is not an array", kv.key.c_str());
    return kv.type;
}

uint8_t gguf_get_val_u8(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint8_t>(ctx, key_id, GGUF_TYPE_UINT8, __func__);
}
int8_t gguf_get_val_i8(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<int8_t>(ctx, key_id, GGUF_TYPE_INT8, __func__);
}
uint16_t gguf_get_val_u16(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint16_t>(ctx, key_id, GGUF_TYPE_UINT16, __func__);
}
int16_t gguf_get_val_i16(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<int16_t>(ctx, key_id, GGUF_TYPE_INT16, __func__);
}
uint32_t gguf_get_val_u32(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint32_t>(ctx, key_id, GGUF_TYPE_UINT32, __func__);
}
int32_t gguf_get_val_i32(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<int32_t>(ctx, key_id, GGUF_TYPE_INT32, __func__);
}
float gguf_get_val_f32(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<float>(ctx, key_id, GGUF_TYPE_FLOAT32, __func__);
}
uint64_t gguf_get_val_u64(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint64_t>(ctx, key_id, GGUF_TYPE_UINT64, __func__);
}
int64_t gguf_get_val_i64(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<int64_t>(ctx, key_id, GGUF_TYPE_INT64, __func__);
}
double gguf_get_val_f64(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<double>(ctx, key_id, GGUF_TYPE_FLOAT64, __func__);
}
bool gguf_get_val_bool(const gguf_context * ctx, int64_t key_id) {
    return get_scalar<uint8_t>(ctx, key_id, GGUF_TYPE_BOOL, __func__) != 0;
}
const char * gguf_get_val_str(const gguf_context * ctx, int64_t key_id) {
    return single(ctx, key_id, GGUF_TYPE_STRING, __func__).strings[0].c_str();
}
const void * gguf_get_val_data(const gguf_context * ctx, int64_t key_id) {
    const KeyValue & kv = kv_at(ctx, key_id, __func__);
    LOOM_REQUIRE(kv.type != GGUF_TYPE_STRING && kv.count() == 1, "key '%s' does not hold one non-string value",
                 kv.key.c_str());
    return kv.bytes.data();
}

size_t gguf_get_arr_n(const gguf_context * ctx, int64_t key_id) {
    return kv_at(ctx, key_id, __func__).count();
}
const void * gguf_get_arr_data(const gguf_context * ctx, int64_t key_id) {
    const KeyValue & kv = kv_at(ctx, key_id, __func__);
    LOOM_REQUIRE(kv.type != GGUF_TYPE_STRING, "key '%s' holds strings (use gguf_get_arr_str)", kv.key.c_str());
    return kv.bytes.data();
}
const char * gguf_get_arr_str(const gguf_context * ctx, int64_t key_id, size_t i) {
    const KeyValue & kv = kv_at(ctx, key_id, __func__);
    LOOM_REQUIRE(kv.type == GGUF_TYPE_STRING, "key '%s' holds %s, not strings", kv.key.c_str(),
                 gguf_type_name(kv.type));
    LOOM_REQUIRE(i < kv.strings.size(), "index %zu out of range for key '%s' of %zu strings", i, kv.key.c_str(),
                 kv.strings.size());
    return kv.strings[i].c_str();
}

int64_t gguf_get_n_tensors(const gguf_context * ctx) {
    LOOM_REQUIRE(ctx != nullptr, "ctx is NULL");
    return int64_t(ctx->tensors.size());
}
int64_t gguf_find_tensor(const gguf_context * ctx, const char * name) {
    LOOM_REQUIRE(ctx != nullptr && name != nullptr, "ctx or name is NULL");
    return find_tensor(ctx, name);
}
size_t gguf_get_tensor_offset(const gguf_context * ctx, int64_t tensor_id) {
    return size_t(tensor_at(ctx, tensor_id, __func__).offset);
}
const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t tensor_id) {
    return tensor_at(ctx, tensor_id, __func__).t.name;
}
const int64_t * gguf_get_tensor_ne(const gguf_context * ctx, int64_t tensor_id) {
    return tensor_at(ctx, tensor_id, __func__).t.ne;
}
ggml_type gguf_get_tensor_type(const gguf_context * ctx, int64_t tensor_id) {
    return tensor_at(ctx, tensor_id, __func__).t.type;
}
size_t gguf_get_tensor_size(const gguf_context * ctx, int64_t tensor_id) {
    return ggml_nbytes(&tensor_at(ctx, tensor_id, __func__).t);
}

int64_t gguf_remove_key(gguf_context * ctx, const char * key) {
    LOOM_REQUIRE(ctx != nullptr && key != nullptr, "ctx or key is NULL");
    const int64_t id = find_key(ctx, key);
    if (id >= 0) {
        ctx->kv.erase(ctx->kv.begin() + id);
        if (std::strcmp(key, GGUF_KEY_GENERAL_ALIGNMENT) == 0) {
            ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
            ctx->relayout();
        }
    }
    return id;
}

void gguf_set_val_u8(gguf_context * ctx, const char * key, uint8_t val) {
    set_scalar(ctx, key, GGUF_TYPE_UINT8, val, __func__);
}
void gguf_set_val_i8(gguf_context * ctx, const char * key, int8_t val) {
    set_scalar(ctx, key, GGUF_TYPE_INT8, val, __func__);
}
void gguf_set_val_u16(gguf_context * ctx, const char * key, uint16_t val) {
    set_scalar(ctx, key, GGUF_TYPE_UINT16, val, __func__);
}
void gguf_set_val_i16(gguf_context * ctx, const char * key, int16_t val) {
    set_scalar(ctx, key, GGUF_TYPE_INT16, val, __func__);
}
void gguf_set_val_u32(gguf_context * ctx, const char * key, uint32_t val) {
    set_scalar(ctx, key, GGUF_TYPE_UINT32, val, __func__);
}
void gguf_set_val_i32(gguf_context * ctx, const char * key, int32_t val) {
    set_scalar(ctx, key, GGUF_TYPE_INT32, val, __func__);
}
void gguf_set_val_f32(gguf_context * ctx, const char * key, float val) {
    set_scalar(ctx, key, GGUF_TYPE_FLOAT32, val, __func__);
}
void gguf_set_val_u64(gguf_context * ctx, const char * key, uint64_t val) {
    set_scalar(ctx, key, GGUF_TYPE_UINT64, val, __func__);
}
void gguf_set_val_i64(gguf_context * ctx, const char * key, int64_t val) {
    set_scalar(ctx, key, GGUF_TYPE_INT64, val, __func__);
}
void gguf_set_val_f64(gguf_context * ctx, const char * key, double val) {
    set_scalar(ctx, key, GGUF_TYPE_FLOAT64, val, __func__);
}
void gguf_set_val_bool(gguf_context * ctx, const char * key, bool val) {
    set_scalar(ctx, key, GGUF_TYPE_BOOL, uint8_t(val ? 1 : 0), __func__);
}
void gguf_set_val_str(gguf_context * ctx, const char * key, const char * val) {
    LOOM_REQUIRE(key != nullptr && val != nullptr, "key or val is NULL");
    KeyValue kv;
    guarded(__func__, [&] {
        kv.key  = key;
        kv.type = GGUF_TYPE_STRING;
        kv.strings.emplace_back(val);
    });
    set_kv(ctx, std::move(kv), __func__);
}

void gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type, const void * data, size_t n) {
    LOOM_REQUIRE(key != nullptr, "key is NULL");
    const size_t elem = loom::gguf::type_size(type);
    LOOM_REQUIRE(elem != 0, "type %d (%s) is not a fixed-size element type", int(type),
                 gguf_type_name(type) ? gguf_type_name(type) : "invalid");
    LOOM_REQUIRE(n <= SIZE_MAX / elem, "%zu elements of %zu bytes overflow", n, elem);
    LOOM_REQUIRE(data != nullptr || n == 0, "data is NULL with n = %zu", n);
    KeyValue kv;
    guarded(__func__, [&] {
        kv.key      = key;
        kv.type     = type;
        kv.is_array = true;
        kv.bytes.resize(n * elem);
    });
    if (n > 0) {
        std::memcpy(kv.bytes.data(), data, n * elem);
    }
    set_kv(ctx, std::move(kv), __func__);
}

void gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n) {
    LOOM_REQUIRE(key != nullptr, "key is NULL");
    LOOM_REQUIRE(data != nullptr || n == 0, "data is NULL with n = %zu", n);
    for (size_t i = 0; i < n; ++i) {
        LOOM_REQUIRE(data[i] != nullptr, "string %zu is NULL", i);
    }
    KeyValue kv;
    guarded(__func__, [&] {
        kv.key      = key;
        kv.type     = GGUF_TYPE_STRING;
        kv.is_array = true;
        kv.strings.assign(data, data + n);
    });
    set_kv(ctx, std::move(kv), __func__);
}

void gguf_set_kv(gguf_context * ctx, const gguf_context * src) {
    LOOM_REQUIRE(ctx != nullptr && src != nullptr, "ctx or src is NULL");
    // Copied first: src may be ctx itself, whose pairs move as they are set.
    std::vector<KeyValue> pairs;
    guarded(__func__, [&] { pairs = src->kv; });
    for (KeyValue & kv : pairs) {
        set_kv(ctx, std::move(kv), __func__);
    }
}

void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor) {
    LOOM_REQUIRE(ctx != nullptr && tensor != nullptr, "ctx or tensor is NULL");
    LOOM_REQUIRE(find_tensor(ctx, tensor->name) < 0, "duplicate tensor name '%s'", tensor->name);
    TensorInfo info;
    info.t = *tensor;
    if (!ctx->tensors.empty()) {
        const TensorInfo & prev = ctx->tensors.back();
        info.offset             = loom::align_up(prev.offset + ggml_nbytes(&prev.t), ctx->alignment);
    }
    guarded(__func__, [&] { ctx->tensors.push_back(info); });
}

void gguf_set_tensor_type(gguf_context * ctx, const char * name, ggml_type type) {
    LOOM_REQUIRE(ctx != nullptr && name != nullptr, "ctx or name is NULL");
    const int64_t id = find_tensor(ctx, name);
    LOOM_REQUIRE(id >= 0, "no tensor named '%s'", name);
    ggml_tensor &          t  = ctx->tensors[size_t(id)].t;
    const loom::TypeInfo & ti = loom::type_info(type, __func__);
    LOOM_REQUIRE(t.ne[0] % ti.blck_size == 0, "tensor '%s': %lld elements per row are not a multiple of the %s block size",
                 name, (long long) t.ne[0], ti.name);
    t.type = type;
    loom::gguf::set_contiguous_strides(t);
    ctx->relayout();
}

void gguf_set_tensor_data(gguf_context * ctx, const char * name, const void * data) {
    LOOM_REQUIRE(ctx != nullptr && name != nullptr, "ctx or name is NULL");
    const int64_t id = find_tensor(ctx, name);
    LOOM_REQUIRE(id >= 0, "no tensor named '%s'", name);
    ggml_tensor & t = ctx->tensors[size_t(id)].t;
    // Host memory from now on, whatever buffer the tensor was in.
    t.data   = const_cast<void *>(data);
    t.buffer = nullptr;
}

} // extern "C"
