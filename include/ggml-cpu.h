#pragma once

// loom: the CPU backend and the direct CPU compute API.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_threadpool;

// What ggml_graph_compute needs besides the graph. Created by
// ggml_graph_plan; the caller provides work_data of work_size bytes.
struct ggml_cplan {
    size_t    work_size;
    uint8_t * work_data;

    int                      n_threads;
    struct ggml_threadpool * threadpool; // NULL: the process-wide pool of loom

    ggml_abort_callback abort_callback; // checked between nodes
    void *              abort_callback_data;

    bool use_ref; // use the portable kernels only
};

GGML_BACKEND_API struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value);
GGML_BACKEND_API struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value);

// Fill every element (host data only).
GGML_BACKEND_API struct ggml_tensor * ggml_set_i32(struct ggml_tensor * tensor, int32_t value);
GGML_BACKEND_API struct ggml_tensor * ggml_set_f32(struct ggml_tensor * tensor, float value);

// Element access on host data; i is a flat index of a contiguous tensor.
GGML_BACKEND_API int32_t ggml_get_i32_1d(const struct ggml_tensor * tensor, int i);
GGML_BACKEND_API void    ggml_set_i32_1d(const struct ggml_tensor * tensor, int i, int32_t value);
GGML_BACKEND_API int32_t ggml_get_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_BACKEND_API void    ggml_set_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3,
                                         int32_t value);
GGML_BACKEND_API float   ggml_get_f32_1d(const struct ggml_tensor * tensor, int i);
GGML_BACKEND_API void    ggml_set_f32_1d(const struct ggml_tensor * tensor, int i, float value);
GGML_BACKEND_API float   ggml_get_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
GGML_BACKEND_API void ggml_set_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value);

// Plans a computation with n_threads threads (<= 0: GGML_DEFAULT_N_THREADS).
GGML_BACKEND_API struct ggml_cplan ggml_graph_plan(const struct ggml_cgraph * cgraph, int n_threads,
                                                   struct ggml_threadpool * threadpool);
// GGML_STATUS_FAILED (logged) when work_data is missing or too small;
// GGML_STATUS_ABORTED when the abort callback asked to stop.
GGML_BACKEND_API enum ggml_status ggml_graph_compute(struct ggml_cgraph * cgraph, struct ggml_cplan * cplan);
// Same, with the work buffer taken from ctx's arena.
GGML_BACKEND_API enum ggml_status ggml_graph_compute_with_ctx(struct ggml_context * ctx, struct ggml_cgraph * cgraph,
                                                              int n_threads);

// Thread pools: a pool given to ggml_graph_plan (through the plan) or to a
// CPU backend runs its graphs on its threads; one pool may serve several
// backends and plans, one graph at a time. A paused pool's idle workers
// sleep without spinning; computing a graph on it works, and resumes it.
GGML_BACKEND_API struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params);
GGML_BACKEND_API void                     ggml_threadpool_free(struct ggml_threadpool * threadpool);
GGML_BACKEND_API int                      ggml_threadpool_get_n_threads(struct ggml_threadpool * threadpool);
GGML_BACKEND_API void                     ggml_threadpool_pause(struct ggml_threadpool * threadpool);
GGML_BACKEND_API void                     ggml_threadpool_resume(struct ggml_threadpool * threadpool);

// Per-type functions of the CPU's dot products (ggml's meaning): from_float
// converts f32 activations into the type; vec_dot(n, s, bs, x, bx, y, by,
// nrc) stores in *s the dot product of n values of x (this type) and y
// (vec_dot_type: Q8_K for the K-quants, Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
// Q4_1/Q5_1, F16, BF16 and F32 for themselves), accumulated in f32; nrows
// rows are taken at a time (always 1 here: nrc must be 1, bs, bx and by are
// ignored). Fields are NULL/0 where the type has none; every value in
// [0, GGML_TYPE_COUNT) has a row.
typedef void (*ggml_vec_dot_t)(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT x, size_t bx,
                               const void * GGML_RESTRICT y, size_t by, int nrc);

struct ggml_type_traits_cpu {
    ggml_from_float_t from_float;
    ggml_vec_dot_t    vec_dot;
    enum ggml_type    vec_dot_type;
    int64_t           nrows; // number of rows to process simultaneously
};

GGML_BACKEND_API const struct ggml_type_traits_cpu * ggml_get_type_traits_cpu(enum ggml_type type);

// Prepares the CPU's tables; optional (everything is also prepared on first
// use) and cheap to call again.
GGML_BACKEND_API void ggml_cpu_init(void);

