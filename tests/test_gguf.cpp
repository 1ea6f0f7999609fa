// GGUF reading and writing: the stories260K model in versions 1 and 3, a
// round trip of every value type, memory-mapped weights, and one test per
// class of malformed file (each must give NULL and a log line naming the
// problem, never a crash).

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

namespace {

struct GgufDeleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;

std::string data_path(const std::string & name) {
    return std::string(LOOM_TEST_DATA) + "/" + name;
}

std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

std::string temp_path(const std::string & name) {
    return (std::filesystem::temp_directory_path() / ("loom_test_gguf_" + std::to_string(getpid()) + "_" + name))
        .string();
}

// Collects error log lines while alive, so tests can check what was reported.
class LogCapture {
public:
    LogCapture() {
        ggml_log_get(&prev_cb_, &prev_ud_);
        ggml_log_set(&LogCapture::callback, this);
    }
    ~LogCapture() { ggml_log_set(prev_cb_, prev_ud_); }
    const std::string & text() const { return text_; }
    void                clear() { text_.clear(); }

private:
    static void callback(ggml_log_level level, const char * text, void * ud) {
        auto * self = static_cast<LogCapture *>(ud);
        if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_CONT) {
            self->text_ += text;
        }
    }
    ggml_log_callback prev_cb_ = nullptr;
    void *            prev_ud_ = nullptr;
    std::string       text_;
};

GgufPtr load_file(const std::string & path, ggml_context ** ctx = nullptr, bool no_alloc = true) {
    return GgufPtr(gguf_init_from_file(path.c_str(), {no_alloc, ctx}));
}

GgufPtr load_buffer(const std::vector<uint8_t> & bytes, ggml_context ** ctx = nullptr, bool no_alloc = true) {
    return GgufPtr(gguf_init_from_buffer(bytes.data(), bytes.size(), {no_alloc, ctx}));
}

int64_t key(const gguf_context * ctx, const char * name) {
    const int64_t id = gguf_find_key(ctx, name);
    EXPECT_GE(id, 0) << name;
    return id;
}

// Whether two keys hold the same type and value.
bool same_value(const gguf_context * a, int64_t ia, const gguf_context * b, int64_t ib) {
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
std::vector<uint8_t> small_file(uint32_t version) {
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

// ---------------------------------------------------------------------------
// The stories260K model.

TEST(GgufModel, KnownValuesV3) {
    ggml_context * meta = nullptr;
    GgufPtr        g    = load_file(data_path("stories260k-f32.gguf"), &meta);
    ASSERT_TRUE(g);
    ggml_context_ptr meta_owner(meta);
    EXPECT_EQ(gguf_get_version(g.get()), 3u);
    EXPECT_EQ(gguf_get_n_tensors(g.get()), 48);
    EXPECT_EQ(gguf_get_n_kv(g.get()), 18);
    EXPECT_EQ(gguf_get_alignment(g.get()), 32u);
    EXPECT_EQ(gguf_get_data_offset(g.get()), 14144u);
    EXPECT_EQ(gguf_find_key(g.get(), GGUF_KEY_GENERAL_ALIGNMENT), -1);

    EXPECT_STREQ(gguf_get_val_str(g.get(), key(g.get(), "general.architecture")), "llama");
    EXPECT_STREQ(gguf_get_val_str(g.get(), key(g.get(), "general.name")), "tinyllamas-stories-260k");
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.embedding_length")), 64u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.block_count")), 5u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.attention.head_count")), 8u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.attention.head_count_kv")), 4u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.feed_forward_length")), 172u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.context_length")), 512u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "llama.rope.dimension_count")), 8u);
    EXPECT_FLOAT_EQ(gguf_get_val_f32(g.get(), key(g.get(), "llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "tokenizer.ggml.bos_token_id")), 1u);
    EXPECT_EQ(gguf_get_val_u32(g.get(), key(g.get(), "tokenizer.ggml.eos_token_id")), 2u);
    EXPECT_STREQ(gguf_get_val_str(g.get(), key(g.get(), "tokenizer.ggml.model")), "llama");

    const int64_t tokens = key(g.get(), "tokenizer.ggml.tokens");
    EXPECT_EQ(gguf_get_kv_type(g.get(), tokens), GGUF_TYPE_ARRAY);
    EXPECT_EQ(gguf_get_arr_type(g.get(), tokens), GGUF_TYPE_STRING);
    EXPECT_EQ(gguf_get_arr_n(g.get(), tokens), 512u);
    EXPECT_STREQ(gguf_get_arr_str(g.get(), tokens, 0), "<unk>");
    EXPECT_STREQ(gguf_get_arr_str(g.get(), tokens, 1), "<s>");
    EXPECT_STREQ(gguf_get_arr_str(g.get(), tokens, 2), "</s>");
    EXPECT_STREQ(gguf_get_arr_str(g.get(), tokens, 3), "<0x00>");
    const int64_t scores = key(g.get(), "tokenizer.ggml.scores");
    EXPECT_EQ(gguf_get_arr_type(g.get(), scores), GGUF_TYPE_FLOAT32);
    const int64_t types = key(g.get(), "tokenizer.ggml.token_type");
    EXPECT_EQ(gguf_get_arr_type(g.get(), types), GGUF_TYPE_INT32);
    const auto * tt = static_cast<const int32_t *>(gguf_get_arr_data(g.get(), types));
    EXPECT_EQ(tt[0], 2); // unknown
    EXPECT_EQ(tt[1], 3); // control
    EXPECT_EQ(tt[3], 6); // byte

    const int64_t embd = gguf_find_tensor(g.get(), "token_embd.weight");
    ASSERT_EQ(embd, 0);
    EXPECT_EQ(gguf_get_tensor_type(g.get(), embd), GGML_TYPE_F32);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), embd), 0u);
    EXPECT_EQ(gguf_get_tensor_size(g.get(), embd), 64u * 512u * 4u);
    EXPECT_EQ(gguf_get_tensor_ne(g.get(), embd)[0], 64);
    EXPECT_EQ(gguf_get_tensor_ne(g.get(), embd)[1], 512);
    EXPECT_EQ(gguf_get_tensor_ne(g.get(), embd)[2], 1);
    EXPECT_EQ(gguf_find_tensor(g.get(), "no.such.tensor"), -1);
    EXPECT_GE(gguf_find_tensor(g.get(), "output.weight"), 0);
    EXPECT_GE(gguf_find_tensor(g.get(), "blk.4.ffn_down.weight"), 0);

    size_t total = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
        EXPECT_EQ(gguf_get_tensor_offset(g.get(), i) % 32, 0u);
        total += GGML_PAD(gguf_get_tensor_size(g.get(), i), 32);
    }
    EXPECT_EQ(total, 1171200u);
    EXPECT_EQ(gguf_get_data_offset(g.get()) + total, 1185344u);

    // The metadata-only context: one tensor per file tensor, no data.
    ASSERT_NE(meta, nullptr);
    EXPECT_TRUE(ggml_get_no_alloc(meta));
    int n = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(meta); t; t = ggml_get_next_tensor(meta, t)) {
        EXPECT_EQ(t->data, nullptr);
        EXPECT_STREQ(t->name, gguf_get_tensor_name(g.get(), n));
        EXPECT_EQ(ggml_nbytes(t), gguf_get_tensor_size(g.get(), n));
        ++n;
    }
    EXPECT_EQ(n, 48);
    ggml_tensor * q = ggml_get_tensor(meta, "blk.0.attn_k.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->ne[0], 64);
    EXPECT_EQ(q->ne[1], 32);
}

