// The CPU backend family: host buffer types, the device, the reg and the
// backend (a stream that computes graphs on a persistent thread pool).

#include <algorithm>
#include <sys/mman.h>
#include <cstdlib>
#include <cstring>
#include <string>
#include <memory>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "backend/backend_impl.h"
#include "compute.h"
#include "threadpool_api.h"
#include "core/common.h"
#include "features.h"
#include "ggml-cpu.h"
#include "repack.h"
#include "simd/kernel_table.h"

using namespace loom;
using namespace loom::cpu;

namespace {

// Tensor offsets inside CPU buffers are aligned to 32 bytes, ggml's TENSOR_ALIGNMENT: ggml
// clients rely on that value (llama.cpp maps a GGUF file whose data section starts at a multiple
// of 32 only when this alignment divides it). Buffers themselves start on a cache line.
constexpr size_t k_alignment      = 32;
constexpr size_t k_base_alignment = 64;


// Memory the buffer owns, from aligned_alloc.
class CpuBuffer final : public HostBuffer {
  public:
    CpuBuffer(ggml_backend_buffer_type * type, void * data, size_t size) : HostBuffer(type, data, size) {}
    ~CpuBuffer() override { std::free(data_); }
};

// Caller-owned memory wrapped as a buffer; never freed here.
class CpuMappedBuffer final : public HostBuffer {
  public:
    using HostBuffer::HostBuffer;
};

class CpuBufferType final : public ggml_backend_buffer_type {
  public:
    explicit CpuBufferType(ggml_backend_device * dev) : ggml_backend_buffer_type(dev) {}

    const char * name() const override { return "CPU"; }
    size_t       alignment() const override { return k_alignment; }
    bool         is_host() const override { return true; }

    ggml_backend_buffer * alloc_buffer(size_t size) override {
        void * data = host_alloc(size);
        if (size > 0 && data == nullptr) {
            LOOM_LOG_ERROR("CPU: failed to allocate a buffer of %zu bytes\n", size);
            return nullptr;
        }
        auto * buf = new (std::nothrow) CpuBuffer(this, data, size);
        if (buf == nullptr) {
            std::free(data);
        }
        return buf;
    }
};

class CpuMappedBufferType final : public ggml_backend_buffer_type {
  public:
    explicit CpuMappedBufferType(ggml_backend_device * dev) : ggml_backend_buffer_type(dev) {}

    const char * name() const override { return "CPU_Mapped"; }
    size_t       alignment() const override { return k_alignment; }
    bool         is_host() const override { return true; }
    ggml_backend_buffer * alloc_buffer(size_t size) override {
        (void) size;
        LOOM_LOG_ERROR("CPU_Mapped: buffers of this type wrap existing memory; use ggml_backend_cpu_buffer_from_ptr\n");
        return nullptr;
    }
};

ggml_guid g_cpu_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x63, 0x70, 0x75,
                        0x9b, 0x1e, 0x42, 0x07, 0xa4, 0x5d, 0x31, 0xc8};

class CpuBackend final : public ggml_backend {
  public:
    explicit CpuBackend(ggml_backend_device * dev) : ggml_backend(&g_cpu_guid, dev) {
        const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
        n_threads_   = std::min(GGML_DEFAULT_N_THREADS, hw);
    }

    const char * name() const override { return "CPU"; }

    void set_n_threads(int n) {
        LOOM_REQUIRE(n > 0 && n <= GGML_MAX_N_THREADS, "n_threads = %d out of range (1..%d)", n, GGML_MAX_N_THREADS);
        n_threads_ = n;
    }
    void set_threadpool(ggml_threadpool * tp) {
        if (threadpool_ != nullptr && threadpool_ != tp) {
            ggml_threadpool_pause(threadpool_); // as ggml: the pool left behind stops spinning
        }
        threadpool_ = tp;
    }
    void set_abort_callback(ggml_abort_callback cb, void * data) {
        abort_cb_   = cb;
        abort_data_ = data;
    }
    void set_use_ref(bool use_ref) { use_ref_ = use_ref; }