// CPU features seen at start-up (1 = present).
GGML_BACKEND_API int ggml_cpu_has_sse3(void);
GGML_BACKEND_API int ggml_cpu_has_avx(void);
GGML_BACKEND_API int ggml_cpu_has_avx2(void);
GGML_BACKEND_API int ggml_cpu_has_f16c(void);
GGML_BACKEND_API int ggml_cpu_has_fma(void);
GGML_BACKEND_API int ggml_cpu_has_avx512(void);
GGML_BACKEND_API int ggml_cpu_has_avx512_vnni(void);
GGML_BACKEND_API int ggml_cpu_has_avx512_vbmi(void);
GGML_BACKEND_API int ggml_cpu_has_avx512_bf16(void);
GGML_BACKEND_API int ggml_cpu_has_ssse3(void);
GGML_BACKEND_API int ggml_cpu_has_avx_vnni(void);
GGML_BACKEND_API int ggml_cpu_has_bmi2(void);
GGML_BACKEND_API int ggml_cpu_has_amx_int8(void);
// Features of other processor families: 0 on x86-64.
GGML_BACKEND_API int ggml_cpu_has_neon(void);
GGML_BACKEND_API int ggml_cpu_has_arm_fma(void);
GGML_BACKEND_API int ggml_cpu_has_fp16_va(void);
GGML_BACKEND_API int ggml_cpu_has_dotprod(void);
GGML_BACKEND_API int ggml_cpu_has_matmul_int8(void);
GGML_BACKEND_API int ggml_cpu_has_sve(void);
GGML_BACKEND_API int ggml_cpu_get_sve_cnt(void); // SVE vector length in bytes
GGML_BACKEND_API int ggml_cpu_has_sme(void);
GGML_BACKEND_API int ggml_cpu_has_sme2(void);
GGML_BACKEND_API int ggml_cpu_has_riscv_v(void);
GGML_BACKEND_API int ggml_cpu_get_rvv_vlen(void); // RISC-V vector length in bytes
GGML_BACKEND_API int ggml_cpu_has_vsx(void);
GGML_BACKEND_API int ggml_cpu_has_vxe(void);
GGML_BACKEND_API int ggml_cpu_has_wasm_simd(void);
GGML_BACKEND_API int ggml_cpu_has_llamafile(void);

// NUMA: strategies as ggml's. loom does not bind threads to nodes, so every
// strategy leaves placement to the system; ggml_is_numa says whether the
// machine has more than one node.
enum ggml_numa_strategy {
    GGML_NUMA_STRATEGY_DISABLED   = 0,
    GGML_NUMA_STRATEGY_DISTRIBUTE = 1,
    GGML_NUMA_STRATEGY_ISOLATE    = 2,
    GGML_NUMA_STRATEGY_NUMACTL    = 3,
    GGML_NUMA_STRATEGY_MIRROR     = 4,
    GGML_NUMA_STRATEGY_COUNT
};
GGML_BACKEND_API void ggml_numa_init(enum ggml_numa_strategy numa);
GGML_BACKEND_API bool ggml_is_numa(void);

// Row conversions (fp32 to i32 truncates toward zero).
GGML_BACKEND_API void ggml_cpu_fp32_to_fp32(const float *, float *, int64_t);
GGML_BACKEND_API void ggml_cpu_fp32_to_i32(const float *, int32_t *, int64_t);
GGML_BACKEND_API void ggml_cpu_fp32_to_fp16(const float *, ggml_fp16_t *, int64_t);
GGML_BACKEND_API void ggml_cpu_fp16_to_fp32(const ggml_fp16_t *, float *, int64_t);
GGML_BACKEND_API void ggml_cpu_fp32_to_bf16(const float *, ggml_bf16_t *, int64_t);
GGML_BACKEND_API void ggml_cpu_bf16_to_fp32(const ggml_bf16_t *, float *, int64_t);

// The CPU backend.
GGML_BACKEND_API ggml_backend_t ggml_backend_cpu_init(void);
GGML_BACKEND_API bool           ggml_backend_is_cpu(ggml_backend_t backend);
GGML_BACKEND_API void           ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads);
// Runs the backend's graphs on threadpool (NULL: on the backend's own
// threads again) with the backend's thread count, at most the pool's.
GGML_BACKEND_API void           ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool);
GGML_BACKEND_API void           ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu,
                                                                    ggml_abort_callback abort_callback,
                                                                    void * abort_callback_data);
// Computes the backend's graphs with the portable kernels only (no SIMD tables, no fused products).
GGML_BACKEND_API void           ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref);

GGML_BACKEND_API ggml_backend_reg_t ggml_backend_cpu_reg(void);

#ifdef __cplusplus
}
#endif
