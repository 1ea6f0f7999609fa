// The RPC backend's content cache against servers started in the process on
// loopback: uploads kept by content, probes of a range's samples and size, the
// cache's budget and reuse of memory, and a server without a cache by default.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "backends/rpc/content_cache.h"
#include "backends/rpc/protocol.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-rpc.h"
#include "log_capture.h"
#include "rpc_client_fixture.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;
using namespace loomtest::rpc_client;

namespace {

constexpr int64_t k_big = 3 << 18; // 3 MiB of F32: above the client's hash threshold

// A 1-D F32 tensor of k_big values in a buffer of backend.
struct BigTensor {
    ggml_tensor *           t = nullptr;
    ggml_backend_buffer_ptr buf;
};
BigTensor big_tensor(ggml_context * ctx, ggml_backend_t backend) {
    BigTensor b;
    b.t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, k_big);
    b.buf.reset(ggml_backend_alloc_ctx_tensors(ctx, backend));
    return b;
}

// v set into t through its backend, then read back whole.
void set_and_read_back(ggml_tensor * t, const std::vector<float> & v) {
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    std::vector<float> got(v.size());
    ggml_backend_tensor_get(t, got.data(), 0, ggml_nbytes(t));
    EXPECT_EQ(got, v);
}

// What the server answers about a range's content: by probe, by full key,
// and the keeping of an upload.
struct HashAnswer {
    bool probe_known = false, found = false, stored = false;
};
HashAnswer ask_server(RawClient & c, uint64_t buffer, const std::vector<float> & v) {
    const size_t                    n = v.size() * sizeof(float);
    loom::rpc::SetTensorHashRequest req;
    describe_f32(req.mutable_tensor(), buffer, 0, int64_t(v.size()));
    req.set_size(n);
    HashAnswer                    a;
    loom::rpc::SetTensorHashReply rep;
    const loom::rpc::Sha256       probe = loom::rpc::content_probe(v.data(), n);
    req.set_probe(probe.data(), probe.size());
    EXPECT_TRUE(c.stub().SetTensorHash(c.ctx().get(), req, &rep).ok());
    a.probe_known = rep.probe_known();
    EXPECT_FALSE(rep.found()); // a probe writes nothing
    const loom::rpc::Sha256 key = loom::rpc::content_key(v.data(), n);
    req.set_sha256(key.data(), key.size());
    EXPECT_TRUE(c.stub().SetTensorHash(c.ctx().get(), req, &rep).ok());
    a.found = rep.found();
    return a;
}

TEST_F(Rpc, LargeUploadIsCachedByContent) {
    const auto dir = std::filesystem::temp_directory_path() / ("loom-rpc-cache-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        TestServer       server(kToken, dir.c_str());
        ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
        ASSERT_NE(backend, nullptr);
        auto                     ctx = context();
        const int64_t            n   = k_big;
        const BigTensor          big = big_tensor(ctx.get(), backend.get());
        ggml_tensor *            a   = big.t;
        const std::vector<float> v   = iota_values(size_t(n), 0.5f);
        set_and_read_back(a, v);

        // Another client asks for the same content by hash and gets it without sending it.
        RawClient other(server.endpoint());
        ASSERT_TRUE(other.connect().ok());
        const uint64_t h = other.alloc(ggml_nbytes(a));
        ASSERT_NE(h, 0u);
        loom::rpc::SetTensorHashRequest req;
        describe_f32(req.mutable_tensor(), h, 0, n);
        req.set_size(ggml_nbytes(a));
        const loom::rpc::Sha256 md = loom::rpc::content_key(v.data(), ggml_nbytes(a));
        req.set_sha256(md.data(), md.size());
        loom::rpc::SetTensorHashReply rep;
        ASSERT_TRUE(other.stub().SetTensorHash(other.ctx().get(), req, &rep).ok());
        EXPECT_TRUE(rep.found());
        loom::rpc::GetTensorRequest greq;
        describe_f32(greq.mutable_tensor(), h, 0, n);
        greq.set_offset(4000);
        greq.set_size(400);
        loom::rpc::GetTensorReply grep;
        ASSERT_TRUE(other.stub().GetTensor(other.ctx().get(), greq, &grep).ok());
        ASSERT_EQ(grep.data().size(), 400u);
        EXPECT_EQ(std::memcmp(grep.data().data(), v.data() + 1000, 400), 0);
    }
    // The content was also written to the cache folder, named by its hash,
    // with an empty file named by its probe.
    size_t files = 0, probes = 0;
    for (const auto & e : std::filesystem::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        files += name.size() == 64 ? 1 : 0;
        probes += name.size() == 70 && name.ends_with(".probe") ? 1 : 0;
    }
    EXPECT_EQ(files, 1u);
    EXPECT_EQ(probes, 1u);
    {
        // A new server on the folder knows the content from the files.
        TestServer server(kToken, dir.c_str());
        RawClient  c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        const std::vector<float> v = iota_values(size_t(k_big), 0.5f);
        const uint64_t           h = c.alloc(v.size() * sizeof(float));
        ASSERT_NE(h, 0u);
        const HashAnswer ans = ask_server(c, h, v);
        EXPECT_TRUE(ans.probe_known);
        EXPECT_TRUE(ans.found);
    }
    std::filesystem::remove_all(dir);
}