    struct Plan {
        ggml_cgraph *        graph;
        int                  n_threads;
        std::vector<uint8_t> work;
    };

    ggml_backend_graph_plan_t graph_plan_create(ggml_cgraph * graph) override {
        auto * plan = new Plan{graph, n_threads_, {}};
        plan->work.resize(graph_work_size(graph, n_threads_));
        return plan;
    }
    void graph_plan_free(ggml_backend_graph_plan_t plan) override { delete static_cast<Plan *>(plan); }
    ggml_status graph_plan_compute(ggml_backend_graph_plan_t p) override {
        auto * plan = static_cast<Plan *>(p);
        return run(plan->graph, plan->n_threads, plan->work.data(), plan->work.size());
    }

    ggml_status graph_compute(ggml_cgraph * graph) override {
        const size_t need = graph_work_size(graph, n_threads_);
        if (work_.size() < need) {
            work_.resize(need);
        }
        return run(graph, n_threads_, work_.data(), work_.size());
    }

  private:
    ggml_status run(ggml_cgraph * graph, int n_threads, uint8_t * wdata, size_t wsize) {
        GraphRun r;
        r.graph      = graph;
        r.n_threads  = n_threads;
        r.wdata      = wdata;
        r.wsize      = wsize;
        r.abort_cb   = abort_cb_;
        r.abort_data = abort_data_;
        r.use_ref    = use_ref_;
        if (threadpool_ != nullptr) {
            // The work buffer was sized for n_threads; fewer threads need no more.
            return compute_graph_on(*threadpool_, r);
        }
        if (!pool_ || pool_->size() < n_threads) {
            pool_.reset(); // join the old workers before starting new ones
            pool_ = std::make_unique<ThreadPool>(n_threads);
        }
        return compute_graph(*pool_, r);
    }

    int                         n_threads_;
    ggml_abort_callback         abort_cb_   = nullptr;
    void *                      abort_data_ = nullptr;
    bool                        use_ref_    = false; // the portable kernels only
    std::vector<uint8_t>        work_;
    std::unique_ptr<ThreadPool> pool_;
    ggml_threadpool *           threadpool_ = nullptr; // the user's, when set
};

class CpuDevice final : public ggml_backend_device {
  public:
    explicit CpuDevice(ggml_backend_reg * reg)
        : ggml_backend_device(reg), buft_(this), mapped_buft_(this), repack_buft_(make_repack_buffer_type(this)) {}

    const char *          name() const override { return "CPU"; }
    const char *          description() const override { return features().brand.c_str(); }
    void                  memory(size_t * free, size_t * total) const override { host_memory(free, total); }
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_CPU; }
    ggml_backend_dev_caps caps() const override {
        ggml_backend_dev_caps c{};
        c.async                = false;
        c.host_buffer          = false;
        c.buffer_from_host_ptr = true;
        c.events               = false;
        c.mmap_support         = true;
        return c;
    }

    ggml_backend * init_backend(const char * params) override {
        (void) params;
        return new (std::nothrow) CpuBackend(this);
    }
    ggml_backend_buffer_type * buffer_type() override { return &buft_; }

    ggml_backend_buffer * buffer_from_host_ptr(void * ptr, size_t size, size_t max_tensor_size) override {
        (void) max_tensor_size;
        LOOM_REQUIRE(ptr != nullptr || size == 0, "NULL pointer for a buffer of %zu bytes", size);
        LOOM_REQUIRE(reinterpret_cast<uintptr_t>(ptr) % alignof(std::max_align_t) == 0,
                     "pointer %p is not aligned to %zu bytes", ptr, alignof(std::max_align_t));
        return new (std::nothrow) CpuMappedBuffer(&mapped_buft_, ptr, size);
    }

    // Whether the kernels compute op; where its operands live is the
    // business of supports_buft (the scheduler copies operands from buffers
    // the CPU cannot read), and compute checks it.
    bool supports_op(const ggml_tensor * op) const override { return loom::cpu::supports_op(op); }
    bool supports_buft(const ggml_backend_buffer_type * buft) const override {
        return buft->is_host() || buft == repack_buft_.get();
    }

    ggml_backend_buffer_type * repack_buffer_type() { return repack_buft_.get(); }

    // The extra buffer types, NULL-terminated: CPU_REPACK where the kernels
    // have the repacked layout (Note [Repacked weights]).
    ggml_backend_buffer_type ** extra_buffer_types() {
        if (extra_[0] == nullptr && !repacked_type_names().empty()) {
            extra_[0] = repack_buft_.get();
        }
        return extra_;
    }

  private:
    CpuBufferType                             buft_;
    CpuMappedBufferType                       mapped_buft_;
    std::unique_ptr<ggml_backend_buffer_type> repack_buft_;
    ggml_backend_buffer_type *                extra_[2] = {nullptr, nullptr};
};


