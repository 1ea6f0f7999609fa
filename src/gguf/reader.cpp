// Parsing and validation of GGUF files. Every number comes from an untrusted
// file: each is checked against the bytes that remain before anything is
// allocated or indexed with it, with arithmetic that cannot overflow. A bad
// file is reported once, by the check that catches it, and gives NULL.

#include <cerrno>
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_set>

#include "core/common.h"
#include "core/types.h"
#include "gguf_impl.h"
#include "source.h"

using loom::gguf::KeyValue;
using loom::gguf::Source;
using loom::gguf::TensorInfo;

namespace {

// The name of a ggml type by value, from the type table (ggml's name for a
// removed slot too), for messages about the types a file may hold but loom
// does not implement.
const char * ggml_type_label(int32_t type) {
    const char * name = type >= 0 && type < GGML_TYPE_COUNT ? loom::type_row(type).name : nullptr;
    return name != nullptr ? name : "unknown";
}

bool is_power_of_two(uint64_t x) {
    return x != 0 && (x & (x - 1)) == 0;
}

// Rounds x up to a multiple of a (a power of two); false on overflow.
bool pad_to(uint64_t x, uint64_t a, uint64_t * out) {
    uint64_t sum;
    if (__builtin_add_overflow(x, a - 1, &sum)) {
        return false;
    }
    *out = sum & ~(a - 1);
    return true;
}

class Parser {
public:
    Parser(Source & src, const char * func, const char * origin) : src_(src), func_(func), origin_(origin) {}

    // Parses the metadata into ctx; false (logged) when the file is invalid.
    bool parse(gguf_context & ctx);
    // Creates the ggml context of params.ctx for the parsed tensors.
    bool make_tensors(const gguf_context & ctx, gguf_init_params params);

private:
    bool error(const char * fmt, ...) __attribute__((format(printf, 2, 3)));

    bool read_raw(void * dst, uint64_t n, const char * what);
    bool read_u32(uint32_t * v, const char * what) { return read_raw(v, sizeof(*v), what); }
    bool read_i32(int32_t * v, const char * what) { return read_raw(v, sizeof(*v), what); }
    bool read_u64(uint64_t * v, const char * what) { return read_raw(v, sizeof(*v), what); }
    // A count, string length or dimension: uint32 in version 1, 64-bit later.
    bool read_length(uint64_t * v, const char * what);
    bool read_string(std::string * s, const char * what);

    bool read_header(uint64_t * n_tensors, uint64_t * n_kv);
    bool read_kv(gguf_context & ctx, uint64_t index);
    bool read_value(KeyValue & kv, uint64_t n);
    bool read_alignment(gguf_context & ctx);
    bool read_tensor_info(gguf_context & ctx, uint64_t index);
    bool check_layout(gguf_context & ctx);

    uint64_t length_size() const { return version_ == 1 ? 4 : 8; }

    Source &     src_;
    const char * func_;
    const char * origin_;
    uint32_t     version_ = 0;