TEST(RpcContent, ProbeSamplesTheContentAndItsSize) {
    std::vector<uint8_t> a(size_t(5) << 20);
    for (size_t i = 0; i < a.size(); ++i) {
        a[i] = uint8_t(i * 7 + (i >> 9));
    }
    const loom::rpc::Sha256 pa = loom::rpc::content_probe(a.data(), a.size());
    std::vector<uint8_t>    b  = a;
    EXPECT_EQ(loom::rpc::content_probe(b.data(), b.size()), pa);
    // The first and the last byte are sampled, and the size counts.
    b.front() ^= 1;
    EXPECT_NE(loom::rpc::content_probe(b.data(), b.size()), pa);
    b = a;
    b.back() ^= 1;
    EXPECT_NE(loom::rpc::content_probe(b.data(), b.size()), pa);
    EXPECT_NE(loom::rpc::content_probe(a.data(), a.size() - 1), pa);
    // A byte between the samples is not: the probe is no key, content_key tells them apart.
    b = a;
    b[size_t(1) << 20] ^= 1;
    EXPECT_EQ(loom::rpc::content_probe(b.data(), b.size()), pa);
    EXPECT_NE(loom::rpc::content_key(b.data(), b.size()), loom::rpc::content_key(a.data(), a.size()));
    // Small content is hashed whole.
    std::vector<uint8_t> s(1000, 5), t = s;
    t[500] = 6;
    EXPECT_NE(loom::rpc::content_probe(s.data(), s.size()), loom::rpc::content_probe(t.data(), t.size()));
}

std::shared_ptr<loom::rpc::Blob> filled(loom::rpc::ContentCache & c, size_t n, uint8_t seed) {
    std::shared_ptr<loom::rpc::Blob> b = c.take(n);
    for (size_t i = 0; i < n; ++i) {
        b->data()[i] = uint8_t(seed + i * 13 + (i >> 10));
    }
    return b;
}

// The cache in memory: keys computed when first asked for (with or without
// the probe), equal content kept once, the budget kept by pushing out the
// least recently used, whose memory serves the next entry of its size.
TEST(RpcContent, CacheKeysLazilyKeepsItsBudgetAndReusesMemory) {
    const size_t           n = size_t(1) << 20;
    loom::rpc::ContentCache c("", 3 * n);
    EXPECT_TRUE(c.enabled());
    EXPECT_FALSE(loom::rpc::ContentCache("", 0).enabled());
    auto a = filled(c, n, 1), b = filled(c, n, 2);
    const auto key_a = loom::rpc::content_key(a->data(), n), key_b = loom::rpc::content_key(b->data(), n);
    const auto probe_a = loom::rpc::content_probe(a->data(), n), probe_b = loom::rpc::content_probe(b->data(), n);
    c.put(a);
    c.put(b);
    EXPECT_TRUE(c.may_hold(probe_a));
    EXPECT_TRUE(c.may_hold(probe_b));
    EXPECT_EQ(c.find(key_a, n + 1, nullptr), nullptr); // another size
    auto got = c.find(key_a, n, &probe_a);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::memcmp(got->data(), a->data(), n), 0);
    got = c.find(key_b, n, nullptr);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got.get(), b.get());
    // The same content again is not kept twice: a third entry fits.
    c.put(filled(c, n, 2));
    auto d = filled(c, n, 4);
    const auto key_d = loom::rpc::content_key(d->data(), n);
    c.put(d);
    EXPECT_NE(c.find(key_a, n, nullptr), nullptr); // a is now the most recent
    got.reset();
    // A fourth pushes out the least recent (b); no one holds b's memory
    // but the test, so it is not reused until the test lets it go.
    const uint8_t * b_memory = b->data();
    b.reset();
    auto e = c.take(n);
    EXPECT_EQ(e->data(), b_memory);
    EXPECT_EQ(c.find(key_b, n, nullptr), nullptr);
    EXPECT_FALSE(c.may_hold(probe_b));
    EXPECT_NE(c.find(key_d, n, nullptr), nullptr);
    // Content above the budget is not kept.
    auto big = filled(c, 4 * n, 9);
    const auto key_big = loom::rpc::content_key(big->data(), big->size());
    c.put(big);
    EXPECT_EQ(c.find(key_big, 4 * n, nullptr), nullptr);
}