TEST(GgufModel, VersionOneAndThreeAreIdentical) {
    ggml_context * c1 = nullptr;
    ggml_context * c3 = nullptr;
    GgufPtr        g1 = load_file(data_path("stories260k-f32-v1.gguf"), &c1, false);
    GgufPtr        g3 = load_file(data_path("stories260k-f32.gguf"), &c3, false);
    ASSERT_TRUE(g1);
    ASSERT_TRUE(g3);
    ggml_context_ptr o1(c1), o3(c3);
    EXPECT_EQ(gguf_get_version(g1.get()), 1u);
    EXPECT_EQ(gguf_get_data_offset(g1.get()), 11456u);

    ASSERT_EQ(gguf_get_n_kv(g1.get()), gguf_get_n_kv(g3.get()));
    for (int64_t i = 0; i < gguf_get_n_kv(g1.get()); ++i) {
        EXPECT_STREQ(gguf_get_key(g1.get(), i), gguf_get_key(g3.get(), i));
        EXPECT_TRUE(same_value(g1.get(), i, g3.get(), i)) << gguf_get_key(g1.get(), i);
    }

    ASSERT_EQ(gguf_get_n_tensors(g1.get()), gguf_get_n_tensors(g3.get()));
    const std::vector<uint8_t> file3 = read_bytes(data_path("stories260k-f32.gguf"));
    for (int64_t i = 0; i < gguf_get_n_tensors(g1.get()); ++i) {
        const char * name = gguf_get_tensor_name(g1.get(), i);
        EXPECT_STREQ(name, gguf_get_tensor_name(g3.get(), i));
        EXPECT_EQ(gguf_get_tensor_type(g1.get(), i), gguf_get_tensor_type(g3.get(), i));
        EXPECT_EQ(gguf_get_tensor_offset(g1.get(), i), gguf_get_tensor_offset(g3.get(), i));
        EXPECT_EQ(gguf_get_tensor_size(g1.get(), i), gguf_get_tensor_size(g3.get(), i));
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            EXPECT_EQ(gguf_get_tensor_ne(g1.get(), i)[d], gguf_get_tensor_ne(g3.get(), i)[d]);
        }
        ggml_tensor * t1 = ggml_get_tensor(c1, name);
        ggml_tensor * t3 = ggml_get_tensor(c3, name);
        ASSERT_TRUE(t1 && t3) << name;
        ASSERT_TRUE(t1->data && t3->data);
        const size_t nbytes = ggml_nbytes(t3);
        EXPECT_EQ(std::memcmp(t1->data, t3->data, nbytes), 0) << name;
        // And both equal the file's bytes at data offset + tensor offset.
        const size_t at = gguf_get_data_offset(g3.get()) + gguf_get_tensor_offset(g3.get(), i);
        ASSERT_LE(at + nbytes, file3.size());
        EXPECT_EQ(std::memcmp(t3->data, file3.data() + at, nbytes), 0) << name;
    }

    // With data, the context starts with the blob, then the tensors in order.
    EXPECT_FALSE(ggml_get_no_alloc(c3));
    ggml_tensor * blob = ggml_get_first_tensor(c3);
    ASSERT_NE(blob, nullptr);
    EXPECT_STREQ(blob->name, "GGUF tensor data binary blob");
    EXPECT_EQ(ggml_nbytes(blob), 1171200u);
    EXPECT_STREQ(ggml_get_next_tensor(c3, blob)->name, "token_embd.weight");
    EXPECT_EQ(ggml_get_next_tensor(c3, blob)->data, blob->data);

    // Finite weights, as a trained model has.
    const ggml_tensor * norm = ggml_get_tensor(c3, "output_norm.weight");
    ASSERT_NE(norm, nullptr);
    for (int64_t j = 0; j < ggml_nelements(norm); ++j) {
        EXPECT_TRUE(std::isfinite(static_cast<const float *>(norm->data)[j]));
    }
}