class CpuReg final : public ggml_backend_reg {
  public:
    CpuReg() : device_(this) {}

    const char *          name() const override { return "CPU"; }
    size_t                device_count() const override { return 1; }
    ggml_backend_device * device(size_t index) override {
        (void) index;
        return &device_;
    }
    // ggml's names for the CPU family's functions: clients such as llama.cpp look them up here
    // instead of linking them.
    void * proc_address(const char * fn) override {
        static const std::pair<const char *, void *> table[] = {
            {"ggml_backend_set_n_threads", reinterpret_cast<void *>(&ggml_backend_cpu_set_n_threads)},
            {"ggml_backend_set_abort_callback", reinterpret_cast<void *>(&ggml_backend_cpu_set_abort_callback)},
            {"ggml_backend_get_features", reinterpret_cast<void *>(&get_features)},
            {"ggml_backend_dev_get_extra_bufts", reinterpret_cast<void *>(&get_extra_bufts)},
            {"ggml_backend_cpu_numa_init", reinterpret_cast<void *>(&ggml_numa_init)},
            {"ggml_backend_cpu_is_numa", reinterpret_cast<void *>(&ggml_is_numa)},
            {"ggml_backend_cpu_set_use_ref", reinterpret_cast<void *>(&ggml_backend_cpu_set_use_ref)},
            {"ggml_threadpool_new", reinterpret_cast<void *>(&ggml_threadpool_new)},
            {"ggml_threadpool_free", reinterpret_cast<void *>(&ggml_threadpool_free)},
            {"ggml_backend_cpu_set_threadpool", reinterpret_cast<void *>(&ggml_backend_cpu_set_threadpool)},
        };
        for (const auto & [name, address] : table) {
            if (std::strcmp(fn, name) == 0) {
                return address;
            }
        }
        return nullptr;
    }

  private:
    static ggml_backend_buffer_type_t * get_extra_bufts(ggml_backend_dev_t dev) {
        LOOM_REQUIRE(dev == cpu_device(), "ggml_backend_dev_get_extra_bufts: %s is not the CPU device",
                     dev != nullptr ? dev->name() : "NULL");
        return static_cast<CpuDevice *>(dev)->extra_buffer_types();
    }
    static ggml_backend_dev_t cpu_device();

