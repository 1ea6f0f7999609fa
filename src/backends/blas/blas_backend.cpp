// The BLAS backend family: a device of host memory that computes matrix
// products through CBLAS and nothing else, beside the CPU backend.

#include <cstring>
#include <new>
#include <string>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "ggml-blas.h"
#include "ggml-cpu.h"
#include "policy.h"
#include "products.h"

#include <cblas.h>

using namespace loom;
using namespace loom::blas;

namespace {

ggml_guid g_blas_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x62, 0x6c, 0x61,
                         0x73, 0xd2, 0x08, 0x5e, 0x97, 0x3c, 0xb1, 0x46};

bool is_noop(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE || loom::is_view_op(t->op);
}

class BlasBackend final : public ggml_backend {
  public:
    explicit BlasBackend(ggml_backend_device * dev) : ggml_backend(&g_blas_guid, dev) {}

    const char * name() const override { return "BLAS"; }

    void set_n_threads(int n) {
        LOOM_REQUIRE(n > 0 && n <= GGML_MAX_N_THREADS, "n_threads = %d out of range (1..%d)", n, GGML_MAX_N_THREADS);
        workspace_.set_n_threads(n);
    }

    // The scheduler hands this backend only the products its device took
    // (and views); another op here is a graph the backend was never offered.
    ggml_status graph_compute(ggml_cgraph * graph) override {
        set_library_threads(workspace_.n_threads());
        for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
            ggml_tensor * node = ggml_graph_node(graph, i);
            if (is_noop(node) || !(node->flags & GGML_TENSOR_FLAG_COMPUTE)) {
                continue;
            }
            if (!can_compute(node)) {
                LOOM_LOG_ERROR("BLAS: cannot compute node %s (%s); only matrix products with F32 activations "
                               "and unit-stride operands\n",
                               describe(node).text, ggml_op_desc(node));
                return GGML_STATUS_FAILED;
            }
            const ggml_status st = workspace_.compute_product(node);
            if (st != GGML_STATUS_SUCCESS) {
                return st;
            }
        }
        return GGML_STATUS_SUCCESS;
    }

  private:
    ProductWorkspace workspace_;
};

class BlasDevice final : public ggml_backend_device {
  public:
    explicit BlasDevice(ggml_backend_reg * reg) : ggml_backend_device(reg), policy_(Policy::from_environment()) {
        description_ = library_name();
#if defined(OPENBLAS_VERSION)
        if (const char * core = openblas_get_corename()) {
            description_ += std::string(" (") + core + ")";
        }
#endif
    }

    const char * name() const override { return "BLAS"; }
    const char * description() const override { return description_.c_str(); }
    // No memory of its own: its tensors live in the CPU's buffers.
    void memory(size_t * free, size_t * total) const override {
        *free  = 0;
        *total = 0;
    }
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_ACCEL; }
    ggml_backend_dev_caps      caps() const override {
        ggml_backend_dev_caps c{};
        c.buffer_from_host_ptr = true;
        c.mmap_support         = true;
        return c;
    }

    ggml_backend * init_backend(const char * params) override {
        (void) params;
        auto * b = new (std::nothrow) BlasBackend(this);
        if (b == nullptr) {
            LOOM_LOG_ERROR("BLAS: out of memory creating a backend\n");
        }
        return b;
    }

    // The CPU's own buffer type, not a copy of it: the scheduler moves a
    // node to a higher-priority backend only when both use the same buffer
    // type (pass 3), which is what lets products move here without copies.
    ggml_backend_buffer_type * buffer_type() override { return ggml_backend_cpu_buffer_type(); }
    ggml_backend_buffer * buffer_from_host_ptr(void * ptr, size_t size, size_t max_tensor_size) override {
        (void) max_tensor_size;
        return ggml_backend_cpu_buffer_from_ptr(ptr, size);
    }

    // Products worth running here (Note [BLAS threshold]), and those the CPU
    // cannot compute at all, whatever their size.
    bool supports_op(const ggml_tensor * op) const override {
        if (is_noop(op)) {
            return true;
        }
        if (!can_compute(op)) {
            return false;
        }
        return policy_.takes(op) || !ggml_backend_dev_supports_op(cpu_device(), op);
    }
    bool supports_buft(const ggml_backend_buffer_type * buft) const override { return buft->is_host(); }
    bool offload_op(const ggml_tensor * op) const override { return !is_noop(op) && supports_op(op); }

  private:
    static ggml_backend_dev_t cpu_device() { return ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0); }

    const Policy policy_;
    std::string  description_;
};

class BlasReg final : public ggml_backend_reg {
  public:
    BlasReg() : device_(this) {}

    const char *          name() const override { return "BLAS"; }
    size_t                device_count() const override { return 1; }
    ggml_backend_device * device(size_t index) override {
        (void) index;
        return &device_;
    }
    void * proc_address(const char * fn) override {
        if (std::strcmp(fn, "ggml_backend_set_n_threads") == 0) {
            return reinterpret_cast<void *>(&ggml_backend_blas_set_n_threads);
        }
        return nullptr;
    }

  private:
    BlasDevice device_;
};

BlasReg & blas_reg() {
    static BlasReg reg;
    return reg;
}

} // namespace

extern "C" {

ggml_backend_reg_t ggml_backend_blas_reg(void) {
    return &blas_reg();
}

ggml_backend_t ggml_backend_blas_init(void) {
    return blas_reg().device(0)->init_backend(nullptr);
}

bool ggml_backend_is_blas(ggml_backend_t backend) {
    return backend != nullptr && ggml_guid_matches(backend->guid, &g_blas_guid);
}

void ggml_backend_blas_set_n_threads(ggml_backend_t backend_blas, int n_threads) {
    LOOM_REQUIRE(ggml_backend_is_blas(backend_blas), "backend %s is not the BLAS backend",
                 ggml_backend_name(backend_blas));
    static_cast<BlasBackend *>(backend_blas)->set_n_threads(n_threads);
}

} // extern "C"