TEST(GgufModel, VocabularyOnlyFileHasNoDataSection) {
    ggml_context * c = nullptr;
    GgufPtr        g = load_file(data_path("tokenizer/ggml-vocab-llama-spm.gguf"), &c, false);
    ASSERT_TRUE(g);
    ggml_context_ptr owner(c);
    EXPECT_EQ(gguf_get_n_tensors(g.get()), 0);
    EXPECT_EQ(gguf_get_n_kv(g.get()), 22);
    // Unpadded: the file ends right after its metadata.
    EXPECT_EQ(gguf_get_data_offset(g.get()), 723869u);
    EXPECT_TRUE(gguf_get_val_bool(g.get(), key(g.get(), "tokenizer.ggml.add_bos_token")));
    EXPECT_FALSE(gguf_get_val_bool(g.get(), key(g.get(), "tokenizer.ggml.add_eos_token")));
    EXPECT_EQ(gguf_get_arr_n(g.get(), key(g.get(), "tokenizer.ggml.tokens")), 32000u);
}

// The weights used in place from a read-only mapping of the file, wrapped in
// a CPU buffer, equal the copy the reader makes.
TEST(GgufModel, MemoryMappedWeights) {
    const std::string path = data_path("stories260k-f32.gguf");
    ggml_context *    meta = nullptr;
    ggml_context *    full = nullptr;
    GgufPtr           g    = load_file(path, &meta, true);
    GgufPtr           gf   = load_file(path, &full, false);
    ASSERT_TRUE(g && gf);
    ggml_context_ptr meta_owner(meta), full_owner(full);

    const int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    void * map = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    ASSERT_NE(map, MAP_FAILED);

    {
        ggml_backend_buffer_ptr buf(ggml_backend_cpu_buffer_from_ptr(map, size_t(st.st_size)));
        ASSERT_TRUE(buf);
        ggml_backend_buffer_set_usage(buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
            ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(g.get(), i));
            ASSERT_NE(t, nullptr);
            char * addr = static_cast<char *>(map) + gguf_get_data_offset(g.get()) + gguf_get_tensor_offset(g.get(), i);
            ASSERT_EQ(ggml_backend_tensor_alloc(buf.get(), t, addr), GGML_STATUS_SUCCESS);
            EXPECT_EQ(t->buffer, buf.get());

            std::vector<uint8_t> got(ggml_nbytes(t));
            ggml_backend_tensor_get(t, got.data(), 0, got.size());
            const ggml_tensor * ref = ggml_get_tensor(full, t->name);
            ASSERT_NE(ref, nullptr);
            EXPECT_EQ(std::memcmp(got.data(), ref->data, got.size()), 0) << t->name;
        }
    }
    munmap(map, size_t(st.st_size));
}

// ---------------------------------------------------------------------------
// Writing.