// Content of no bytes is not kept (found by fuzz_rpc: two stores of an
// empty range compared their null data with memcmp, undefined behaviour
// that UBSan reports), and asking for it finds nothing.
TEST(RpcContent, EmptyContentIsNotKept) {
    loom::rpc::ContentCache c("", size_t(1) << 20);
    EXPECT_FALSE(c.keeps(0));
    EXPECT_TRUE(c.keeps(1));
    for (int i = 0; i < 2; ++i) {
        c.put(c.take(0));
    }
    const auto key = loom::rpc::content_key(nullptr, 0);
    EXPECT_EQ(c.find(key, 0, nullptr), nullptr);
    EXPECT_FALSE(c.may_hold(loom::rpc::content_probe(nullptr, 0)));
}

// Without -c or a memory budget the server keeps nothing and says so: the
// client then sends uploads without hashing them.
TEST_F(Rpc, ContentCacheIsOffUnlessConfigured) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    auto                     ctx = context();
    const int64_t            n   = k_big;
    const BigTensor          big = big_tensor(ctx.get(), backend.get());
    ggml_tensor *            a   = big.t;
    const std::vector<float> v   = iota_values(size_t(n), 0.75f);
    set_and_read_back(a, v);

    RawClient other(server.endpoint());
    ASSERT_TRUE(other.connect().ok());
    EXPECT_FALSE(other.content_cache());
    const uint64_t h = other.alloc(ggml_nbytes(a));
    ASSERT_NE(h, 0u);
    const HashAnswer ans = ask_server(other, h, v);
    EXPECT_FALSE(ans.probe_known);
    EXPECT_FALSE(ans.found);
    // Asked to keep an upload, it keeps nothing.
    loom::rpc::SetTensorHashRequest req;
    describe_f32(req.mutable_tensor(), h, 0, n);
    req.set_size(ggml_nbytes(a));
    req.set_store(true);
    loom::rpc::SetTensorHashReply rep;
    ASSERT_TRUE(other.stub().SetTensorHash(other.ctx().get(), req, &rep).ok());
    EXPECT_FALSE(rep.found());
}

// With a memory budget: a probe is known once another client uploaded the
// content, the full key then fills the range; other content stays unknown;
// a probe of the wrong length is refused.
TEST_F(Rpc, ContentCacheAnswersProbesOfWhatItHolds) {
    TestServer       server(kToken, nullptr, size_t(64) << 20);
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    auto                     ctx = context();
    const int64_t            n   = k_big;
    const BigTensor          big = big_tensor(ctx.get(), backend.get());
    ggml_tensor *            a   = big.t;
    const std::vector<float> v   = iota_values(size_t(n), 1.25f);

    RawClient other(server.endpoint());
    ASSERT_TRUE(other.connect().ok());
    EXPECT_TRUE(other.content_cache());
    const uint64_t h = other.alloc(ggml_nbytes(a));
    ASSERT_NE(h, 0u);
    HashAnswer ans = ask_server(other, h, v);
    EXPECT_FALSE(ans.probe_known);
    EXPECT_FALSE(ans.found);

    set_and_read_back(a, v); // read back after the server kept it

    ans = ask_server(other, h, v);
    EXPECT_TRUE(ans.probe_known);
    EXPECT_TRUE(ans.found);
    loom::rpc::GetTensorRequest greq;
    describe_f32(greq.mutable_tensor(), h, 0, n);
    greq.set_offset(ggml_nbytes(a) - 400);
    greq.set_size(400);
    loom::rpc::GetTensorReply grep;
    ASSERT_TRUE(other.stub().GetTensor(other.ctx().get(), greq, &grep).ok());
    ASSERT_EQ(grep.data().size(), 400u);
    EXPECT_EQ(std::memcmp(grep.data().data(), v.data() + (v.size() - 100), 400), 0);

    std::vector<float> w = v;
    w.back() += 1.0f;
    ans = ask_server(other, h, w);
    EXPECT_FALSE(ans.probe_known);
    EXPECT_FALSE(ans.found);

    loom::rpc::SetTensorHashRequest bad;
    describe_f32(bad.mutable_tensor(), h, 0, n);
    bad.set_size(ggml_nbytes(a));
    bad.set_probe(std::string(31, '\1'));
    loom::rpc::SetTensorHashReply rep;
    const grpc::Status st = other.stub().SetTensorHash(other.ctx().get(), bad, &rep);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("probe"), std::string::npos) << st.error_message();
}

} // namespace