    std::unordered_set<std::string> keys_;
    std::unordered_set<std::string> names_;
};

bool Parser::error(const char * fmt, ...) {
    char    text[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    LOOM_LOG_ERROR("%s: %s: %s\n", func_, origin_, text);
    return false;
}

bool Parser::read_raw(void * dst, uint64_t n, const char * what) {
    if (n > src_.remaining()) {
        return error("file ends at byte %" PRIu64 " while reading %s (%" PRIu64 " bytes needed, %" PRIu64 " left)",
                     src_.size(), what, n, src_.remaining());
    }
    if (!src_.read(dst, n)) {
        return error("read error at byte %" PRIu64 " while reading %s", src_.position(), what);
    }
    return true;
}

bool Parser::read_length(uint64_t * v, const char * what) {
    if (version_ == 1) {
        uint32_t v32 = 0;
        if (!read_u32(&v32, what)) {
            return false;
        }
        *v = v32;
        return true;
    }
    return read_u64(v, what);
}

bool Parser::read_string(std::string * s, const char * what) {
    uint64_t len = 0;
    if (!read_length(&len, what)) {
        return false;
    }
    if (len > src_.remaining()) {
        return error("%s: length %" PRIu64 " exceeds the %" PRIu64 " bytes left in the file", what, len,
                     src_.remaining());
    }
    s->resize(size_t(len));
    return read_raw(s->data(), len, what);
}

bool Parser::read_header(uint64_t * n_tensors, uint64_t * n_kv) {
    char magic[4];
    if (!read_raw(magic, sizeof(magic), "the magic")) {
        return false;
    }
    if (std::memcmp(magic, GGUF_MAGIC, 4) != 0) {
        return error("bad magic %02x %02x %02x %02x (expected \"GGUF\")", uint8_t(magic[0]), uint8_t(magic[1]),
                     uint8_t(magic[2]), uint8_t(magic[3]));
    }
    if (!read_u32(&version_, "the version")) {
        return false;
    }
    if (version_ < 1 || version_ > GGUF_VERSION) {
        // A big-endian file shows its small version number in the high bytes.
        const bool swapped = version_ != 0 && (version_ & 0xffffu) == 0;
        return error("unsupported version %" PRIu32 " (loom reads versions 1 to %d)%s", version_, GGUF_VERSION,
                     swapped ? "; the file may be big-endian" : "");
    }
    if (!read_length(n_tensors, "the tensor count") || !read_length(n_kv, "the key/value count")) {
        return false;
    }
    // Bound both counts by the bytes that remain, before anything is sized
    // from them: the smallest key/value is a 1-byte key and a 1-byte value,
    // the smallest tensor info a 1-byte name, n_dims, type and offset.
    const uint64_t min_kv     = length_size() + 1 + 4 + 1;
    const uint64_t min_tensor = length_size() + 1 + 4 + 4 + 8;
    const uint64_t left       = src_.remaining();
    if (*n_kv > left / min_kv) {
        return error("the header claims %" PRIu64 " key/value pairs but only %" PRIu64 " bytes follow", *n_kv, left);
    }
    if (*n_tensors > left / min_tensor || *n_kv * min_kv > left - *n_tensors * min_tensor) {
        return error("the header claims %" PRIu64 " tensors and %" PRIu64 " key/value pairs but only %" PRIu64
                     " bytes follow",
                     *n_tensors, *n_kv, left);
    }
    return true;
}

bool Parser::read_value(KeyValue & kv, uint64_t n) {
    const char * key = kv.key.c_str();
    if (kv.type == GGUF_TYPE_STRING) {
        if (n > src_.remaining() / length_size()) {
            return error("key '%s': %" PRIu64 " strings cannot fit in the %" PRIu64 " bytes left", key, n,
                         src_.remaining());
        }
        kv.strings.reserve(size_t(n));
        for (uint64_t i = 0; i < n; ++i) {
            std::string s;
            if (!read_string(&s, "a string value")) {
                return error("key '%s': bad string %" PRIu64 " of %" PRIu64, key, i, n);
            }
            kv.strings.push_back(std::move(s));
        }
        return true;
    }
    const uint64_t elem = loom::gguf::type_size(kv.type);
    if (n > src_.remaining() / elem) {
        return error("key '%s': %" PRIu64 " elements of type %s need more than the %" PRIu64 " bytes left", key, n,
                     gguf_type_name(kv.type), src_.remaining());
    }
    kv.bytes.resize(size_t(n * elem));
    if (!read_raw(kv.bytes.data(), n * elem, "a value")) {
        return false;
    }
    if (kv.type == GGUF_TYPE_BOOL) {
        // Any nonzero byte is true; keep 0/1 so that the bytes read as bool.
        for (uint8_t & b : kv.bytes) {
            b = b != 0;
        }
    }
    return true;
}

bool Parser::read_kv(gguf_context & ctx, uint64_t index) {
    KeyValue kv;
    if (!read_string(&kv.key, "a key")) {
        return error("key/value pair %" PRIu64 ": bad key", index);
    }
    if (kv.key.empty()) {
        return error("key/value pair %" PRIu64 " has an empty key", index);
    }
    if (kv.key.find('\0') != std::string::npos) {
        return error("key/value pair %" PRIu64 ": the key contains a NUL byte", index);
    }
    const char * key = kv.key.c_str();
    if (!keys_.insert(kv.key).second) {
        return error("duplicate key '%s' (pair %" PRIu64 ")", key, index);
    }

    int32_t type = -1;
    if (!read_i32(&type, "a value type")) {
        return false;
    }
    uint64_t n = 1;
    if (type == GGUF_TYPE_ARRAY) {
        kv.is_array = true;
        if (!read_i32(&type, "an array element type")) {
            return false;
        }
        if (type == GGUF_TYPE_ARRAY) {
            return error("key '%s': arrays of arrays are not supported", key);
        }
        if (!read_length(&n, "an array length")) {
            return false;
        }
    }
    if (type < 0 || type >= GGUF_TYPE_COUNT) {
        return error("key '%s' has invalid type %" PRId32, key, type);
    }
    kv.type = gguf_type(type);
    if (!read_value(kv, n)) {
        return false;
    }
    ctx.kv.push_back(std::move(kv));
    return true;
}

bool Parser::read_alignment(gguf_context & ctx) {
    ctx.alignment = GGUF_DEFAULT_ALIGNMENT;
    for (const KeyValue & kv : ctx.kv) {
        if (kv.key != GGUF_KEY_GENERAL_ALIGNMENT) {
            continue;
        }
        if (kv.is_array || kv.type != GGUF_TYPE_UINT32) {
            return error("key '%s' must be a u32, not %s%s", GGUF_KEY_GENERAL_ALIGNMENT, kv.is_array ? "an array of " : "",
                         gguf_type_name(kv.type));
        }
        uint32_t a = 0;
        std::memcpy(&a, kv.bytes.data(), sizeof(a));
        if (!is_power_of_two(a)) {
            return error("alignment %" PRIu32 " is not a nonzero power of two", a);
        }
        ctx.alignment = a;
    }
    return true;
}

bool Parser::read_tensor_info(gguf_context & ctx, uint64_t index) {
    TensorInfo info;
    std::memset(&info.t, 0, sizeof(info.t));

    std::string name;
    if (!read_string(&name, "a tensor name")) {
        return error("tensor %" PRIu64 ": bad name", index);
    }
    if (name.size() >= GGML_MAX_NAME) {
        return error("tensor %" PRIu64 ": name of %zu bytes is too long (at most %d)", index, name.size(),
                     GGML_MAX_NAME - 1);
    }
    if (name.find('\0') != std::string::npos) {
        return error("tensor %" PRIu64 ": the name contains a NUL byte", index);
    }
    if (!names_.insert(name).second) {
        return error("duplicate tensor name '%s' (tensor %" PRIu64 ")", name.c_str(), index);
    }
    std::memcpy(info.t.name, name.c_str(), name.size() + 1);
    const char * tname = info.t.name;

    uint32_t n_dims = 0;
    if (!read_u32(&n_dims, "a tensor's dimension count")) {
        return false;
    }
    if (n_dims > GGML_MAX_DIMS) {
        return error("tensor '%s' has %" PRIu32 " dimensions (at most %d)", tname, n_dims, GGML_MAX_DIMS);
    }
    // The element count is checked with empty dimensions counted as 1, so
    // that the strides of a tensor with zero elements cannot overflow either.
    int64_t span = 1;
    for (int j = 0; j < GGML_MAX_DIMS; ++j) {
        info.t.ne[j] = 1;
        if (uint32_t(j) >= n_dims) {
            continue;
        }
        uint64_t d = 0;
        if (!read_length(&d, "a tensor dimension")) {
            return false;
        }
        if (d > uint64_t(INT64_MAX)) {
            return error("tensor '%s': dimension %d is negative (%" PRId64 ")", tname, j, int64_t(d));
        }
        info.t.ne[j] = int64_t(d);
        if (__builtin_mul_overflow(span, d == 0 ? int64_t(1) : int64_t(d), &span)) {
            return error("tensor '%s': the number of elements overflows at dimension %d", tname, j);
        }
    }

    int32_t type = -1;
    if (!read_i32(&type, "a tensor type")) {
        return false;
    }
    if (type < 0 || type >= GGML_TYPE_COUNT) {
        return error("tensor '%s' has invalid ggml type %" PRId32, tname, type);
    }
    if (!loom::type_is_valid(type)) {
        return error("tensor '%s' has type %" PRId32 " (%s), which loom does not implement", tname, type,
                     ggml_type_label(type));
    }
    info.t.type = ggml_type(type);
    const loom::TypeInfo & ti = loom::type_info(info.t.type, "gguf reader");
    if (info.t.ne[0] % ti.blck_size != 0) {
        return error("tensor '%s': %" PRId64 " elements per row is not a multiple of the %s block size %" PRId64, tname,
                     info.t.ne[0], ti.name, ti.blck_size);
    }
    uint64_t span_bytes = 0;
    if (__builtin_mul_overflow(uint64_t(span / ti.blck_size), uint64_t(ti.type_size), &span_bytes) ||
        span_bytes > SIZE_MAX) {
        return error("tensor '%s': the size in bytes overflows", tname);
    }
    loom::gguf::set_contiguous_strides(info.t);

    if (!read_u64(&info.offset, "a tensor offset")) {
        return false;
    }
    ctx.tensors.push_back(info);
    return true;
}

// Tensors must follow one another in the data section, each at the offset of
// the previous one plus its size rounded up to the alignment (what every
// writer produces and ggml requires); this also makes them aligned and
// disjoint. Each must lie inside the file.
bool Parser::check_layout(gguf_context & ctx) {
    const uint64_t header_end = src_.position();
    uint64_t       data_offset = header_end;
    if (!ctx.tensors.empty() && !pad_to(header_end, ctx.alignment, &data_offset)) {
        return error("the data offset overflows");
    }
    if (data_offset > src_.size()) {
        return error("the data section would start at byte %" PRIu64 ", after the end of the file (%" PRIu64 " bytes)",
                     data_offset, src_.size());
    }
    ctx.data_offset          = size_t(data_offset);
    const uint64_t data_room = src_.size() - data_offset;

    uint64_t expected = 0;
    for (const TensorInfo & info : ctx.tensors) {
        if (info.offset != expected) {
            return error("tensor '%s' has offset %" PRIu64 ", expected %" PRIu64
                         " (tensors follow one another, each padded to the alignment %zu)",
                         info.t.name, info.offset, expected, ctx.alignment);
        }
        const uint64_t nbytes = loom::gguf::tensor_nbytes(info.t.type, info.t.ne);
        if (nbytes > data_room || info.offset > data_room - nbytes) {
            return error("tensor '%s': data [%" PRIu64 ", %" PRIu64 ") of the data section at byte %" PRIu64
                         " lies beyond the end of the file (%" PRIu64 " bytes)",
                         info.t.name, info.offset, info.offset + nbytes, data_offset, src_.size());
        }
        if (!pad_to(info.offset + nbytes, ctx.alignment, &expected)) {
            return error("tensor '%s': the data section size overflows", info.t.name);
        }
    }
    return true;
}

bool Parser::parse(gguf_context & ctx) {
    uint64_t n_tensors = 0;
    uint64_t n_kv      = 0;
    if (!read_header(&n_tensors, &n_kv)) {
        return false;
    }
    ctx.version = version_;
    for (uint64_t i = 0; i < n_kv; ++i) {
        if (!read_kv(ctx, i)) {
            return false;
        }
    }
    if (!read_alignment(ctx)) {
        return false;
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
        if (!read_tensor_info(ctx, i)) {
            return false;
        }
    }
    return check_layout(ctx);
}

bool Parser::make_tensors(const gguf_context & ctx, gguf_init_params params) {
    *params.ctx = nullptr;

    // The arena holds one object per tensor, plus the data blob unless
    // no_alloc. Every size here is bounded by the file size already checked.
    const uint64_t n_objects = ctx.tensors.size() + (params.no_alloc ? 0 : 1);
    const uint64_t blob_size = params.no_alloc ? 0 : ctx.data_size();
    const uint64_t per_object = ggml_tensor_overhead() + GGML_MEM_ALIGN;
    uint64_t       mem_size   = 0;
    if (__builtin_mul_overflow(n_objects, per_object, &mem_size) ||
        __builtin_add_overflow(mem_size, blob_size, &mem_size) || mem_size > SIZE_MAX / 2) {
        return error("the tensor context would be too large");
    }
    ggml_context * tctx = ggml_init({size_t(mem_size), nullptr, false});
    if (tctx == nullptr) {
        return error("cannot allocate %" PRIu64 " bytes for the tensors", mem_size);
    }

    char * blob = nullptr;
    if (!params.no_alloc) {
        ggml_tensor * t = ggml_new_tensor_1d(tctx, GGML_TYPE_I8, int64_t(blob_size));
        ggml_set_name(t, "GGUF tensor data binary blob");
        blob = static_cast<char *>(t->data);
        // The padding after the last tensor may be missing from the file.
        const uint64_t in_file = std::min(blob_size, src_.size() - ctx.data_offset);
        if (!src_.seek(ctx.data_offset) || !read_raw(blob, in_file, "the tensor data")) {
            ggml_free(tctx);
            return false;
        }
        std::memset(blob + in_file, 0, size_t(blob_size - in_file));
    }

    ggml_set_no_alloc(tctx, true);
    for (const TensorInfo & info : ctx.tensors) {
        ggml_tensor * t = ggml_new_tensor(tctx, info.t.type, GGML_MAX_DIMS, info.t.ne);
        ggml_set_name(t, info.t.name);
        if (blob != nullptr) {
            t->data = blob + info.offset;
        }
    }
    ggml_set_no_alloc(tctx, params.no_alloc);
    *params.ctx = tctx;
    return true;
}

gguf_context * load(Source & src, gguf_init_params params, const char * func, const char * origin) {
    if (params.ctx != nullptr) {
        *params.ctx = nullptr;
    }
    Parser parser(src, func, origin);
    // Allocation failures are data errors here (a file may describe more than
    // fits in memory), so they are reported, not propagated.
    try {
        auto ctx = std::make_unique<gguf_context>();
        if (!parser.parse(*ctx) || (params.ctx != nullptr && !parser.make_tensors(*ctx, params))) {
            return nullptr;
        }
        return ctx.release();
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("%s: %s: out of memory while reading the metadata\n", func, origin);
    } catch (const std::exception & e) {
        LOOM_LOG_ERROR("%s: %s: %s\n", func, origin, e.what());
    }
    return nullptr;
}

} // namespace

extern "C" {

gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params) {
    LOOM_REQUIRE(fname != nullptr, "fname is NULL");
    if (params.ctx != nullptr) {
        *params.ctx = nullptr;
    }
    std::string                                   why;
    std::unique_ptr<loom::gguf::FileSource> src = loom::gguf::FileSource::open(fname, &why);
    if (!src) {
        LOOM_LOG_ERROR("%s: cannot open '%s': %s\n", __func__, fname, why.c_str());
        return nullptr;
    }
    return load(*src, params, __func__, fname);
}

gguf_context * gguf_init_from_buffer(const void * data, size_t size, gguf_init_params params) {
    LOOM_REQUIRE(data != nullptr || size == 0, "data is NULL with size %zu", size);
    loom::gguf::MemorySource src(data, size);
    return load(src, params, __func__, "buffer");
}

namespace {

struct FilePtr {
    std::FILE * file;
    uint64_t    pos; // where the stream is, to seek only when the reader jumps
};

size_t read_file_ptr(void * userdata, void * output, uint64_t offset, size_t len) {
    auto & f = *static_cast<FilePtr *>(userdata);
    if (offset != f.pos) {
        if (offset > uint64_t(INT64_MAX) || fseeko(f.file, off_t(offset), SEEK_SET) != 0) {
            return 0;
        }
        f.pos = offset;
    }
    const size_t got = std::fread(output, 1, len, f.file);
    f.pos += got;
    return got;
}

} // namespace

gguf_context * gguf_init_from_file_ptr(FILE * file, gguf_init_params params) {
    LOOM_REQUIRE(file != nullptr, "file is NULL");
    if (params.ctx != nullptr) {
        *params.ctx = nullptr;
    }
    const off_t start = ftello(file);
    if (start < 0 || fseeko(file, 0, SEEK_END) != 0) {
        LOOM_LOG_ERROR("%s: the stream cannot seek: %s\n", __func__, std::strerror(errno));
        return nullptr;
    }
    const off_t end = ftello(file);
    if (end < start || fseeko(file, start, SEEK_SET) != 0) {
        LOOM_LOG_ERROR("%s: the stream cannot seek: %s\n", __func__, std::strerror(errno));
        return nullptr;
    }
    FilePtr                    f{file, uint64_t(start)};
    loom::gguf::CallbackSource src(read_file_ptr, &f, 0, uint64_t(end - start), uint64_t(start));
    return load(src, params, __func__, "stream");
}

gguf_context * gguf_init_from_callback(gguf_reader_callback_t callback, void * userdata, size_t max_chunk_read,
                                       uint64_t max_expected_size, gguf_init_params params) {
    LOOM_REQUIRE(callback != nullptr, "callback is NULL");
    loom::gguf::CallbackSource src(callback, userdata, max_chunk_read, max_expected_size);
    return load(src, params, __func__, "callback");
}

} // extern "C"