TEST(GgufWrite, RoundTripOfEveryType) {
    GgufPtr g(gguf_init_empty());
    ASSERT_TRUE(g);
    EXPECT_EQ(gguf_get_version(g.get()), 3u);
    EXPECT_EQ(gguf_get_n_kv(g.get()), 0);
    EXPECT_EQ(gguf_get_n_tensors(g.get()), 0);
    EXPECT_EQ(gguf_get_alignment(g.get()), size_t(GGUF_DEFAULT_ALIGNMENT));

    gguf_set_val_u8(g.get(), "u8", 200);
    gguf_set_val_i8(g.get(), "i8", -100);
    gguf_set_val_u16(g.get(), "u16", 60000);
    gguf_set_val_i16(g.get(), "i16", -30000);
    gguf_set_val_u32(g.get(), "u32", 4000000000u);
    gguf_set_val_i32(g.get(), "i32", -2000000000);
    gguf_set_val_f32(g.get(), "f32", 3.25f);
    gguf_set_val_u64(g.get(), "u64", 0xfedcba9876543210ull);
    gguf_set_val_i64(g.get(), "i64", INT64_MIN + 7);
    gguf_set_val_f64(g.get(), "f64", -1.0 / 3.0);
    gguf_set_val_bool(g.get(), "bool", true);
    gguf_set_val_str(g.get(), "str", "h\xC3\xA9llo");
    gguf_set_val_str(g.get(), "empty_str", "");

    const uint8_t  au8[]  = {1, 2, 255};
    const int8_t   ai8[]  = {-1, 0, 1};
    const uint16_t au16[] = {1, 65535};
    const int16_t  ai16[] = {-32768, 32767};
    const uint32_t au32[] = {7, 8, 9, 10};
    const int32_t  ai32[] = {-7, 8};
    const float    af32[] = {0.5f, -0.0f, 1e30f};
    const bool     abool[] = {true, false, true};
    const uint64_t au64[] = {1, UINT64_MAX};
    const int64_t  ai64[] = {INT64_MIN, INT64_MAX};
    const double   af64[] = {1.5, -2.5};
    gguf_set_arr_data(g.get(), "a_u8", GGUF_TYPE_UINT8, au8, 3);
    gguf_set_arr_data(g.get(), "a_i8", GGUF_TYPE_INT8, ai8, 3);
    gguf_set_arr_data(g.get(), "a_u16", GGUF_TYPE_UINT16, au16, 2);
    gguf_set_arr_data(g.get(), "a_i16", GGUF_TYPE_INT16, ai16, 2);
    gguf_set_arr_data(g.get(), "a_u32", GGUF_TYPE_UINT32, au32, 4);
    gguf_set_arr_data(g.get(), "a_i32", GGUF_TYPE_INT32, ai32, 2);
    gguf_set_arr_data(g.get(), "a_f32", GGUF_TYPE_FLOAT32, af32, 3);
    gguf_set_arr_data(g.get(), "a_bool", GGUF_TYPE_BOOL, abool, 3);
    gguf_set_arr_data(g.get(), "a_u64", GGUF_TYPE_UINT64, au64, 2);
    gguf_set_arr_data(g.get(), "a_i64", GGUF_TYPE_INT64, ai64, 2);
    gguf_set_arr_data(g.get(), "a_f64", GGUF_TYPE_FLOAT64, af64, 2);
    gguf_set_arr_data(g.get(), "a_empty", GGUF_TYPE_UINT32, nullptr, 0);
    const char * strs[] = {"one", "", "th\xE2\x96\x81ree"};
    gguf_set_arr_str(g.get(), "a_str", strs, 3);
    gguf_set_arr_str(g.get(), "a_str_empty", nullptr, 0);

    // Tensors of several types with data from a context.
    ggml_context_ptr tctx(ggml_init({size_t(1) << 20, nullptr, false}));
    ggml_tensor *    f32 = ggml_new_tensor_2d(tctx.get(), GGML_TYPE_F32, 5, 3); // 60 bytes: padded
    ggml_tensor *    f16 = ggml_new_tensor_1d(tctx.get(), GGML_TYPE_F16, 7);
    ggml_tensor *    q8  = ggml_new_tensor_2d(tctx.get(), GGML_TYPE_Q8_0, 64, 2);
    ggml_tensor *    i32 = ggml_new_tensor_3d(tctx.get(), GGML_TYPE_I32, 2, 3, 4);
    ggml_set_name(f32, "w.f32");
    ggml_set_name(f16, "w.f16");
    ggml_set_name(q8, "w.q8_0");
    ggml_set_name(i32, "w.i32");
    for (ggml_tensor * t : {f32, f16, q8, i32}) {
        auto * p = static_cast<uint8_t *>(t->data);
        for (size_t j = 0; j < ggml_nbytes(t); ++j) {
            p[j] = uint8_t(j * 31 + t->name[2]);
        }
        gguf_add_tensor(g.get(), t);
    }
    EXPECT_EQ(gguf_get_n_tensors(g.get()), 4);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 0), 0u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 1), 64u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), 96u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 3), 256u); // two rows of two 34-byte blocks, padded
    EXPECT_EQ(gguf_get_tensor_size(g.get(), 2), 136u);

    const std::string path = temp_path("roundtrip.gguf");
    ASSERT_TRUE(gguf_write_to_file(g.get(), path.c_str(), false));

    ggml_context * rctx = nullptr;
    GgufPtr        r    = load_file(path, &rctx, false);
    ASSERT_TRUE(r);
    ggml_context_ptr rowner(rctx);
    EXPECT_EQ(gguf_get_version(r.get()), 3u);
    ASSERT_EQ(gguf_get_n_kv(r.get()), gguf_get_n_kv(g.get()));
    for (int64_t i = 0; i < gguf_get_n_kv(g.get()); ++i) {
        EXPECT_STREQ(gguf_get_key(r.get(), i), gguf_get_key(g.get(), i));
        EXPECT_TRUE(same_value(r.get(), i, g.get(), i)) << gguf_get_key(g.get(), i);
    }
    const gguf_context * rc = r.get();
    EXPECT_EQ(gguf_get_val_u8(rc, key(rc, "u8")), 200);
    EXPECT_EQ(gguf_get_val_i8(rc, key(rc, "i8")), -100);
    EXPECT_EQ(gguf_get_val_u16(rc, key(rc, "u16")), 60000);
    EXPECT_EQ(gguf_get_val_i16(rc, key(rc, "i16")), -30000);
    EXPECT_EQ(gguf_get_val_u32(rc, key(rc, "u32")), 4000000000u);
    EXPECT_EQ(gguf_get_val_i32(rc, key(rc, "i32")), -2000000000);
    EXPECT_EQ(gguf_get_val_f32(rc, key(rc, "f32")), 3.25f);
    EXPECT_EQ(gguf_get_val_u64(rc, key(rc, "u64")), 0xfedcba9876543210ull);
    EXPECT_EQ(gguf_get_val_i64(rc, key(rc, "i64")), INT64_MIN + 7);
    EXPECT_EQ(gguf_get_val_f64(rc, key(rc, "f64")), -1.0 / 3.0);
    EXPECT_TRUE(gguf_get_val_bool(rc, key(rc, "bool")));
    EXPECT_STREQ(gguf_get_val_str(rc, key(rc, "str")), "h\xC3\xA9llo");
    EXPECT_STREQ(gguf_get_val_str(rc, key(rc, "empty_str")), "");
    EXPECT_EQ(gguf_get_kv_type(rc, key(rc, "a_bool")), GGUF_TYPE_ARRAY);
    EXPECT_EQ(gguf_get_arr_type(rc, key(rc, "a_bool")), GGUF_TYPE_BOOL);
    EXPECT_EQ(std::memcmp(gguf_get_arr_data(rc, key(rc, "a_bool")), abool, 3), 0);
    EXPECT_EQ(std::memcmp(gguf_get_arr_data(rc, key(rc, "a_f64")), af64, sizeof(af64)), 0);
    EXPECT_EQ(std::memcmp(gguf_get_arr_data(rc, key(rc, "a_i64")), ai64, sizeof(ai64)), 0);
    EXPECT_EQ(gguf_get_arr_n(rc, key(rc, "a_empty")), 0u);
    EXPECT_EQ(gguf_get_arr_n(rc, key(rc, "a_str")), 3u);
    EXPECT_STREQ(gguf_get_arr_str(rc, key(rc, "a_str"), 1), "");
    EXPECT_STREQ(gguf_get_arr_str(rc, key(rc, "a_str"), 2), "th\xE2\x96\x81ree");
    EXPECT_EQ(gguf_get_arr_n(rc, key(rc, "a_str_empty")), 0u);
    EXPECT_EQ(gguf_get_arr_n(rc, key(rc, "u32")), 1u);

    ASSERT_EQ(gguf_get_n_tensors(rc), 4);
    for (int64_t i = 0; i < 4; ++i) {
        EXPECT_STREQ(gguf_get_tensor_name(rc, i), gguf_get_tensor_name(g.get(), i));
        EXPECT_EQ(gguf_get_tensor_type(rc, i), gguf_get_tensor_type(g.get(), i));
        EXPECT_EQ(gguf_get_tensor_offset(rc, i), gguf_get_tensor_offset(g.get(), i));
        EXPECT_EQ(gguf_get_tensor_size(rc, i), gguf_get_tensor_size(g.get(), i));
        const ggml_tensor * src = ggml_get_tensor(tctx.get(), gguf_get_tensor_name(rc, i));
        const ggml_tensor * dst = ggml_get_tensor(rctx, gguf_get_tensor_name(rc, i));
        ASSERT_TRUE(src && dst);
        EXPECT_TRUE(ggml_are_same_shape(src, dst));
        EXPECT_EQ(std::memcmp(src->data, dst->data, ggml_nbytes(src)), 0) << src->name;
    }

    // The metadata the context reports is the start of the file written.
    const std::vector<uint8_t> file = read_bytes(path);
    const size_t               meta = gguf_get_meta_size(g.get());
    EXPECT_EQ(meta, gguf_get_data_offset(rc));
    std::vector<uint8_t> bytes(meta);
    gguf_get_meta_data(g.get(), bytes.data());
    ASSERT_LE(meta, file.size());
    EXPECT_EQ(std::memcmp(bytes.data(), file.data(), meta), 0);
    // Every tensor is followed by its padding, the last one too.
    EXPECT_EQ(file.size(), meta + gguf_get_tensor_offset(g.get(), 3) + GGML_PAD(gguf_get_tensor_size(g.get(), 3), 32));
    std::remove(path.c_str());
}