    static ggml_backend_feature * get_features(ggml_backend_reg_t) {
        static std::vector<ggml_backend_feature> list = [] {
            std::vector<ggml_backend_feature> v;
            const Features &                  f = features();
            if (f.sse3) v.push_back({"SSE3", "1"});
            if (f.avx) v.push_back({"AVX", "1"});
            if (f.avx2) v.push_back({"AVX2", "1"});
            if (f.fma) v.push_back({"FMA", "1"});
            if (f.f16c) v.push_back({"F16C", "1"});
            if (f.avx512f) v.push_back({"AVX512", "1"});
            if (f.avx512vnni) v.push_back({"AVX512_VNNI", "1"});
            if (f.avx512vbmi) v.push_back({"AVX512_VBMI", "1"});
            if (f.avx512bf16) v.push_back({"AVX512_BF16", "1"});
            // 64-bit Arm's, named as ggml's CPU reg names them.
            if (f.neon) v.push_back({"NEON", "1"});
            if (f.neon) v.push_back({"ARM_FMA", "1"});
            if (f.fp16_va) v.push_back({"FP16_VA", "1"});
            if (f.dotprod) v.push_back({"DOTPROD", "1"});
            if (f.i8mm) v.push_back({"MATMUL_INT8", "1"});
            if (f.sve) v.push_back({"SVE", "1"});
            if (f.sme) v.push_back({"SME", "1"});
            // The kernel table in use (LOOM_CPU_KERNELS may choose a lesser
            // one) multiplies quantized data with 8-bit integer dot products;
            // the BLAS backend's placement reads it.
            if (best_kernels().int8_dot_products) v.push_back({"INT8_DOT_PRODUCTS", "1"});
            // The name of the kernel table in use: "portable", "avx2",
            // "avx512" or "avx512_bf16" (the best this processor runs, or the
            // one LOOM_CPU_KERNELS chose among those).
            v.push_back({"KERNELS", best_kernels().name});
            // The weight types the CPU_REPACK buffer repacks for this table,
            // as ggml_type_name writes them, comma-separated: clients put
            // only those in it (a matrix it keeps in ggml's layout is better
            // left mapped).
            static const std::string repacks = repacked_type_names();
            if (!repacks.empty()) v.push_back({"REPACK_TYPES", repacks.c_str()});
            v.push_back({nullptr, nullptr});
            return v;
        }();
        return list.data();
    }

    CpuDevice device_;
};

CpuReg & cpu_reg() {
    static CpuReg reg;
    return reg;
}

ggml_backend_dev_t CpuReg::cpu_device() {
    return cpu_reg().device(0);
}

CpuBackend * as_cpu(ggml_backend_t backend, const char * caller) {
    LOOM_REQUIRE(ggml_backend_is_cpu(backend), "called from %s with backend %s, which is not the CPU backend", caller,
                 ggml_backend_name(backend));
    return static_cast<CpuBackend *>(backend);
}

} // namespace

void * loom::cpu::host_alloc(size_t size) {
    constexpr size_t huge_page = size_t(2) << 20;
    if (size >= huge_page) {
        // Large buffers (weights, KV caches) on 2 MiB pages where the system
        // allows it: streaming reads of weights then cross no 4 KiB page
        // boundaries, where hardware prefetchers stop and TLB misses pile up
        // (token generation got 20-40 % faster).
        void * data = std::aligned_alloc(huge_page, align_up(size, huge_page));
        if (data != nullptr) {
            ::madvise(data, align_up(size, huge_page), MADV_HUGEPAGE);
        }
        return data;
    }
    return size > 0 ? std::aligned_alloc(k_base_alignment, align_up(size, k_base_alignment)) : nullptr;
}

ggml_backend_buffer_type_t loom::cpu::repack_buffer_type() {
    return static_cast<CpuDevice *>(cpu_reg().device(0))->repack_buffer_type();
}

extern "C" {

ggml_backend_reg_t ggml_backend_cpu_reg(void) {
    return &cpu_reg();
}

ggml_backend_t ggml_backend_cpu_init(void) {
    return cpu_reg().device(0)->init_backend(nullptr);
}

bool ggml_backend_is_cpu(ggml_backend_t backend) {
    return backend != nullptr && ggml_guid_matches(backend->guid, &g_cpu_guid);
}

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads) {
    as_cpu(backend_cpu, __func__)->set_n_threads(n_threads);
}

void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool) {
    as_cpu(backend_cpu, __func__)->set_threadpool(threadpool);
}

void ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback,
                                         void * abort_callback_data) {
    as_cpu(backend_cpu, __func__)->set_abort_callback(abort_callback, abort_callback_data);
}

void ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref) {
    as_cpu(backend_cpu, __func__)->set_use_ref(use_ref);
}

ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void) {
    return cpu_reg().device(0)->buffer_type();
}

ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    return cpu_reg().device(0)->buffer_from_host_ptr(ptr, size, size);
}

} // extern "C"
