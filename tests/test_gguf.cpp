// GGUF reading and writing: the stories260K model in versions 1 and 3, a
// round trip of every value type, and memory-mapped weights. Malformed files
// are in test_gguf_malformed.cpp.

#include "gguf_test_util.h"

using namespace gguftest;

namespace {

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

// Streams and callbacks: a file written into an open stream after other
// bytes, read back from that position, and through a callback that hands out
// a few bytes a call; a callback whose data ends early gives NULL.
TEST(GgufStreams, FilePointerAndCallback) {
    GgufPtr          g(gguf_init_empty());
    ggml_context_ptr tctx(ggml_init({size_t(1) << 16, nullptr, false}));
    ggml_tensor *    a = ggml_new_tensor_2d(tctx.get(), GGML_TYPE_F32, 5, 3);
    ggml_set_name(a, "a");
    for (int i = 0; i < 15; ++i) static_cast<float *>(a->data)[i] = float(i) * 0.5f - 2.0f;
    gguf_add_tensor(g.get(), a);
    gguf_set_val_str(g.get(), "general.name", "streams");

    const std::string path = temp_path("stream.gguf");
    std::FILE *       f    = std::fopen(path.c_str(), "w+b");
    ASSERT_NE(f, nullptr);
    const char prefix[13] = "not gguf yet";
    ASSERT_EQ(std::fwrite(prefix, 1, sizeof(prefix), f), sizeof(prefix));
    ASSERT_TRUE(gguf_write_to_file_ptr(g.get(), f, false));
    ASSERT_EQ(std::fseek(f, long(sizeof(prefix)), SEEK_SET), 0);
    ggml_context * rctx = nullptr;
    GgufPtr        r(gguf_init_from_file_ptr(f, {false, &rctx}));
    std::fclose(f);
    ASSERT_TRUE(r);
    ggml_context_ptr owner(rctx);
    EXPECT_EQ(std::memcmp(ggml_get_tensor(rctx, "a")->data, a->data, ggml_nbytes(a)), 0);
    EXPECT_STREQ(gguf_get_val_str(r.get(), key(r.get(), "general.name")), "streams");

    std::vector<uint8_t> bytes = read_bytes(path);
    bytes.erase(bytes.begin(), bytes.begin() + sizeof(prefix));
    struct Mem {
        const std::vector<uint8_t> * bytes;
        size_t                       largest = 0;
    } mem{&bytes};
    auto cb = [](void * ud, void * out, uint64_t offset, size_t len) -> size_t {
        auto & m  = *static_cast<Mem *>(ud);
        m.largest = std::max(m.largest, len);
        if (offset >= m.bytes->size()) return 0;
        const size_t n = std::min(len, size_t(m.bytes->size() - offset));
        std::memcpy(out, m.bytes->data() + offset, n);
        return n;
    };
    ggml_context * cctx = nullptr;
    GgufPtr        c(gguf_init_from_callback(cb, &mem, 7, bytes.size(), {false, &cctx}));
    ASSERT_TRUE(c);
    ggml_context_ptr cowner(cctx);
    EXPECT_EQ(std::memcmp(ggml_get_tensor(cctx, "a")->data, a->data, ggml_nbytes(a)), 0);
    EXPECT_LE(mem.largest, size_t(7));

    LogCapture log(true);
    EXPECT_FALSE(GgufPtr(gguf_init_from_callback(cb, &mem, 0, bytes.size() - 8, {false, nullptr})));
    std::remove(path.c_str());
}

TEST(GgufWrite, UnwritablePathFailsCleanly) {
    GgufPtr    g(gguf_init_empty());
    LogCapture log(true);
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

} // namespace