// Metadata first, tensor data appended by the caller, as the header describes.
TEST(GgufWrite, MetadataOnlyThenAppendedData) {
    GgufPtr          g(gguf_init_empty());
    ggml_context_ptr tctx(ggml_init({ggml_tensor_overhead() * 2, nullptr, true}));
    ggml_tensor *    a = ggml_new_tensor_1d(tctx.get(), GGML_TYPE_F32, 3);
    ggml_tensor *    b = ggml_new_tensor_1d(tctx.get(), GGML_TYPE_F32, 8);
    ggml_set_name(a, "a");
    ggml_set_name(b, "b");
    gguf_add_tensor(g.get(), a); // no data: only the metadata can be written
    gguf_add_tensor(g.get(), b);
    gguf_set_val_str(g.get(), "general.name", "appended");

    const std::string path = temp_path("meta_only.gguf");
    ASSERT_TRUE(gguf_write_to_file(g.get(), path.c_str(), true));
    std::vector<uint8_t> file = read_bytes(path);
    EXPECT_EQ(file.size(), gguf_get_meta_size(g.get()));
    const float da[3] = {1, 2, 3};
    const float db[8] = {4, 5, 6, 7, 8, 9, 10, 11};
    file.insert(file.end(), reinterpret_cast<const uint8_t *>(da), reinterpret_cast<const uint8_t *>(da) + 12);
    file.resize(file.size() + 20, 0);
    file.insert(file.end(), reinterpret_cast<const uint8_t *>(db), reinterpret_cast<const uint8_t *>(db) + 32);
    write_bytes(path, file);

    ggml_context * rctx = nullptr;
    GgufPtr        r    = load_file(path, &rctx, false);
    ASSERT_TRUE(r);
    ggml_context_ptr owner(rctx);
    EXPECT_EQ(std::memcmp(ggml_get_tensor(rctx, "a")->data, da, 12), 0);
    EXPECT_EQ(std::memcmp(ggml_get_tensor(rctx, "b")->data, db, 32), 0);

    // gguf_set_tensor_data supplies data for a full write.
    gguf_set_tensor_data(g.get(), "a", da);
    gguf_set_tensor_data(g.get(), "b", db);
    ASSERT_TRUE(gguf_write_to_file(g.get(), path.c_str(), false));
    EXPECT_EQ(read_bytes(path), file);
    std::remove(path.c_str());
}

TEST(GgufWrite, SetReplaceRemoveAndCopyKeys) {
    GgufPtr g(gguf_init_empty());
    gguf_set_val_u32(g.get(), "a", 1);
    gguf_set_val_u32(g.get(), "b", 2);
    gguf_set_val_str(g.get(), "a", "now a string"); // replaces, moves to the end
    ASSERT_EQ(gguf_get_n_kv(g.get()), 2);
    EXPECT_STREQ(gguf_get_key(g.get(), 0), "b");
    EXPECT_STREQ(gguf_get_key(g.get(), 1), "a");
    EXPECT_EQ(gguf_get_kv_type(g.get(), 1), GGUF_TYPE_STRING);
    EXPECT_EQ(gguf_remove_key(g.get(), "b"), 0);
    EXPECT_EQ(gguf_remove_key(g.get(), "b"), -1);
    EXPECT_EQ(gguf_get_n_kv(g.get()), 1);

    GgufPtr src(gguf_init_from_file(data_path("stories260k-f32.gguf").c_str(), {true, nullptr}));
    ASSERT_TRUE(src);
    gguf_set_kv(g.get(), src.get());
    EXPECT_EQ(gguf_get_n_kv(g.get()), 19);
    for (int64_t i = 0; i < gguf_get_n_kv(src.get()); ++i) {
        const int64_t j = gguf_find_key(g.get(), gguf_get_key(src.get(), i));
        ASSERT_GE(j, 0);
        EXPECT_TRUE(same_value(g.get(), j, src.get(), i)) << gguf_get_key(src.get(), i);
    }
    gguf_set_kv(g.get(), g.get()); // copying onto itself keeps everything
    EXPECT_EQ(gguf_get_n_kv(g.get()), 19);
    EXPECT_EQ(gguf_get_arr_n(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.tokens")), 512u);
}

TEST(GgufWrite, AlignmentAndTypeChangesRelayoutTensors) {
    GgufPtr          g(gguf_init_empty());
    ggml_context_ptr tctx(ggml_init({ggml_tensor_overhead() * 3, nullptr, true}));
    const char *     names[] = {"x", "y", "z"};
    for (const char * n : names) {
        ggml_tensor * t = ggml_new_tensor_1d(tctx.get(), GGML_TYPE_F32, 64); // 256 bytes
        ggml_set_name(t, n);
        gguf_add_tensor(g.get(), t);
    }
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), 512u);
    gguf_set_tensor_type(g.get(), "x", GGML_TYPE_Q8_0); // 2 blocks of 34 bytes = 68, padded to 96
    EXPECT_EQ(gguf_get_tensor_size(g.get(), 0), 68u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 1), 96u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), 352u);
    gguf_set_val_u32(g.get(), GGUF_KEY_GENERAL_ALIGNMENT, 128);
    EXPECT_EQ(gguf_get_alignment(g.get()), 128u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 1), 128u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), 384u);
    EXPECT_EQ(gguf_get_meta_size(g.get()) % 128, 0u);

    const std::string path = temp_path("align.gguf");
    ASSERT_TRUE(gguf_write_to_file(g.get(), path.c_str(), true));
    std::vector<uint8_t> file = read_bytes(path);
    file.resize(file.size() + 384 + 256, 0);
    write_bytes(path, file);
    GgufPtr r = load_file(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(gguf_get_alignment(r.get()), 128u);
    EXPECT_EQ(gguf_get_data_offset(r.get()) % 128, 0u);
    EXPECT_EQ(gguf_get_tensor_offset(r.get(), 2), 384u);
    EXPECT_EQ(gguf_get_tensor_type(r.get(), 0), GGML_TYPE_Q8_0);
    std::remove(path.c_str());

    EXPECT_EQ(gguf_remove_key(g.get(), GGUF_KEY_GENERAL_ALIGNMENT), 0);
    EXPECT_EQ(gguf_get_alignment(g.get()), 32u);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), 352u);

    // The padding a large alignment asks for is counted, not built in memory.
    gguf_set_val_u32(g.get(), GGUF_KEY_GENERAL_ALIGNMENT, 1u << 31);
    EXPECT_EQ(gguf_get_meta_size(g.get()), size_t(1) << 31);
    EXPECT_EQ(gguf_get_tensor_offset(g.get(), 2), size_t(1) << 32);
}

