// GGUF files that are not valid: one test per class of malformed file (each
// must give NULL and a log line naming the problem, never a crash),
// truncation at every byte, and the fuzz corpus.

#include "gguf_test_util.h"

using namespace gguftest;

namespace {


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
    LogCapture log(true);
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
    LogCapture                 log(true);
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
    LogCapture log(true);
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

// Two F32 tensors: a of na values at offset oa, then b of nb at ob, and data
// bytes of zeros after the padded header.
std::vector<uint8_t> two_tensors(const std::string & a, uint64_t na, uint64_t oa, const std::string & b_name,
                                 uint64_t nb, uint64_t ob, size_t data) {
    Builder b;
    b.header(2, 0).tensor(a, {na}, GGML_TYPE_F32, oa).tensor(b_name, {nb}, GGML_TYPE_F32, ob).pad().zeros(data);
    return b.bytes();
}

class GgufBadFile : public ::testing::TestWithParam<BadCase> {};

TEST_P(GgufBadFile, RejectedWithMessage) {
    const BadCase &            c     = GetParam();
    const std::vector<uint8_t> bytes = c.make();
    LogCapture                 log(true);
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
    {"unsupported_ggml_type", [] { return one_tensor({256}, 32, 0, 256, "blk.0.ffn_up.weight"); },
     "tensor 'blk.0.ffn_up.weight' has type 32 (TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking), "
     "which loom does not implement"},
    {"partial_block", [] { return one_tensor({33}, GGML_TYPE_Q8_0, 0); }, "not a multiple"},
    {"misaligned_offset", [] { return one_tensor({4}, GGML_TYPE_F32, 4); }, "has offset 4, expected 0"},
    {"offset_out_of_file", [] { return one_tensor({16}, GGML_TYPE_F32, 0, 32); }, "beyond the end of the file"},
    {"huge_offset", [] { return one_tensor({4}, GGML_TYPE_F32, uint64_t(1) << 63); }, "expected 0"},
    {"data_beyond_file", [] { return two_tensors("a", 8, 0, "b", 1024, 32, 64); }, "tensor 'b'"},
    {"offsets_out_of_order", [] { return two_tensors("a", 8, 32, "b", 8, 0, 64); },
     "tensor 'a' has offset 32, expected 0"},
    {"overlapping_tensors", [] { return two_tensors("a", 16, 0, "b", 8, 32, 96); },
     "tensor 'b' has offset 32, expected 64"},
    {"duplicate_tensor", [] { return two_tensors("w", 8, 0, "w", 8, 32, 64); }, "duplicate tensor name 'w'"},
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
    LogCapture log(true); // keeps the expected errors out of the test output
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