TEST(GgufWrite, UnwritablePathFailsCleanly) {
    GgufPtr    g(gguf_init_empty());
    LogCapture log;
    EXPECT_FALSE(gguf_write_to_file(g.get(), "/nonexistent-dir/x.gguf", false));
    EXPECT_NE(log.text().find("cannot open"), std::string::npos) << log.text();
}

TEST(GgufApiDeathTest, PreconditionsAbort) {
    GgufPtr g(gguf_init_empty());
    gguf_set_val_str(g.get(), "s", "text");
    EXPECT_DEATH(gguf_get_val_u32(g.get(), 0), "gguf_get_val_u32.*'s'");
    EXPECT_DEATH(gguf_get_key(g.get(), 5), "gguf_get_key.*out of range");
    EXPECT_DEATH(gguf_get_arr_data(g.get(), 0), "gguf_get_arr_data");
    EXPECT_DEATH(gguf_set_val_u64(g.get(), GGUF_KEY_GENERAL_ALIGNMENT, 32), "must be a u32");
    EXPECT_DEATH(gguf_set_val_u32(g.get(), GGUF_KEY_GENERAL_ALIGNMENT, 24), "power of two");
    ggml_context_ptr tctx(ggml_init({ggml_tensor_overhead(), nullptr, true}));
    ggml_tensor *    t = ggml_new_tensor_1d(tctx.get(), GGML_TYPE_F32, 4);
    ggml_set_name(t, "t");
    gguf_add_tensor(g.get(), t);
    EXPECT_DEATH(gguf_add_tensor(g.get(), t), "duplicate tensor name 't'");
    EXPECT_DEATH(gguf_write_to_file(g.get(), "/dev/null", false), "'t' has no data");
}

// ---------------------------------------------------------------------------
// Malformed input.

TEST(GgufMalformed, SmallValidFilesLoad) {
    for (uint32_t version : {1u, 2u, 3u}) {
        const std::vector<uint8_t> bytes = small_file(version);
        ggml_context *             c     = nullptr;
        GgufPtr                    g     = load_buffer(bytes, &c, false);
        ASSERT_TRUE(g) << "version " << version;
        ggml_context_ptr owner(c);
        EXPECT_EQ(gguf_get_version(g.get()), version);
        EXPECT_EQ(gguf_get_n_kv(g.get()), 5);
        EXPECT_TRUE(gguf_get_val_bool(g.get(), key(g.get(), "flag")));
        EXPECT_STREQ(gguf_get_arr_str(g.get(), key(g.get(), "tokens"), 1), "\xE2\x96\x81hi");
        EXPECT_EQ(static_cast<const float *>(gguf_get_arr_data(g.get(), key(g.get(), "scores")))[2], 2.0f);
        EXPECT_EQ(gguf_get_data_offset(g.get()) + 64, bytes.size());
        EXPECT_EQ(static_cast<const float *>(ggml_get_tensor(c, "a")->data)[7], 7.25f);
        EXPECT_EQ(static_cast<const int32_t *>(ggml_get_tensor(c, "b")->data)[5], -5);
    }
}

// Every proper prefix of a valid file is rejected, in every reading mode.
TEST(GgufMalformed, TruncationAtEveryByte) {
    LogCapture log;
    for (uint32_t version : {1u, 3u}) {
        const std::vector<uint8_t> full = small_file(version);
        for (size_t n = 0; n < full.size(); ++n) {
            const std::vector<uint8_t> part(full.begin(), full.begin() + std::ptrdiff_t(n));
            log.clear();
            EXPECT_FALSE(load_buffer(part)) << "v" << version << " prefix " << n;
            EXPECT_FALSE(log.text().empty()) << "v" << version << " prefix " << n;
            ggml_context * c = reinterpret_cast<ggml_context *>(1);
            EXPECT_FALSE(load_buffer(part, &c, false)) << "v" << version << " prefix " << n;
            EXPECT_EQ(c, nullptr);
        }
    }
}

// Truncated copies of the real model, read from files, cut in the header, in
// the tensor infos, in the data section and just before its end.
TEST(GgufMalformed, TruncatedModelFiles) {
    const std::vector<uint8_t> full = read_bytes(data_path("stories260k-f32.gguf"));
    const std::string          path = temp_path("truncated.gguf");
    LogCapture                 log;
    for (size_t n : {size_t(3), size_t(23), size_t(5000), size_t(14000), size_t(14144), size_t(600000),
                     full.size() - 1}) {
        write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + std::ptrdiff_t(n)));
        log.clear();
        ggml_context * c = nullptr;
        EXPECT_FALSE(load_file(path, &c, false)) << n;
        EXPECT_EQ(c, nullptr);
        EXPECT_FALSE(log.text().empty()) << n;
    }
    std::remove(path.c_str());
}

TEST(GgufMalformed, UnreadableFiles) {
    LogCapture log;
    EXPECT_FALSE(load_file("/nonexistent/model.gguf"));
    EXPECT_NE(log.text().find("cannot open"), std::string::npos);
    log.clear();
    EXPECT_FALSE(load_file(std::filesystem::temp_directory_path().string()));
    EXPECT_NE(log.text().find("not a regular file"), std::string::npos) << log.text();
}

// A broken file and the words the error log must contain.
struct BadCase {
    const char *                         name;
    std::function<std::vector<uint8_t>()> make;
    const char *                         expect;
};

std::vector<uint8_t> one_tensor(std::vector<uint64_t> ne, int32_t type, uint64_t offset, size_t data = 64,
                                const std::string & name = "t") {
    Builder b;
    b.header(1, 0).tensor(name, std::move(ne), type, offset).pad().zeros(data);
    return b.bytes();
}

class GgufBadFile : public ::testing::TestWithParam<BadCase> {};

TEST_P(GgufBadFile, RejectedWithMessage) {
    const BadCase &            c     = GetParam();
    const std::vector<uint8_t> bytes = c.make();
    LogCapture                 log;
    ggml_context *             tctx = nullptr;
    EXPECT_FALSE(load_buffer(bytes));
    EXPECT_NE(log.text().find(c.expect), std::string::npos) << "log: " << log.text();
    EXPECT_FALSE(load_buffer(bytes, &tctx, false));
    EXPECT_EQ(tctx, nullptr);
}

const BadCase kBadCases[] = {
    {"bad_magic", [] { return Builder().raw("GGUX", 4).u32(3).u64(0).u64(0).bytes(); }, "bad magic"},
    {"version_0", [] { return Builder(0).header(0, 0).bytes(); }, "unsupported version 0"},
    {"version_4", [] { return Builder(4).header(0, 0).bytes(); }, "unsupported version 4"},
    {"big_endian", [] { return Builder().raw("GGUF", 4).u32(0x03000000).u64(0).u64(0).bytes(); }, "big-endian"},
    {"huge_tensor_count", [] { return Builder().header(uint64_t(1) << 62, 0).bytes(); }, "claims"},
    {"negative_tensor_count", [] { return Builder().header(uint64_t(-1), 0).bytes(); }, "claims"},
    {"huge_kv_count", [] { return Builder().header(0, uint64_t(1) << 61).zeros(100).bytes(); }, "claims"},
    {"huge_kv_count_v1", [] { return Builder(1).header(0, 0xffffffffu).zeros(100).bytes(); }, "claims"},
    {"huge_key_length",
     [] { return Builder().header(0, 1).u64(uint64_t(1) << 63).zeros(32).bytes(); },
     "exceeds"},
    {"empty_key", [] { return Builder().header(0, 1).kv_u32("", 1).bytes(); }, "empty key"},
    {"nul_in_key", [] { return Builder().header(0, 1).kv_u32(std::string("a\0b", 3), 1).bytes(); }, "NUL"},
    {"duplicate_key", [] { return Builder().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes(); }, "duplicate key 'k'"},
    {"bad_value_type", [] { return Builder().header(0, 1).str("k").i32(13).u32(0).bytes(); }, "invalid type 13"},
    {"negative_value_type", [] { return Builder().header(0, 1).str("k").i32(-1).u32(0).bytes(); }, "invalid type -1"},
    {"array_of_arrays",
     [] { return Builder().header(0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_ARRAY).u64(0).bytes(); },
     "arrays of arrays"},
    {"bad_array_type",
     [] { return Builder().header(0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(99).u64(0).bytes(); },
     "invalid type 99"},
    {"huge_array",
     [] {
         return Builder().header(0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_UINT64).u64(uint64_t(1) << 61)
             .zeros(64).bytes();
     },
     "elements of type u64"},
    {"huge_string_array",
     [] {
         return Builder().header(0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING).u64(uint64_t(1) << 60)
             .zeros(64).bytes();
     },
     "strings cannot fit"},
    {"huge_string_in_array",
     [] {
         return Builder().header(0, 1).str("k").i32(GGUF_TYPE_ARRAY).i32(GGUF_TYPE_STRING).u64(1).u64(1000).zeros(8)
             .bytes();
     },
     "exceeds"},
    {"alignment_zero",
     [] { return Builder().header(0, 1).kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, 0).bytes(); },
     "not a nonzero power of two"},
    {"alignment_not_power_of_two",
     [] { return Builder().header(0, 1).kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, 48).bytes(); },
     "alignment 48"},
    {"alignment_wrong_type",
     [] { return Builder().header(0, 1).str(GGUF_KEY_GENERAL_ALIGNMENT).i32(GGUF_TYPE_UINT64).u64(32).bytes(); },
     "must be a u32"},
    {"too_many_dims", [] { return one_tensor({1, 1, 1, 1, 1}, GGML_TYPE_F32, 0); }, "has 5 dimensions"},
    {"dims_overflow",
     [] { return one_tensor({uint64_t(1) << 32, uint64_t(1) << 32, 4}, GGML_TYPE_F32, 0); },
     "overflows"},
    {"bytes_overflow", [] { return one_tensor({uint64_t(1) << 61, 2}, GGML_TYPE_F32, 0); }, "size in bytes overflows"},
    {"negative_dim", [] { return one_tensor({uint64_t(-4)}, GGML_TYPE_F32, 0); }, "negative"},
    {"invalid_ggml_type", [] { return one_tensor({4}, 43, 0); }, "invalid ggml type 43"},
    {"negative_ggml_type", [] { return one_tensor({4}, -2, 0); }, "invalid ggml type -2"},
    {"unsupported_ggml_type", [] { return one_tensor({256}, 12, 0, 256, "blk.0.ffn_up.weight"); },
     "tensor 'blk.0.ffn_up.weight' has type 12 (q4_K), which loom does not implement"},
    {"partial_block", [] { return one_tensor({33}, GGML_TYPE_Q8_0, 0); }, "not a multiple"},
    {"misaligned_offset", [] { return one_tensor({4}, GGML_TYPE_F32, 4); }, "has offset 4, expected 0"},
    {"offset_out_of_file", [] { return one_tensor({16}, GGML_TYPE_F32, 0, 32); }, "beyond the end of the file"},
    {"huge_offset", [] { return one_tensor({4}, GGML_TYPE_F32, uint64_t(1) << 63); }, "expected 0"},
    {"data_beyond_file",
     [] {
         Builder b;
         b.header(2, 0).tensor("a", {8}, GGML_TYPE_F32, 0).tensor("b", {1024}, GGML_TYPE_F32, 32).pad().zeros(64);
         return b.bytes();
     },
     "tensor 'b'"},
    {"offsets_out_of_order",
     [] {
         Builder b;
         b.header(2, 0).tensor("a", {8}, GGML_TYPE_F32, 32).tensor("b", {8}, GGML_TYPE_F32, 0).pad().zeros(64);
         return b.bytes();
     },
     "tensor 'a' has offset 32, expected 0"},
    {"overlapping_tensors",
     [] {
         Builder b;
         b.header(2, 0).tensor("a", {16}, GGML_TYPE_F32, 0).tensor("b", {8}, GGML_TYPE_F32, 32).pad().zeros(96);
         return b.bytes();
     },
     "tensor 'b' has offset 32, expected 64"},
    {"duplicate_tensor",
     [] {
         Builder b;
         b.header(2, 0).tensor("w", {8}, GGML_TYPE_F32, 0).tensor("w", {8}, GGML_TYPE_F32, 32).pad().zeros(64);
         return b.bytes();
     },
     "duplicate tensor name 'w'"},
    {"long_tensor_name", [] { return one_tensor({4}, GGML_TYPE_F32, 0, 64, std::string(64, 'n')); }, "too long"},
    {"nul_in_tensor_name",
     [] { return one_tensor({4}, GGML_TYPE_F32, 0, 64, std::string("a\0b", 3)); },
     "NUL"},
    {"data_section_past_end",
     [] {
         Builder b;
         b.header(1, 1).kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, 1u << 30).tensor("t", {0}, GGML_TYPE_F32, 0);
         return b.bytes();
     },
     "after the end of the file"},
};

INSTANTIATE_TEST_SUITE_P(Cases, GgufBadFile, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase> & p) { return std::string(p.param.name); });

// Zero-sized tensors and zero counts are valid.
TEST(GgufMalformed, EmptyThingsAreValid) {
    EXPECT_TRUE(load_buffer(Builder().header(0, 0).bytes()));
    Builder b;
    b.header(2, 0).tensor("e", {0, 5}, GGML_TYPE_F32, 0).tensor("f", {4}, GGML_TYPE_F32, 0).pad().zeros(16);
    ggml_context * c = nullptr;
    GgufPtr        g = load_buffer(b.bytes(), &c, false);
    ASSERT_TRUE(g);
    ggml_context_ptr owner(c);
    EXPECT_EQ(gguf_get_tensor_size(g.get(), 0), 0u);
    EXPECT_EQ(ggml_nelements(ggml_get_tensor(c, "e")), 0);
}

// The fuzzing corpus never crashes the reader: the generated seeds named v*
// load, those named bad_* (one defect each) are rejected with a message, and
// the mutations the fuzzer kept (named by hash) give either; what loads is
// self-consistent.
TEST(GgufMalformed, FuzzCorpus) {
    const std::filesystem::path dir(LOOM_FUZZ_CORPUS);
    ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
    LogCapture log; // keeps the expected errors out of the test output
    int        n = 0, loaded = 0;
    for (const auto & entry : std::filesystem::directory_iterator(dir)) {
        const std::string          name  = entry.path().filename().string();
        const std::vector<uint8_t> bytes = read_bytes(entry.path().string());
        for (bool no_alloc : {true, false}) {
            log.clear();
            ggml_context * c = nullptr;
            GgufPtr        g = load_buffer(bytes, &c, no_alloc);
            ggml_context_ptr owner(c);
            if (name.rfind("bad_", 0) == 0) {
                EXPECT_FALSE(g) << name;
                EXPECT_FALSE(log.text().empty()) << name;
            } else if (name[0] == 'v') {
                EXPECT_TRUE(g) << name << ": " << log.text();
            }
            if (!g) {
                EXPECT_EQ(c, nullptr);
                continue;
            }
            loaded += no_alloc;
            for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
                EXPECT_LE(gguf_get_data_offset(g.get()) + gguf_get_tensor_offset(g.get(), i) +
                              gguf_get_tensor_size(g.get(), i),
                          bytes.size());
            }
        }
        ++n;
    }
    EXPECT_GT(n, 10);
    EXPECT_GT(loaded, 0);
}

} // namespace
