#pragma once

// loom: the tensor core of the ggml C API.
//
// A context is an arena that owns tensor objects (and, unless no_alloc is
// set, their data). Op constructors create result tensors that remember
// their sources; a graph collects them in execution order; a backend
// computes the graph. Every name, enum value and struct layout here matches
// ggml's public header, for the subset loom implements.
//
// Errors: broken preconditions (mismatched shapes, a full context, an index
// out of range) abort through ggml_abort with a message naming the function
// and the values. Data and environment problems are reported by return
// values in the backend headers.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(_WIN32) && !defined(__MINGW32__)
#    define GGML_API __declspec(dllimport) extern
#else
#    define GGML_API __attribute__((visibility("default"))) extern
#endif

#define GGML_NORETURN _Noreturn
#ifdef __cplusplus
#    undef GGML_NORETURN
#    define GGML_NORETURN [[noreturn]]
#endif

#define GGML_ATTRIBUTE_FORMAT(...) __attribute__((format(printf, __VA_ARGS__)))
#define GGML_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))

#define GGML_FILE_MAGIC   0x67676d6c // "ggml"
#define GGML_FILE_VERSION 2

#define GGML_QNT_VERSION        2
#define GGML_QNT_VERSION_FACTOR 1000

#define GGML_MAX_DIMS           4
#define GGML_MAX_PARAMS         2048
#define GGML_MAX_SRC            10
#define GGML_MAX_N_THREADS      512
#define GGML_MAX_OP_PARAMS      64
#ifndef GGML_MAX_NAME
#    define GGML_MAX_NAME 64
#endif
#define GGML_DEFAULT_N_THREADS  4
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN          16

#define GGML_EXIT_SUCCESS 0
#define GGML_EXIT_ABORTED 1

#define GGML_ROPE_TYPE_NORMAL 0
#define GGML_ROPE_TYPE_NEOX   2
#define GGML_ROPE_TYPE_MROPE  8
#define GGML_ROPE_TYPE_VISION 24
#define GGML_ROPE_TYPE_IMROPE 40

#define GGML_MROPE_SECTIONS 4

#define GGML_KQ_MASK_PAD 1

#define GGML_UNUSED(x) (void)(x)
#define GGML_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))

#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x) \
    do { \
        if (!(x)) { \
            GGML_ABORT("GGML_ASSERT(%s) failed", #x); \
        } \
    } while (0)

#ifdef __cplusplus
#    define GGML_RESTRICT __restrict__
#else
#    define GGML_RESTRICT restrict
#endif

// Declares local copies of a tensor's ne/nb arrays: ne00, ne01, ... (used by
// kernels written against ggml).
#define GGML_TENSOR_LOCALS_1(type, prefix, pointer, array) \
    const type prefix##0 = (pointer) ? (pointer)->array[0] : 0; \
    GGML_UNUSED(prefix##0);
#define GGML_TENSOR_LOCALS_2(type, prefix, pointer, array) \
    GGML_TENSOR_LOCALS_1(type, prefix, pointer, array) \
    const type prefix##1 = (pointer) ? (pointer)->array[1] : 0; \
    GGML_UNUSED(prefix##1);
#define GGML_TENSOR_LOCALS_3(type, prefix, pointer, array) \
    GGML_TENSOR_LOCALS_2(type, prefix, pointer, array) \
    const type prefix##2 = (pointer) ? (pointer)->array[2] : 0; \
    GGML_UNUSED(prefix##2);
#define GGML_TENSOR_LOCALS(type, prefix, pointer, array) \
    GGML_TENSOR_LOCALS_3(type, prefix, pointer, array) \
    const type prefix##3 = (pointer) ? (pointer)->array[3] : 0; \
    GGML_UNUSED(prefix##3);

#ifdef __cplusplus
extern "C" {
#endif

// Called instead of abort() with the formatted message, when set.
typedef void (*ggml_abort_callback_t)(const char * error_message);
// Returns the previous callback. NULL restores the default (print, then abort).
GGML_API ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback);

GGML_NORETURN GGML_ATTRIBUTE_FORMAT(3, 4) GGML_API void ggml_abort(const char * file, int line, const char * fmt, ...);

enum ggml_status {
    GGML_STATUS_ALLOC_FAILED = -2,
    GGML_STATUS_FAILED       = -1,
    GGML_STATUS_SUCCESS      = 0,
    GGML_STATUS_ABORTED      = 1,
};

GGML_API const char * ggml_status_to_string(enum ggml_status status);

// IEEE 754 binary16
typedef uint16_t ggml_fp16_t;
GGML_API float       ggml_fp16_to_fp32(ggml_fp16_t);
GGML_API ggml_fp16_t ggml_fp32_to_fp16(float);
GGML_API void        ggml_fp16_to_fp32_row(const ggml_fp16_t *, float *, int64_t);
GGML_API void        ggml_fp32_to_fp16_row(const float *, ggml_fp16_t *, int64_t);

// bfloat16 (round to nearest even; NaNs stay quiet NaNs)
typedef struct {
    uint16_t bits;
} ggml_bf16_t;
GGML_API ggml_bf16_t ggml_fp32_to_bf16(float);
GGML_API float       ggml_bf16_to_fp32(ggml_bf16_t);
GGML_API void        ggml_bf16_to_fp32_row(const ggml_bf16_t *, float *, int64_t);
GGML_API void        ggml_fp32_to_bf16_row_ref(const float *, ggml_bf16_t *, int64_t);
GGML_API void        ggml_fp32_to_bf16_row(const float *, ggml_bf16_t *, int64_t);

struct ggml_object;
struct ggml_context;
struct ggml_cgraph;

// Values are ggml's, so quantized data and GGUF files are interchangeable.
enum ggml_type {
    GGML_TYPE_F32     = 0,
    GGML_TYPE_F16     = 1,
    GGML_TYPE_Q4_0    = 2,
    GGML_TYPE_Q4_1    = 3,
    // 4 and 5 were Q4_2 and Q4_3, no longer a format
    GGML_TYPE_Q5_0    = 6,
    GGML_TYPE_Q5_1    = 7,
    GGML_TYPE_Q8_0    = 8,
    GGML_TYPE_Q8_1    = 9,
    GGML_TYPE_Q2_K    = 10,
    GGML_TYPE_Q3_K    = 11,
    GGML_TYPE_Q4_K    = 12,
    GGML_TYPE_Q5_K    = 13,
    GGML_TYPE_Q6_K    = 14,
    GGML_TYPE_Q8_K    = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS  = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S   = 19,
    GGML_TYPE_IQ4_NL  = 20,
    GGML_TYPE_IQ3_S   = 21,
    GGML_TYPE_IQ2_S   = 22,
    GGML_TYPE_IQ4_XS  = 23,
    GGML_TYPE_I8      = 24,
    GGML_TYPE_I16     = 25,
    GGML_TYPE_I32     = 26,
    GGML_TYPE_I64     = 27,
    GGML_TYPE_F64     = 28,
    GGML_TYPE_IQ1_M   = 29,
    GGML_TYPE_BF16    = 30,
    // 31-33 were Q4_0 interleaved by 4 or 8, now a CPU buffer layout
    GGML_TYPE_TQ1_0   = 34,
    GGML_TYPE_TQ2_0   = 35,
    // 36-38 were IQ4_NL interleaved, now a CPU buffer layout
    GGML_TYPE_MXFP4   = 39,
    GGML_TYPE_NVFP4   = 40,
    GGML_TYPE_Q1_0    = 41,
    GGML_TYPE_Q2_0    = 42,
    GGML_TYPE_COUNT   = 43,
};

// Model file types: what most tensors of a model file are (ggml's values).
enum ggml_ftype {
    GGML_FTYPE_UNKNOWN              = -1,
    GGML_FTYPE_ALL_F32              = 0,
    GGML_FTYPE_MOSTLY_F16           = 1,
    GGML_FTYPE_MOSTLY_Q4_0          = 2,
    GGML_FTYPE_MOSTLY_Q4_1          = 3,
    GGML_FTYPE_MOSTLY_Q4_1_SOME_F16 = 4,
    GGML_FTYPE_MOSTLY_Q8_0          = 7,
    GGML_FTYPE_MOSTLY_Q5_0          = 8,
    GGML_FTYPE_MOSTLY_Q5_1          = 9,
    GGML_FTYPE_MOSTLY_Q2_K          = 10,
    GGML_FTYPE_MOSTLY_Q3_K          = 11,
    GGML_FTYPE_MOSTLY_Q4_K          = 12,
    GGML_FTYPE_MOSTLY_Q5_K          = 13,
    GGML_FTYPE_MOSTLY_Q6_K          = 14,
    GGML_FTYPE_MOSTLY_IQ2_XXS       = 15,
    GGML_FTYPE_MOSTLY_IQ2_XS        = 16,
    GGML_FTYPE_MOSTLY_IQ3_XXS       = 17,
    GGML_FTYPE_MOSTLY_IQ1_S         = 18,
    GGML_FTYPE_MOSTLY_IQ4_NL        = 19,
    GGML_FTYPE_MOSTLY_IQ3_S         = 20,
    GGML_FTYPE_MOSTLY_IQ2_S         = 21,
    GGML_FTYPE_MOSTLY_IQ4_XS        = 22,
    GGML_FTYPE_MOSTLY_IQ1_M         = 23,
    GGML_FTYPE_MOSTLY_BF16          = 24,
    GGML_FTYPE_MOSTLY_MXFP4         = 25,
    GGML_FTYPE_MOSTLY_NVFP4         = 26,
    GGML_FTYPE_MOSTLY_Q1_0          = 27,
    GGML_FTYPE_MOSTLY_Q2_0          = 28,
};

// The tensor type of a file type; aborts for GGML_FTYPE_UNKNOWN and
// GGML_FTYPE_MOSTLY_Q4_1_SOME_F16, which have none.
GGML_API enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype);

enum ggml_prec {
    GGML_PREC_UNDEFINED = 0,
    GGML_PREC_DEFAULT   = 0, // the older name of GGML_PREC_UNDEFINED
    GGML_PREC_F32       = 10,
    GGML_PREC_BF16      = 15,
    GGML_PREC_F16       = 20,
    GGML_PREC_Q8        = 30,
    GGML_PREC_Q4        = 40,
};

enum ggml_op {
    GGML_OP_NONE = 0,
    GGML_OP_DUP = 1,
    GGML_OP_ADD = 2,
    GGML_OP_ADD_ID = 3,
    GGML_OP_ADD1 = 4,
    GGML_OP_ACC = 5,
    GGML_OP_SUB = 6,
    GGML_OP_MUL = 7,
    GGML_OP_DIV = 8,
    GGML_OP_SQR = 9,
    GGML_OP_SQRT = 10,
    GGML_OP_LOG = 11,
    GGML_OP_SIN = 12,
    GGML_OP_COS = 13,
    GGML_OP_SUM = 14,
    GGML_OP_SUM_ROWS = 15,
    GGML_OP_CUMSUM = 16,
    GGML_OP_MEAN = 17,
    GGML_OP_ARGMAX = 18,
    GGML_OP_COUNT_EQUAL = 19,
    GGML_OP_REPEAT = 20,
    GGML_OP_REPEAT_BACK = 21,
    GGML_OP_CONCAT = 22,
    GGML_OP_SILU_BACK = 23,
    GGML_OP_NORM = 24,
    GGML_OP_RMS_NORM = 25,
    GGML_OP_RMS_NORM_BACK = 26,
    GGML_OP_GROUP_NORM = 27,
    GGML_OP_L2_NORM = 28,
    GGML_OP_MUL_MAT = 29,
    GGML_OP_MUL_MAT_ID = 30,
    GGML_OP_OUT_PROD = 31,
    GGML_OP_SCALE = 32,
    GGML_OP_SET = 33,
    GGML_OP_CPY = 34,
    GGML_OP_CONT = 35,
    GGML_OP_RESHAPE = 36,
    GGML_OP_VIEW = 37,
    GGML_OP_PERMUTE = 38,
    GGML_OP_TRANSPOSE = 39,
    GGML_OP_GET_ROWS = 40,
    GGML_OP_GET_ROWS_BACK = 41,
    GGML_OP_SET_ROWS = 42,
    GGML_OP_DIAG = 43,
    GGML_OP_DIAG_MASK_INF = 44,
    GGML_OP_DIAG_MASK_ZERO = 45,
    GGML_OP_SOFT_MAX = 46,
    GGML_OP_SOFT_MAX_BACK = 47,
    GGML_OP_ROPE = 48,
    GGML_OP_ROPE_BACK = 49,
    GGML_OP_CLAMP = 50,
    GGML_OP_CONV_TRANSPOSE_1D = 51,
    GGML_OP_IM2COL = 52,
    GGML_OP_IM2COL_BACK = 53,
    GGML_OP_IM2COL_3D = 54,
    GGML_OP_COL2IM_1D = 55,
    GGML_OP_CONV_2D = 56,
    GGML_OP_CONV_3D = 57,
    GGML_OP_CONV_2D_DW = 58,
    GGML_OP_CONV_TRANSPOSE_2D = 59,
    GGML_OP_POOL_1D = 60,
    GGML_OP_POOL_2D = 61,
    GGML_OP_POOL_2D_BACK = 62,
    GGML_OP_UPSCALE = 63,
    GGML_OP_PAD = 64,
    GGML_OP_PAD_REFLECT_1D = 65,
    GGML_OP_ROLL = 66,
    GGML_OP_ARANGE = 67,
    GGML_OP_TIMESTEP_EMBEDDING = 68,
    GGML_OP_ARGSORT = 69,
    GGML_OP_TOP_K = 70,
    GGML_OP_LEAKY_RELU = 71,
    GGML_OP_TRI = 72,
    GGML_OP_FILL = 73,
    GGML_OP_FLASH_ATTN_EXT = 74,
    GGML_OP_FLASH_ATTN_BACK = 75,
    GGML_OP_SSM_CONV = 76,
    GGML_OP_SSM_SCAN = 77,
    GGML_OP_WIN_PART = 78,
    GGML_OP_WIN_UNPART = 79,
    GGML_OP_GET_REL_POS = 80,
    GGML_OP_ADD_REL_POS = 81,
    GGML_OP_RWKV_WKV6 = 82,
    GGML_OP_GATED_LINEAR_ATTN = 83,
    GGML_OP_RWKV_WKV7 = 84,
    GGML_OP_SOLVE_TRI = 85,
    GGML_OP_GATED_DELTA_NET = 86,
    GGML_OP_LIGHTNING_INDEXER = 87,
    GGML_OP_DSV4_HC_COMB = 88,
    GGML_OP_DSV4_HC_PRE = 89,
    GGML_OP_DSV4_HC_POST = 90,
    GGML_OP_UNARY = 91,
    GGML_OP_MAP_CUSTOM1 = 92,
    GGML_OP_MAP_CUSTOM2 = 93,
    GGML_OP_MAP_CUSTOM3 = 94,
    GGML_OP_CUSTOM = 95,
    GGML_OP_CROSS_ENTROPY_LOSS = 96,
    GGML_OP_CROSS_ENTROPY_LOSS_BACK = 97,
    GGML_OP_OPT_STEP_ADAMW = 98,
    GGML_OP_OPT_STEP_SGD = 99,
    GGML_OP_GLU = 100,

    GGML_OP_COUNT = 101,
};

// Values are ggml's.
enum ggml_unary_op {
    GGML_UNARY_OP_ABS = 0,
    GGML_UNARY_OP_SGN = 1,
    GGML_UNARY_OP_NEG = 2,
    GGML_UNARY_OP_STEP = 3,
    GGML_UNARY_OP_TANH = 4,
    GGML_UNARY_OP_ELU = 5,
    GGML_UNARY_OP_RELU = 6,
    GGML_UNARY_OP_SIGMOID = 7,
    GGML_UNARY_OP_GELU = 8,
    GGML_UNARY_OP_GELU_QUICK = 9,
    GGML_UNARY_OP_SILU = 10,
    GGML_UNARY_OP_HARDSWISH = 11,
    GGML_UNARY_OP_HARDSIGMOID = 12,
    GGML_UNARY_OP_EXP = 13,
    GGML_UNARY_OP_EXPM1 = 14,
    GGML_UNARY_OP_SOFTPLUS = 15,
    GGML_UNARY_OP_GELU_ERF = 16,
    GGML_UNARY_OP_XIELU = 17,
    GGML_UNARY_OP_FLOOR = 18,
    GGML_UNARY_OP_CEIL = 19,
    GGML_UNARY_OP_ROUND = 20,
    GGML_UNARY_OP_TRUNC = 21,
    GGML_UNARY_OP_COUNT = 22,
};

// Gated linear units: an activation of x times a gate g (ggml_glu).
enum ggml_glu_op {
    GGML_GLU_OP_REGLU       = 0, // relu(x) g
    GGML_GLU_OP_GEGLU       = 1, // gelu(x) g, tanh approximation
    GGML_GLU_OP_SWIGLU      = 2, // silu(x) g
    GGML_GLU_OP_SWIGLU_OAI  = 3, // x' sigmoid(alpha x') (g' + 1), x' = min(x, limit), g' = clamp(g, -limit, limit)
    GGML_GLU_OP_GEGLU_ERF   = 4, // gelu(x) g, exact (erf)
    GGML_GLU_OP_GEGLU_QUICK = 5, // x sigmoid(1.702 x) g
    GGML_GLU_OP_SWIGLU_CLAMP = 6, // silu(x') g', x' = min(x, limit), g' = clamp(g, -limit, limit)

    GGML_GLU_OP_COUNT = 7,
};

// What a context's memory holds, object by object.
enum ggml_object_type {
    GGML_OBJECT_TYPE_TENSOR,
    GGML_OBJECT_TYPE_GRAPH,
    GGML_OBJECT_TYPE_WORK_BUFFER,
};

enum ggml_log_level {
    GGML_LOG_LEVEL_NONE  = 0,
    GGML_LOG_LEVEL_DEBUG = 1,
    GGML_LOG_LEVEL_INFO  = 2,
    GGML_LOG_LEVEL_WARN  = 3,
    GGML_LOG_LEVEL_ERROR = 4,
    GGML_LOG_LEVEL_CONT  = 5, // continues the previous message
};

enum ggml_tensor_flag {
    GGML_TENSOR_FLAG_INPUT   = 1,  // an input of the graph
    GGML_TENSOR_FLAG_OUTPUT  = 2,  // an output of the graph: its memory is never reused
    GGML_TENSOR_FLAG_PARAM   = 4,  // trainable parameters
    GGML_TENSOR_FLAG_LOSS    = 8,  // defines a loss
    GGML_TENSOR_FLAG_COMPUTE = 16, // must be computed
};

enum ggml_sort_order {
    GGML_SORT_ORDER_ASC,
    GGML_SORT_ORDER_DESC,
};

struct ggml_init_params {
    size_t mem_size;   // bytes of the arena
    void * mem_buffer; // caller-owned arena, or NULL to allocate one
    bool   no_alloc;   // tensors get no data in the arena
};

// An n-dimensional tensor. Layout identical to ggml's.
struct ggml_tensor {
    enum ggml_type type;

    struct ggml_backend_buffer * buffer;

    int64_t ne[GGML_MAX_DIMS]; // elements per dimension
    size_t  nb[GGML_MAX_DIMS]; // stride in bytes per dimension

    enum ggml_op op;

    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];

    int32_t flags;

    struct ggml_tensor * src[GGML_MAX_SRC];

    struct ggml_tensor * view_src;
    size_t               view_offs;

    void * data;

    char name[GGML_MAX_NAME];

    void * extra;

    char padding[8];
};

static const size_t GGML_TENSOR_SIZE = sizeof(struct ggml_tensor);

// Returning true stops a computation (GGML_STATUS_ABORTED).
typedef bool (*ggml_abort_callback)(void * data);

typedef uint8_t   ggml_guid[16];
typedef ggml_guid * ggml_guid_t;

GGML_API bool ggml_guid_matches(ggml_guid_t guid_a, ggml_guid_t guid_b);

GGML_API const char * ggml_version(void);
GGML_API const char * ggml_commit(void);

// Timing (monotonic clock). ggml_time_init is optional in loom.
GGML_API void    ggml_time_init(void);
GGML_API int64_t ggml_time_ms(void);
GGML_API int64_t ggml_time_us(void);
GGML_API int64_t ggml_cycles(void);
GGML_API int64_t ggml_cycles_per_ms(void);

GGML_API FILE * ggml_fopen(const char * fname, const char * mode);

GGML_API int64_t ggml_nelements(const struct ggml_tensor * tensor);
GGML_API int64_t ggml_nrows(const struct ggml_tensor * tensor);
GGML_API size_t  ggml_nbytes(const struct ggml_tensor * tensor);
GGML_API size_t  ggml_nbytes_pad(const struct ggml_tensor * tensor); // padded to GGML_MEM_ALIGN

GGML_API int64_t ggml_blck_size(enum ggml_type type);
GGML_API size_t  ggml_type_size(enum ggml_type type);            // bytes of one block
GGML_API size_t  ggml_row_size(enum ggml_type type, int64_t ne); // bytes of ne elements
GGML_API double  ggml_type_sizef(enum ggml_type type);

GGML_API const char * ggml_type_name(enum ggml_type type);
GGML_API const char * ggml_op_name(enum ggml_op op);
GGML_API const char * ggml_op_symbol(enum ggml_op op);
GGML_API const char * ggml_unary_op_name(enum ggml_unary_op op);
GGML_API const char * ggml_glu_op_name(enum ggml_glu_op op);
GGML_API const char * ggml_op_desc(const struct ggml_tensor * t); // unary op name or op name

GGML_API size_t ggml_element_size(const struct ggml_tensor * tensor);
GGML_API bool   ggml_is_quantized(enum ggml_type type);

GGML_API bool ggml_is_transposed(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_permuted(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_empty(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_view(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_scalar(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_vector(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_matrix(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_3d(const struct ggml_tensor * tensor);
GGML_API int  ggml_n_dims(const struct ggml_tensor * tensor); // 1 for scalars

GGML_API bool ggml_is_contiguous(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_0(const struct ggml_tensor * tensor); // same as ggml_is_contiguous
GGML_API bool ggml_is_contiguous_1(const struct ggml_tensor * tensor); // contiguous for dims >= 1
GGML_API bool ggml_is_contiguous_2(const struct ggml_tensor * tensor); // contiguous for dims >= 2
GGML_API bool ggml_is_contiguously_allocated(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_channels(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_rows(const struct ggml_tensor * tensor);

GGML_API bool ggml_are_same_shape(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_are_same_stride(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1);

// Arena bytes one tensor object takes (without data).
GGML_API size_t ggml_tensor_overhead(void);

// Checks data of a type for NaN/Inf values (float types) or scales (quantized
// types); logs the first bad block. False also for sizes that are not whole
// blocks and for types ggml does not validate (Q8_1, removed slots).
GGML_API bool ggml_validate_row_data(enum ggml_type type, const void * data, size_t nbytes);

// Context. ggml_init returns NULL only when the arena cannot be allocated.
GGML_API struct ggml_context * ggml_init(struct ggml_init_params params);
GGML_API void                  ggml_reset(struct ggml_context * ctx);
GGML_API void                  ggml_free(struct ggml_context * ctx);

GGML_API size_t ggml_used_mem(const struct ggml_context * ctx);
GGML_API bool   ggml_get_no_alloc(struct ggml_context * ctx);
GGML_API void   ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc);
GGML_API void * ggml_get_mem_buffer(const struct ggml_context * ctx);
GGML_API size_t ggml_get_mem_size(const struct ggml_context * ctx);
GGML_API size_t ggml_get_max_tensor_size(const struct ggml_context * ctx);

GGML_API struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                              const int64_t * ne);
GGML_API struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0);
GGML_API struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1);
GGML_API struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1, int64_t ne2, int64_t ne3);

GGML_API void * ggml_new_buffer(struct ggml_context * ctx, size_t nbytes);

GGML_API struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src);
GGML_API struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);

GGML_API struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
GGML_API struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);

// Converts a flat element index to coordinates.
GGML_API void ggml_unravel_index(const struct ggml_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1,
                                 int64_t * i2, int64_t * i3);

GGML_API enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor);
GGML_API enum ggml_glu_op   ggml_get_glu_op(const struct ggml_tensor * tensor);

GGML_API void *  ggml_get_data(const struct ggml_tensor * tensor);
GGML_API float * ggml_get_data_f32(const struct ggml_tensor * tensor);

GGML_API const char *         ggml_get_name(const struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name);
GGML_ATTRIBUTE_FORMAT(2, 3)
GGML_API struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...);

GGML_API void ggml_set_input(struct ggml_tensor * tensor);
GGML_API void ggml_set_output(struct ggml_tensor * tensor);
GGML_API void ggml_set_param(struct ggml_tensor * tensor);
GGML_API void ggml_set_loss(struct ggml_tensor * tensor);

//
// Operations. Each returns a new tensor (or a view for *_inplace) whose
// src[] are the operands; nothing is computed until a graph is.
//

GGML_API struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Binary element-wise ops: b is broadcast (repeated) to the shape of a.
GGML_API struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_add_cast(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            enum ggml_type type);
// b is a scalar (one element).
GGML_API struct ggml_tensor * ggml_add1(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_add1_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_sub_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_div_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);

GGML_API struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_log_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sin(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sin_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cos(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cos_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Sum of all elements: a one-element tensor.
GGML_API struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a);
// Sums along rows: [a,b,c,d] -> [1,b,c,d].
GGML_API struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a);
// Mean along rows: [a,b,c,d] -> [1,b,c,d].
GGML_API struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a);
// Index of the largest element of each row of a matrix: I32 [rows].
GGML_API struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a);

// Repeats a to the shape of b.
GGML_API struct ggml_tensor * ggml_repeat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_repeat_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                             int64_t ne1, int64_t ne2, int64_t ne3);

// Concatenates a and b along dim.
GGML_API struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          int dim);

GGML_API struct ggml_tensor * ggml_abs(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_abs_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sgn(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sgn_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_neg(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_neg_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_step(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_step_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_tanh(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_tanh_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_elu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_elu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_relu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_relu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sigmoid_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// GELU, tanh approximation.
GGML_API struct ggml_tensor * ggml_gelu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// x * sigmoid(1.702 x)
GGML_API struct ggml_tensor * ggml_gelu_quick(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_quick_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_hardswish(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_hardsigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_exp(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_exp_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// exp(x) - 1
GGML_API struct ggml_tensor * ggml_expm1(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_expm1_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// log(1 + exp(x)), x itself above 20
GGML_API struct ggml_tensor * ggml_softplus(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_softplus_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// GELU, exact (erf)
GGML_API struct ggml_tensor * ggml_gelu_erf(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_erf_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// Rounding, as the C functions of the same names.
GGML_API struct ggml_tensor * ggml_floor(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_floor_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_ceil(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_ceil_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_round(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_round_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_trunc(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_trunc_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// xIELU: alpha_p' x^2 + beta x for x > 0, (expm1(min(x, eps)) - x) alpha_n' + beta x
// otherwise, with alpha_p' = softplus(alpha_p), alpha_n' = beta + softplus(alpha_n).
GGML_API struct ggml_tensor * ggml_xielu(struct ggml_context * ctx, struct ggml_tensor * a, float alpha_n,
                                         float alpha_p, float beta, float eps);

GGML_API struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op);
GGML_API struct ggml_tensor * ggml_unary_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 enum ggml_unary_op op);

// Gated linear units. One input: a row of a is [x | g], n values each (the
// last value of an odd row takes no part), and the result's row is
// act(x) * g, n values ([g | x] when swapped). Two inputs
// of the same shape and type: act(a) * b. Rows of the inputs must be
// contiguous; types F32 and F16.
GGML_API struct ggml_tensor * ggml_glu(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_glu_op op,
                                       bool swapped);
GGML_API struct ggml_tensor * ggml_reglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_reglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_swiglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_swiglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_erf(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_erf_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_quick(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_quick_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_glu_split(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                             enum ggml_glu_op op);
GGML_API struct ggml_tensor * ggml_reglu_split(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_split(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_swiglu_split(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_erf_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                                   struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_quick_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_swiglu_oai(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                              float alpha, float limit);
// silu(min(a, limit)) * clamp(b, -limit, limit); b may be NULL (a holds both halves).
GGML_API struct ggml_tensor * ggml_swiglu_clamp(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * b, float limit);

//
// Element-wise, shape and fill operators
//

// Which part of a square matrix ggml_tri keeps (the rest becomes zero):
// UPPER_DIAG i0 >= i1, UPPER i0 > i1, LOWER_DIAG i0 <= i1, LOWER i0 < i1
// (i0 the column, i1 the row).
enum ggml_tri_type {
    GGML_TRI_TYPE_UPPER_DIAG = 0,
    GGML_TRI_TYPE_UPPER      = 1,
    GGML_TRI_TYPE_LOWER_DIAG = 2,
    GGML_TRI_TYPE_LOWER      = 3,
};

// Marks variables as used (any number of them): they are passed to a
// function that does nothing.
#ifdef __cplusplus
extern "C++" {
template <typename... Args> constexpr inline void ggml_unused_vars_impl(Args &&...) noexcept {}
}
#    define GGML_UNUSED_VARS(...) ggml_unused_vars_impl(__VA_ARGS__)
#else
static inline void ggml_unused_vars_impl(int first, ...) {
    (void) first;
}
#    define GGML_UNUSED_VARS(...) ggml_unused_vars_impl(0, __VA_ARGS__)
#endif

// A statement never reached: aborts with a message in builds with asserts,
// tells the compiler otherwise.
#ifndef NDEBUG
#    define GGML_UNREACHABLE() \
        do { \
            fprintf(stderr, "statement should be unreachable\n"); \
            abort(); \
        } while (0)
#elif defined(__GNUC__)
#    define GGML_UNREACHABLE() __builtin_unreachable()
#elif defined(_MSC_VER)
#    define GGML_UNREACHABLE() __assume(0)
#else
#    define GGML_UNREACHABLE() ((void) 0)
#endif

// Locals ne00.., nb00.. of src0, ne10.., nb10.. of src1, ne20.. of src2 and
// ne0.., nb0.. of dst (0 for a NULL tensor), for kernels written against ggml.
#define GGML_TENSOR_UNARY_OP_LOCALS \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne) \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb) \
    GGML_TENSOR_LOCALS(int64_t, ne, dst, ne) \
    GGML_TENSOR_LOCALS(size_t, nb, dst, nb)
#define GGML_TENSOR_BINARY_OP_LOCALS01 \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne) \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb) \
    GGML_TENSOR_LOCALS(int64_t, ne1, src1, ne) \
    GGML_TENSOR_LOCALS(size_t, nb1, src1, nb)
#define GGML_TENSOR_BINARY_OP_LOCALS \
    GGML_TENSOR_BINARY_OP_LOCALS01 \
    GGML_TENSOR_LOCALS(int64_t, ne, dst, ne) \
    GGML_TENSOR_LOCALS(size_t, nb, dst, nb)
#define GGML_TENSOR_TERNARY_OP_LOCALS \
    GGML_TENSOR_BINARY_OP_LOCALS01 \
    GGML_TENSOR_LOCALS(int64_t, ne2, src2, ne) \
    GGML_TENSOR_LOCALS(size_t, nb2, src2, nb) \
    GGML_TENSOR_LOCALS(int64_t, ne, dst, ne) \
    GGML_TENSOR_LOCALS(size_t, nb, dst, nb)

// What a node may assume about its sources (ggml_mul_mat_set_hint).
enum ggml_op_hint {
    GGML_HINT_NONE             = 0,
    GGML_HINT_SRC0_IS_HADAMARD = 1,
};

// The least precise accumulator (prec) a node's implementation may use:
// kept in op_params[0] of MUL_MAT and MUL_MAT_ID nodes, op_params[3] of
// FLASH_ATTN_EXT. False, and nothing changed, for other operators.
GGML_API bool ggml_prec_set_acc(struct ggml_tensor * a, enum ggml_prec prec);
// The least precise type the implementation may convert source idx to
// (prec as a rank: F32 > BF16 > F16 > Q8 > Q4): kept in op_params[2 + idx]
// of MUL_MAT and MUL_MAT_ID nodes, for idx 1 only. False, and nothing
// changed, otherwise; idx must be a source index.
GGML_API bool ggml_prec_set_src(struct ggml_tensor * a, enum ggml_prec prec, int idx);
// A hint about a MUL_MAT node's sources, kept in its op_params[1]. loom's
// devices compute the product from the data as it is, which is what the
// hint promises it equals.
GGML_API void ggml_mul_mat_set_hint(struct ggml_tensor * a, enum ggml_op_hint hint);

// Contiguous in the dimensions below n (dimension 0 holds whole elements and
// each dimension up to n - 1 follows the previous one without gaps); the
// dimensions from n on may have any strides.
GGML_API bool ggml_is_contiguous_to_1(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_to_2(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_to_3(const struct ggml_tensor * tensor);

// Logs (level INFO) the object's kind, payload offset, payload size and the
// next object; for every object of a context in arena order.
GGML_API void ggml_print_object(const struct ggml_object * obj);
GGML_API void ggml_print_objects(const struct ggml_context * ctx);

// Sets every byte of the tensor's data to zero, in its backend buffer when it
// has one; a tensor without elements is left alone. Returns the tensor.
GGML_API struct ggml_tensor * ggml_set_zero(struct ggml_tensor * tensor);

// max(min(a, max), min) element-wise (a NaN becomes max); F32 and F16.
GGML_API struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
GGML_API struct ggml_tensor * ggml_clamp_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float min,
                                                 float max);
// max(a, 0) + negative_slope * min(a, 0); in place on a when inplace; F32 and F16.
GGML_API struct ggml_tensor * ggml_leaky_relu(struct ggml_context * ctx, struct ggml_tensor * a, float negative_slope,
                                              bool inplace);
// A tensor of a's shape with every element c; a must be contiguous F32 or F16.
GGML_API struct ggml_tensor * ggml_fill(struct ggml_context * ctx, struct ggml_tensor * a, float c);
GGML_API struct ggml_tensor * ggml_fill_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float c);
// F32 [ceil((stop - start) / step)]: start + i * step; needs stop > start and a
// positive step.
GGML_API struct ggml_tensor * ggml_arange(struct ggml_context * ctx, float start, float stop, float step);
// a (contiguous F32, square in dims 0 and 1) with the elements outside the
// part that type names set to zero.
GGML_API struct ggml_tensor * ggml_tri(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_tri_type type);
// Running sums along each row of a (F32): r[i] = a[0] + ... + a[i].
GGML_API struct ggml_tensor * ggml_cumsum(struct ggml_context * ctx, struct ggml_tensor * a);
// I64 [1]: how many elements of a and b (same shape, I32) are equal.
GGML_API struct ggml_tensor * ggml_count_equal(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
// Each row of a (F32) divided by max(its euclidean norm, eps).
GGML_API struct ggml_tensor * ggml_l2_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_l2_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
// a [n, 1, ne2, ne3] -> [n, n, ne2, ne3], the row as the diagonal of a matrix
// of zeros; F32.
GGML_API struct ggml_tensor * ggml_diag(struct ggml_context * ctx, struct ggml_tensor * a);
// a (F32) with element (i0, i1) of every matrix set to zero where i0 > n_past + i1.
GGML_API struct ggml_tensor * ggml_diag_mask_zero(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
GGML_API struct ggml_tensor * ggml_diag_mask_zero_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                          int n_past);

// a (contiguous F32) with b (F32) added into the view of a that has b's shape,
// the strides nb1, nb2, nb3 and the byte offset offset; the view must lie
// inside a.
GGML_API struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                       size_t nb1, size_t nb2, size_t nb3, size_t offset);
GGML_API struct ggml_tensor * ggml_acc_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                               size_t offset);
// a with b written into the view of a that has b's shape, the strides nb1,
// nb2, nb3 and the byte offset offset (the view must lie inside a); a and b
// of one type, F32 or I32. The 1d and 2d forms take a's own strides for the
// dimensions they do not name.
GGML_API struct ggml_tensor * ggml_set(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                       size_t nb1, size_t nb2, size_t nb3, size_t offset);
GGML_API struct ggml_tensor * ggml_set_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                               size_t offset);
GGML_API struct ggml_tensor * ggml_set_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          size_t offset);
GGML_API struct ggml_tensor * ggml_set_1d_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, size_t offset);
GGML_API struct ggml_tensor * ggml_set_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          size_t nb1, size_t offset);
GGML_API struct ggml_tensor * ggml_set_2d_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, size_t nb1, size_t offset);

// The sum of a's repetitions: a has the shape of b repeated, the result b's
// shape (the inverse of ggml_repeat for gradients); F32.
GGML_API struct ggml_tensor * ggml_repeat_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
// a [n, n_used, n_tokens] + row ids[i1, i2] of b [n, n_rows]; ids I32
// [n_used, n_tokens]; F32.
GGML_API struct ggml_tensor * ggml_add_id(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          struct ggml_tensor * ids);
// a with every dimension rotated by its shift (|shift| < the dimension's
// size): the element at i moves to i + shift, wrapping around; F32.
GGML_API struct ggml_tensor * ggml_roll(struct ggml_context * ctx, struct ggml_tensor * a, int shift0, int shift1,
                                        int shift2, int shift3);
// a with zeros appended: p0..p3 more elements in each dimension; F32.
GGML_API struct ggml_tensor * ggml_pad(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1, int p2,
                                       int p3);
// As ggml_pad with lpN zeros before and rpN after dimension N (negative
// counts crop).
GGML_API struct ggml_tensor * ggml_pad_ext(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0,
                                           int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);
// As ggml_pad and ggml_pad_ext with the padding taken from the other side of
// each dimension (a wraps around like a torus) instead of zeros.
GGML_API struct ggml_tensor * ggml_pad_circular(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1,
                                                int p2, int p3);
GGML_API struct ggml_tensor * ggml_pad_ext_circular(struct ggml_context * ctx, struct ggml_tensor * a, int lp0,
                                                    int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);
// Rows of a (contiguous F32) padded by reflection without repeating the edge,
// p0 before and p1 after (each less than the row length): [a b c d] with 1, 2
// -> [b a b c d c b].
GGML_API struct ggml_tensor * ggml_pad_reflect_1d(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1);
// Sinusoidal embeddings of timesteps (F32 [n]) -> F32 [dim, n]: with
// half = dim / 2 and f_j = max_period^(-j / half), cos(t f_j) in
// [0, half), sin(t f_j) in [half, 2 half) and a zero last column for an odd dim.
GGML_API struct ggml_tensor * ggml_timestep_embedding(struct ggml_context * ctx, struct ggml_tensor * timesteps,
                                                      int dim, int max_period);
// A view of the first k columns of ggml_argsort(a, GGML_SORT_ORDER_DESC):
// the I32 indices of each row's k largest elements, largest first.
GGML_API struct ggml_tensor * ggml_argsort_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// Custom operators: a function of the caller's, run by the CPU backend as a
// node of the graph. n_tasks threads call it (GGML_N_TASKS_MAX: every thread
// of the computation; otherwise at most n_tasks of them), each with its own
// ith in [0, nth) and nth the number of threads that call it, so that it can
// split its work. The function and userdata are kept in the node as
// pointers: only backends in this process can run such a node (the CPU);
// others, a remote device among them, do not accept it.
typedef void (*ggml_custom1_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth,
                                  void * userdata);
typedef void (*ggml_custom2_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a,
                                  const struct ggml_tensor * b, int ith, int nth, void * userdata);
typedef void (*ggml_custom3_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a,
                                  const struct ggml_tensor * b, const struct ggml_tensor * c, int ith, int nth,
                                  void * userdata);
typedef void (*ggml_custom_op_t)(struct ggml_tensor * dst, int ith, int nth, void * userdata);

#define GGML_N_TASKS_MAX (-1)

// dst has a's shape and type (the _inplace forms: a view of a).
GGML_API struct ggml_tensor * ggml_map_custom1(struct ggml_context * ctx, struct ggml_tensor * a,
                                               ggml_custom1_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom1_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       ggml_custom1_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
                                               void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
                                                       void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, struct ggml_tensor * c,
                                               ggml_custom3_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * b, struct ggml_tensor * c,
                                                       ggml_custom3_op_t fun, int n_tasks, void * userdata);
// A new tensor of the given type and shape, with args (n_args < GGML_MAX_SRC)
// as its sources dst->src[0 .. n_args - 1].
GGML_API struct ggml_tensor * ggml_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1,
                                             int64_t ne2, int64_t ne3, struct ggml_tensor ** args, int n_args,
                                             ggml_custom_op_t fun, int n_tasks, void * userdata);
// A view of a, with a as dst->src[0] and args (n_args < GGML_MAX_SRC - 1) after it.
GGML_API struct ggml_tensor * ggml_custom_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun,
                                                  int n_tasks, void * userdata);

// Normalises each row to zero mean and unit variance.
GGML_API struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
// Divides each row by its root mean square.
GGML_API struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_rms_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
// Normalises groups of channels (dim 2) together.
GGML_API struct ggml_tensor * ggml_group_norm(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups,
                                              float eps);
GGML_API struct ggml_tensor * ggml_group_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      int n_groups, float eps);

// a: [K, M, p, q], b: [K, N, r*p, s*q] -> [M, N, r*p, s*q]; result = a^T b per
// matrix, a broadcast over dims 2 and 3.
GGML_API bool                 ggml_can_mul_mat(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API void                 ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec);

// a: [M, K, p, q], b: [N, K, r*p, s*q] -> [M, N, r*p, s*q]; result = a b^T.
GGML_API struct ggml_tensor * ggml_out_prod(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);

// a * s (+ b for ggml_scale_bias)
GGML_API struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
GGML_API struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s);
GGML_API struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b);
GGML_API struct ggml_tensor * ggml_scale_bias_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s,
                                                      float b);

// Copies a into b (converting the type); returns a view of b.
GGML_API struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// a in type, same shape.
GGML_API struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type);

// Makes a contiguous (optionally with a new shape of the same element count).
GGML_API struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1);
GGML_API struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, int64_t ne3);

// Reshapes a contiguous tensor (a view sharing its data).
GGML_API struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1);
GGML_API struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1, int64_t ne2, int64_t ne3);

// Views: offset in bytes, strides nb1..nb3 in bytes.
GGML_API struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           size_t offset);
GGML_API struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, size_t nb1, size_t offset);
GGML_API struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
GGML_API struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2,
                                           size_t nb3, size_t offset);

// Dimension i of a becomes dimension axis_i of the result.
GGML_API struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1,
                                           int axis2, int axis3);
GGML_API struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a);

// Rows of a selected by the I32 indices b: a [n0, n1, n2, n3], b [k, n2, n3] -> [n0, k, n2, n3] (F32, or I32).
GGML_API struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// Writes the rows of b into a at the indices c (I32 or I64); returns a view of a.
GGML_API struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            struct ggml_tensor * c);

// Sets elements above the diagonal shifted by n_past to -INF.
GGML_API struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
GGML_API struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                         int n_past);

GGML_API struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
// softmax(a * scale + mask * slope); mask F32/F16 [n0, >=n1, broadcast over 2, 3];
// slope = 1, or an ALiBi slope per head (dim 2) when max_bias > 0.
GGML_API struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * mask, float scale, float max_bias);
GGML_API struct ggml_tensor * ggml_soft_max_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                        struct ggml_tensor * mask, float scale, float max_bias);
// Attention sinks for a soft_max node: one F32 logit per head (dim 2 of a)
// joins each row's denominator with no output (src[2]); NULL removes them.
GGML_API void ggml_soft_max_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);

// Rotary position embedding. a: [head_dim, n_head, n_tokens, 1], b: I32 positions [n_tokens],
// c: optional F32 frequency factors [n_dims/2]. mode: GGML_ROPE_TYPE_NORMAL or GGML_ROPE_TYPE_NEOX.
GGML_API struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                        int n_dims, int mode);
GGML_API struct ggml_tensor * ggml_rope_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * b, int n_dims, int mode);
GGML_API struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            struct ggml_tensor * c, int n_dims, int mode, int n_ctx_orig,
                                            float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                            float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                    struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                    int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                                    float ext_factor, float attn_factor, float beta_fast,
                                                    float beta_slow);
// The YaRN correction range [dims[0], dims[1]] of rotary dimensions.
GGML_API void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                                       float dims[2]);
// Multi-section rotary embedding. mode GGML_ROPE_TYPE_MROPE or IMROPE: b holds 4 I32 positions per
// token (b [4 * a->ne[2]]: all first coordinates, then all second, ...); pair i of the first n_dims
// values (NEOX pairing) takes the coordinate of its section (sections[0..3] pairs each, MROPE in runs,
// IMROPE interleaved t, h, w), with the angle of ggml_rope_ext. mode GGML_ROPE_TYPE_VISION: two
// sections, pair i and i + n_dims rotate, each section counts its angles from 0 (n_dims = head_dim/2).
// Other modes as ggml_rope_ext (sections are then ignored).
GGML_API struct ggml_tensor * ggml_rope_multi(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                              int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig,
                                              float freq_base, float freq_scale, float ext_factor,
                                              float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_multi_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                      int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig,
                                                      float freq_base, float freq_scale, float ext_factor,
                                                      float attn_factor, float beta_fast, float beta_slow);
// ggml_rope_ext without frequency factors.
GGML_DEPRECATED(GGML_API struct ggml_tensor * ggml_rope_custom(
                    struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode,
                    int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                    float beta_fast, float beta_slow),
                "use ggml_rope_ext instead");
GGML_DEPRECATED(GGML_API struct ggml_tensor * ggml_rope_custom_inplace(
                    struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode,
                    int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                    float beta_fast, float beta_slow),
                "use ggml_rope_ext_inplace instead");
// Rotates from value n_offs of each row on (values before it and past n_offs + n_dims are copied).
// a must be a ROPE or ROPE_BACK node, not in VISION mode; n_offs >= 0. Returns a.
GGML_API struct ggml_tensor * ggml_rope_set_offset(struct ggml_tensor * a, int n_offs);

// I32 indices that sort each row.
GGML_API struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a,
                                           enum ggml_sort_order order);
// I32 indices of the k largest elements of each row, largest first.
GGML_API struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// Attention in one op: softmax(scale * q k^T + slope * mask) v.
// q: [d, n_batch, n_head, ne3]; k: [d, n_kv, n_head_kv, ne3]; v: [dv, n_kv, n_head_kv, ne3]
// mask: F16 [n_kv, >=n_batch, broadcast over 2, 3] or NULL.
// Result: F32 [dv, n_head, n_batch, ne3] (heads and batch swapped).
GGML_API struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q,
                                                  struct ggml_tensor * k, struct ggml_tensor * v,
                                                  struct ggml_tensor * mask, float scale, float max_bias,
                                                  float logit_softcap);
GGML_API void                 ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
GGML_API enum ggml_prec       ggml_flash_attn_ext_get_prec(const struct ggml_tensor * a);
// A promise that no mask row has more than n_kv_max finite entries (0: none);
// kept in op_params[4] for backends that use it, results are the same.
GGML_API void                 ggml_flash_attn_ext_set_n_kv_max(struct ggml_tensor * a, int32_t n_kv_max);
// Attention sinks: one F32 logit per head (ne[0] = q's heads) added to each
// row's softmax denominator with no value (src[4]); NULL removes them.
GGML_API void                 ggml_flash_attn_ext_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);

//
// Convolution, pooling and resampling
//

// Sizes: a convolution's output along one axis is (in + 2p - d(k - 1) - 1) / s + 1.
// Kernels are [KW, KH, IC, OC] (1D: [K, IC, OC]), images [W, H, C, N] (1D: [L, C, N]).

// The patches of b a convolution with kernel a reads, one row of IC*KH*KW values
// (1D: IC*K) per output position, zero where they fall into the padding.
// 2D: a [KW, KH, IC, *], b [W, H, IC, N] -> [IC*KH*KW, OW, OH, N].
// 1D (is_2D false; s1, p1, d1 unused): a [K, IC, *], b [L, IC, N] -> [IC*K, OL, N].
// dst_type: F32 or F16; b F32, F16 or BF16.
GGML_API struct ggml_tensor * ggml_im2col(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D,
                                          enum ggml_type dst_type);
// Overlap-add of columns a [K*OC, T_in] (tap k of channel oc at oc*K + k) into a
// signal [T_out, OC], T_out = (T_in - 1)*s0 + K - 2*p0 (p0 cropped from both ends).
// a contiguous F32, F16 or BF16; the result has a's type.
GGML_API struct ggml_tensor * ggml_col2im_1d(struct ggml_context * ctx, struct ggml_tensor * a, int s0, int oc,
                                             int p0);
// 1D convolution through im2col and mul_mat: a [K, IC, OC], b [L, IC, N] -> F32 [OL, OC, N]
// (as in ggml, with N > 1 the values are those of [OL, N, OC], reshaped).
GGML_API struct ggml_tensor * ggml_conv_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int s0, int p0, int d0);
// ggml_conv_1d with padding a->ne[0] / 2.
GGML_API struct ggml_tensor * ggml_conv_1d_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s, int d);
// Depthwise 1D convolution: a [K, 1, C], b [L, C] -> F32 [OL, C, 1].
GGML_API struct ggml_tensor * ggml_conv_1d_dw(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s0, int p0, int d0);
// ggml_conv_1d_dw with padding a->ne[0] / 2.
GGML_API struct ggml_tensor * ggml_conv_1d_dw_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, int s0, int d0);
// Transposed 1D convolution: a [K, OC, IC] F32 or F16, b F32 [L, IC] -> F32
// [(L - 1)*s0 + K, OC]. p0 must be 0 and d0 1.
GGML_API struct ggml_tensor * ggml_conv_transpose_1d(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, int s0, int p0, int d0);
// 2D convolution through im2col and mul_mat: a [KW, KH, IC, OC], b [W, H, IC, N] -> F32 [OW, OH, OC, N].
GGML_API struct ggml_tensor * ggml_conv_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int s0, int s1, int p0, int p1, int d0, int d1);
// The 3D patches: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] (channel c of batch n at
// n*IC + c) -> [IC*KD*KH*KW, OW, OH, OD*N]. dst_type F32 or F16; b F32, F16 or BF16.
GGML_API struct ggml_tensor * ggml_im2col_3d(struct ggml_context * ctx, struct ggml_tensor * a,
                                             struct ggml_tensor * b, int64_t IC, int s0, int s1, int s2, int p0,
                                             int p1, int p2, int d0, int d1, int d2, enum ggml_type dst_type);
// 3D convolution through im2col_3d and mul_mat: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N]
// -> F32 [OW, OH, OD, OC*N].
GGML_API struct ggml_tensor * ggml_conv_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
                                           int d1, int d2);
// ggml_conv_2d with stride = kernel size, no padding (non-overlapping patches).
GGML_API struct ggml_tensor * ggml_conv_2d_sk_p0(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b);
// ggml_conv_2d with stride 1 and padding half the kernel size.
GGML_API struct ggml_tensor * ggml_conv_2d_s1_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b);
// Depthwise 2D convolution through im2col and mul_mat: a [KW, KH, 1, C], b [W, H, C, N]
// -> F32 [OW, OH, C, N].
GGML_API struct ggml_tensor * ggml_conv_2d_dw(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
                                              int d1);
// Depthwise 2D convolution in one op: a [KW, KH, 1, C] F32 or F16, b F32 [W, H, C, N]
// -> [OW, OH, C, N] of b's type; when b's channels are contiguous (ggml_is_contiguous_channels)
// the result is laid out the same way.
GGML_API struct ggml_tensor * ggml_conv_2d_dw_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, int stride0, int stride1, int pad0,
                                                     int pad1, int dilation0, int dilation1);
// Transposed 2D convolution without padding: a [KW, KH, OC, IC] F32 or F16, b F32
// [W, H, IC, N] -> F32 [(W - 1)*stride + KW, (H - 1)*stride + KH, OC, N].
GGML_API struct ggml_tensor * ggml_conv_transpose_2d_p0(struct ggml_context * ctx, struct ggml_tensor * a,
                                                        struct ggml_tensor * b, int stride);
// 2D convolution in one op: a [KW, KH, IC, OC] F32 or F16, b F32 [W, H, IC, N]
// -> [OW, OH, OC, N] of b's type.
GGML_API struct ggml_tensor * ggml_conv_2d_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
                                                  int d1);
// 3D convolution in one op: a [KW, KH, KD, n_channels*n_channels_out] F32 or F16,
// b F32 [W, H, D, n_channels*n_batch] -> F32 [OW, OH, OD, n_channels_out*n_batch].
GGML_API struct ggml_tensor * ggml_conv_3d_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, int s0, int s1, int s2, int p0, int p1,
                                                  int p2, int d0, int d1, int d2, int n_channels, int n_batch,
                                                  int n_channels_out);

enum ggml_op_pool {
    GGML_OP_POOL_MAX,
    GGML_OP_POOL_AVG,
    GGML_OP_POOL_COUNT,
};

// Max or average over windows of k0 along dim 0, stride s0, p0 positions of padding
// on both sides (left out of maxima and averages). a F32 or F16; result F32
// [(ne0 + 2*p0 - k0) / s0 + 1, ne1, ne2, ne3].
GGML_API struct ggml_tensor * ggml_pool_1d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op,
                                           int k0, int s0, int p0);
// The same over k0 x k1 windows of dims 0 and 1. The padding is stored as integers
// (truncated), while the output size uses p0, p1 as given. Averages divide by k0*k1,
// padding included.
GGML_API struct ggml_tensor * ggml_pool_2d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op,
                                           int k0, int k1, int s0, int s1, float p0, float p1);

enum ggml_scale_mode {
    GGML_SCALE_MODE_NEAREST  = 0,
    GGML_SCALE_MODE_BILINEAR = 1,
    GGML_SCALE_MODE_BICUBIC  = 2,

    GGML_SCALE_MODE_COUNT
};

enum ggml_scale_flag {
    GGML_SCALE_FLAG_ALIGN_CORNERS = (1 << 8),
    GGML_SCALE_FLAG_ANTIALIAS     = (1 << 9),
};

// ggml_interpolate to [ne0 * scale_factor, ne1 * scale_factor, ne2, ne3]; scale_factor > 1.
GGML_API struct ggml_tensor * ggml_upscale(struct ggml_context * ctx, struct ggml_tensor * a, int scale_factor,
                                           enum ggml_scale_mode mode);
GGML_DEPRECATED(GGML_API struct ggml_tensor * ggml_upscale_ext(struct ggml_context * ctx, struct ggml_tensor * a,
                                                               int ne0, int ne1, int ne2, int ne3,
                                                               enum ggml_scale_mode mode),
                "use ggml_interpolate instead");
// Resamples F32 a to [ne0, ne1, ne2, ne3]. mode: a ggml_scale_mode, optionally or-ed with
// GGML_SCALE_FLAG_ALIGN_CORNERS (corner samples of input and output coincide) and, for
// BILINEAR only, GGML_SCALE_FLAG_ANTIALIAS (a triangle filter as wide as the downscale).
// Bilinear and bicubic act on dims 0 and 1; dims 2 and 3 (and all dims in NEAREST) take
// the nearest sample.
GGML_API struct ggml_tensor * ggml_interpolate(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                               int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode);

// F32 a [C, W, H, 1] cut into windows of w x w (zero-padded at the right and bottom)
// -> [C, w, w, npx*npy], window (px, py) at npx*py + px.
GGML_API struct ggml_tensor * ggml_win_part(struct ggml_context * ctx, struct ggml_tensor * a, int w);
// The reverse of ggml_win_part: windows a [C, w, w, *] -> F32 [C, w0, h0], padding dropped.
GGML_API struct ggml_tensor * ggml_win_unpart(struct ggml_context * ctx, struct ggml_tensor * a, int w0, int h0,
                                              int w);
// Relative positions of SAM's attention: a [C, 2*qh - 1] (qh == kh) -> F16 [C, kh, qh],
// result[c, k, q] = a[c, (kh - 1 - k) + q].
GGML_API struct ggml_tensor * ggml_get_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, int qh, int kh);
// Decomposed relative position bias of attention scores: contiguous F32 a [K*K, Q, B, *],
// pw and ph contiguous F32 of one shape [K, q1, q2, B] with q1*q2 == Q:
// result[k, q, b] = a[k, q, b] + ph[k / K, q, b] + pw[k % K, q, b] (rows past B*Q copied).
GGML_API struct ggml_tensor * ggml_add_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * pw, struct ggml_tensor * ph);
GGML_API struct ggml_tensor * ggml_add_rel_pos_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * pw, struct ggml_tensor * ph);

//
// Backward and training operators
//
// The gradients of forward operators (a graph's backward pass) and the optimizer steps.
// Unless noted, the CPU computes them in F32.

// dx = dy * silu'(x) for a = dy, b = x of one shape; result shaped as a.
GGML_API struct ggml_tensor * ggml_silu_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                             struct ggml_tensor * b);
// Gradient of ggml_rms_norm(x, eps) for a = dy, b = x of one shape; result shaped as a.
GGML_API struct ggml_tensor * ggml_rms_norm_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, float eps);
// Gradient of the input of ggml_soft_max_ext(x, mask, scale, max_bias) (mask and max_bias: a
// constant row offset, which does not change it; the CPU takes max_bias 0): a = dy, b = the
// forward result y, one shape;
// dx = scale * y * (dy - dot(dy, y)) per row. The _inplace variant writes into a.
GGML_API struct ggml_tensor * ggml_soft_max_ext_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, float scale, float max_bias);
GGML_API struct ggml_tensor * ggml_soft_max_ext_back_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                             struct ggml_tensor * b, float scale, float max_bias);
// Gradient of ggml_rope_ext / ggml_rope_multi (the inverse rotation) for a = dy; the other
// arguments as the forward call's. Result shaped as a.
GGML_API struct ggml_tensor * ggml_rope_ext_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, struct ggml_tensor * c, int n_dims, int mode,
                                                 int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                                 float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_multi_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                   struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                   int sections[4], int mode, int n_ctx_orig, float freq_base,
                                                   float freq_scale, float ext_factor, float attn_factor,
                                                   float beta_fast, float beta_slow);
// Gradient of ggml_get_rows(c, b) for 2-D c: a = dy [n0, k] (matrix), b = I32 row indices [k], c
// only gives the shape [n0, n1]. Result F32 [n0, n1]: row r is the sum of the rows of a whose index is r.
GGML_API struct ggml_tensor * ggml_get_rows_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, struct ggml_tensor * c);
// Gradient of ggml_im2col's input: a = dy, F32 shaped as the im2col result [IC*KH*KW, OW, OH, N]
// (1-D: [IC*K, OW, N]), b = the kernel (its shape only), ne = the shape of the im2col input; the
// other arguments as the forward call's. Result F32 of shape ne.
GGML_API struct ggml_tensor * ggml_im2col_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, int64_t * ne, int s0, int s1, int p0, int p1,
                                               int d0, int d1, bool is_2D);
// Gradient of ggml_pool_2d(af, op, k0, k1, s0, s1, p0, p1) for a = dy; result F32 shaped as af.
// MAX sends each window's gradient to its (first) largest input, AVG spreads it over the window.
// p0, p1 are stored as integers, as ggml does.
GGML_API struct ggml_tensor * ggml_pool_2d_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * af, enum ggml_op_pool op, int k0, int k1, int s0,
                                                int s1, float p0, float p1);
// Not available: ggml 0.25.1 aborts here too (it was never adapted to ggml_flash_attn_ext).
// Always aborts with a message.
GGML_API struct ggml_tensor * ggml_flash_attn_back(struct ggml_context * ctx, struct ggml_tensor * q,
                                                   struct ggml_tensor * k, struct ggml_tensor * v,
                                                   struct ggml_tensor * d, bool masked);
// Scalar loss: the mean over rows of -sum(b * log_softmax(a)) for logits a and labels b of one shape
// (F32). Result [1] of a's type.
GGML_API struct ggml_tensor * ggml_cross_entropy_loss(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      struct ggml_tensor * b);
// Gradient of ggml_cross_entropy_loss for the logits: a = the scalar gradient of the loss, b = the
// logits, c = the labels (b, c of one shape): (softmax(b) - c) * a / rows. Result shaped as b.
GGML_API struct ggml_tensor * ggml_cross_entropy_loss_back(struct ggml_context * ctx, struct ggml_tensor * a,
                                                           struct ggml_tensor * b, struct ggml_tensor * c);
// One AdamW step on the parameter a (flagged with ggml_set_param) with its gradient grad and moments
// m, v (all F32 of one shape); adamw_params: 7 F32 values alpha, beta1, beta2, eps, wd, beta1h, beta2h
// (beta1h = 1/(1 - beta1^t), beta2h = 1/(1 - beta2^t)). Updates a, m and v in place:
// m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
// a = a (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps). Returns a view of a.
GGML_API struct ggml_tensor * ggml_opt_step_adamw(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * grad, struct ggml_tensor * m,
                                                  struct ggml_tensor * v, struct ggml_tensor * adamw_params);
// One SGD step with weight decay on the parameter a (flagged with ggml_set_param) with its gradient
// grad (F32, one shape); sgd_params: 2 F32 values alpha, wd. a = a (1 - alpha wd) - alpha g, in place;
// returns a view of a.
GGML_API struct ggml_tensor * ggml_opt_step_sgd(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * grad, struct ggml_tensor * sgd_params);

//
// Recurrent and state-space operators
//

// Mixture-of-experts product. as: [K, M, n_expert] (one matrix per expert),
// b: F32 [K, n_b, n_tokens] with n_used % n_b == 0, ids: I32 [n_used, n_tokens]
// (expert ids in [0, n_expert)). Result: F32 [M, n_used, n_tokens] with
// result[:, e, t] = as[:, :, ids[e, t]] * b[:, e % n_b, t].
GGML_API struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as,
                                              struct ggml_tensor * b, struct ggml_tensor * ids);

// Causal 1-d convolution of each channel of a sliding window (Mamba).
// sx: [d_conv - 1 + n_t, d_inner, n_s], c: [d_conv, d_inner] -> F32 [d_inner, n_t, n_s],
// result[i, t, s] = sum_j sx[t + j, i, s] * c[j, i].
GGML_API struct ggml_tensor * ggml_ssm_conv(struct ggml_context * ctx, struct ggml_tensor * sx,
                                            struct ggml_tensor * c);

// Selective state-space scan (Mamba-1 and Mamba-2).
// s: [d_state, head_dim, n_head, >= n_seqs] initial states, picked by ids (I32 [n_seqs]);
// x: [head_dim, n_head, n_seq_tokens, n_seqs]; dt: [n_head, n_seq_tokens, n_seqs];
// A: [d_state, n_head] (Mamba-1, K == 1) or [1, n_head] (Mamba-2);
// B, C: [d_state, n_group, n_seq_tokens, n_seqs], n_head % n_group == 0.
// Per token: state = state * exp(softplus(dt) * A) + B * x * softplus(dt), y = state . C.
// Result: F32 1-d, the outputs y [head_dim, n_head, n_seq_tokens, n_seqs] followed by K
// state snapshots [d_state, head_dim, n_head, n_seqs] each, slot 0 the final state and
// slot k the state k tokens before it (slots past n_seq_tokens - 1 are not written).
GGML_API struct ggml_tensor * ggml_ssm_scan(struct ggml_context * ctx, struct ggml_tensor * s,
                                            struct ggml_tensor * x, struct ggml_tensor * dt,
                                            struct ggml_tensor * A, struct ggml_tensor * B,
                                            struct ggml_tensor * C, struct ggml_tensor * ids, int64_t K);

// RWKV-6 time mixing. k, v, r, td: [S, H, n_tokens]; tf: [S, H]; state: S*S*H*n_seqs
// values (state->ne[1] == n_seqs; n_tokens a multiple of n_seqs, in order of sequence).
// Per token and head, with S[i][j] (i along k, j along v):
//   out[j] = sum_i r[i] * (tf[i] * k[i] * v[j] + S[i][j]),  S[i][j] = S[i][j] * td[i] + k[i] * v[j].
// Result: F32 [S * H, n_tokens + S * n_seqs]: the outputs, then the final states.
GGML_API struct ggml_tensor * ggml_rwkv_wkv6(struct ggml_context * ctx, struct ggml_tensor * k,
                                             struct ggml_tensor * v, struct ggml_tensor * r,
                                             struct ggml_tensor * tf, struct ggml_tensor * td,
                                             struct ggml_tensor * state);

// Gated linear attention: as ggml_rwkv_wkv6 with q for r, with
//   S[i][j] = S[i][j] * g[i] + k[i] * v[j],  out[j] = sum_i scale * q[i] * S[i][j] (the new S).
// op_params: scale (f32).
GGML_API struct ggml_tensor * ggml_gated_linear_attn(struct ggml_context * ctx, struct ggml_tensor * k,
                                                     struct ggml_tensor * v, struct ggml_tensor * q,
                                                     struct ggml_tensor * g, struct ggml_tensor * state,
                                                     float scale);

// RWKV-7 time mixing. r, w, k, v, a, b: [S, H, n_tokens]; state as for ggml_rwkv_wkv6, with
// S[i][j] (i along v, j along k): sa = sum_j a[j] S[i][j],
//   S[i][j] = S[i][j] * w[j] + v[i] * k[j] + sa * b[j],  out[i] = sum_j S[i][j] * r[j].
// Result: F32 [S * H, n_tokens + S * n_seqs].
GGML_API struct ggml_tensor * ggml_rwkv_wkv7(struct ggml_context * ctx, struct ggml_tensor * r,
                                             struct ggml_tensor * w, struct ggml_tensor * k,
                                             struct ggml_tensor * v, struct ggml_tensor * a,
                                             struct ggml_tensor * b, struct ggml_tensor * state);

// Solves A X = B by forward substitution. a: F32 [n, n, ne2, ne3] lower triangular with a
// non-zero diagonal; b: F32 [k, n, ne2, ne3] (k right-hand sides); both contiguous.
// Result: F32 [k, n, ne2, ne3]. Only left = true, lower = true, uni = false is defined.
GGML_API struct ggml_tensor * ggml_solve_tri(struct ggml_context * ctx, struct ggml_tensor * a,
                                             struct ggml_tensor * b, bool left, bool lower, bool uni);

// Gated delta rule. q, k: [S, H_k, n_tokens, n_seqs_k] (rows contiguous; head h reads q and k
// head h % H_k, sequence s reads n_seqs_k's s / (n_seqs / n_seqs_k)); v: [S, H, n_tokens, n_seqs];
// g: [1 or S, H, n_tokens, n_seqs] log gates; beta: [1, H, n_tokens, n_seqs];
// state: [S, S, H, n_seqs], S^T stored (row j of a head's matrix is column j of S).
// Per token: S = S * exp(g) (row i scaled by exp(g[i]) for a vector gate),
//   S += k (beta * (v - S^T k))^T, out = S^T q / sqrt(S).
// Result: F32 [S * H, n_tokens * n_seqs + K * S * n_seqs]: the outputs, then K snapshots of
// the states, slot 0 the final one, slot k the one k tokens before (only slots < n_tokens
// are written). op_params: K (i32).
GGML_API struct ggml_tensor * ggml_gated_delta_net(struct ggml_context * ctx, struct ggml_tensor * q,
                                                   struct ggml_tensor * k, struct ggml_tensor * v,
                                                   struct ggml_tensor * g, struct ggml_tensor * beta,
                                                   struct ggml_tensor * state, int64_t K);

// DeepSeek sparse attention's lightning indexer: index scores of every key for every query.
// q: F32 [n_embd, n_head, n_batch, ne3]; k: F32/F16/BF16 [n_embd, 1, n_kv, ne3];
// weights: F32 [n_head, n_batch, 1, ne3] (prescaled); mask: F16 [n_kv, n_batch, 1, ne33],
// ne3 % ne33 == 0. Result: F32 [n_kv, n_batch, 1, ne3],
//   result[j, t, s] = sum_h max(q[:, h, t, s] . k[:, 0, j, s], 0) * weights[h, t, s] + mask[j, t, s % ne33].
GGML_API struct ggml_tensor * ggml_lightning_indexer(struct ggml_context * ctx, struct ggml_tensor * q,
                                                     struct ggml_tensor * k, struct ggml_tensor * weights,
                                                     struct ggml_tensor * mask);

// DeepSeek V4 hyper-connections (streams in place of the residual connection), F32, hc = 4 streams.
// hc_comb: mixes [(2 + hc) * hc, n_tokens], scale [>= 3], base [(2 + hc) * hc] -> [hc (dst), hc (src), n_tokens]:
//   c[d, s] = softmax over d of (mixes[2 hc + d + hc s] * scale[2] + base[2 hc + d + hc s]) + eps, then
//   normalised over s (each sum taken as eps + the sum), then n_iter - 1 times over d and over s again.
// op_params: eps (f32), n_iter (i32).
GGML_API struct ggml_tensor * ggml_dsv4_hc_comb(struct ggml_context * ctx, struct ggml_tensor * mixes,
                                                struct ggml_tensor * scale, struct ggml_tensor * base, float eps,
                                                int32_t n_iter);
// hc_pre: x [n_embd, hc, n_tokens], weights [hc, n_tokens] -> [n_embd, n_tokens],
//   result[i, t] = sum_h x[i, h, t] * weights[h, t].
GGML_API struct ggml_tensor * ggml_dsv4_hc_pre(struct ggml_context * ctx, struct ggml_tensor * x,
                                               struct ggml_tensor * weights);
// hc_pre with a gate [n_embd, hc, n_tokens]: result[i, t] = scale * sum_h x[i, h, t] * sigmoid(gate[i, h, t]).
// op_params (both): scale (f32), gated (i32).
GGML_API struct ggml_tensor * ggml_dsv4_hc_pre_gated(struct ggml_context * ctx, struct ggml_tensor * x,
                                                     struct ggml_tensor * gate, float scale);
// hc_post: x [n_embd, n_tokens], residual [n_embd, hc, n_tokens], post [hc, n_tokens],
// comb [hc (dst), hc (src), n_tokens] or NULL -> [n_embd, hc, n_tokens],
//   result[i, d, t] = x[i, t] * post[d, t] + sum_s residual[i, s, t] * comb[d, s, t]
//   (+ residual[i, d, t] instead of the sum when comb is NULL).
GGML_API struct ggml_tensor * ggml_dsv4_hc_post(struct ggml_context * ctx, struct ggml_tensor * x,
                                                struct ggml_tensor * residual, struct ggml_tensor * post,
                                                struct ggml_tensor * comb);

//
// Graphs
//

GGML_API struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx); // size GGML_DEFAULT_GRAPH_SIZE
GGML_API struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
GGML_API struct ggml_cgraph * ggml_graph_dup(struct ggml_context * ctx, struct ggml_cgraph * cgraph, bool force_grads);
GGML_API void                 ggml_graph_cpy(struct ggml_cgraph * src, struct ggml_cgraph * dst);
GGML_API void                 ggml_graph_clear(struct ggml_cgraph * cgraph);

// Adds tensor and every source it depends on, in execution order, and marks
// them to be computed (GGML_TENSOR_FLAG_COMPUTE).
GGML_API void ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

// Adds tensor and its sources in execution order without marking them to be
// computed: backends skip a node without GGML_TENSOR_FLAG_COMPUTE. A node gets
// the mark later when a node that computes is added on top of it.
GGML_API void ggml_build_forward_order(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

// Adds all n_tensors to the graph (a topology that does not depend on the
// input) but marks only tensors[idx] and what it depends on to be computed.
// Returns tensors[idx]; 0 <= idx < n_tensors.
GGML_API struct ggml_tensor * ggml_build_forward_select(struct ggml_cgraph * cgraph, struct ggml_tensor ** tensors,
                                                        int n_tensors, int idx);

GGML_API int                  ggml_graph_size(struct ggml_cgraph * cgraph);
GGML_API struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * cgraph, int i); // i < 0 counts from the end
GGML_API struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * cgraph);
GGML_API int                  ggml_graph_n_nodes(struct ggml_cgraph * cgraph);
GGML_API void                 ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

GGML_API size_t ggml_graph_overhead(void);
GGML_API size_t ggml_graph_overhead_custom(size_t size, bool grads);

//
// Automatic differentiation
//
// Mark the trainable leafs with ggml_set_param and the f32 scalar to minimize
// with ggml_set_loss, build the forward graph in a graph made with
// ggml_new_graph_custom(..., grads = true), then expand it backwards: the
// gradient of every node that depends on a parameter is added to the graph.
// grad_accs (NULL, or one entry per forward node) gives tensors that keep a
// node's gradient between evaluations; the loss always gets one. Before an
// evaluation, ggml_graph_reset sets the loss's gradient to 1, the other
// accumulators and the AdamW moments to 0.

GGML_API void ggml_build_backward_expand(struct ggml_context * ctx, struct ggml_cgraph * cgraph,
                                         struct ggml_tensor ** grad_accs);
// NULL when node is not in the graph or has no gradient.
GGML_API struct ggml_tensor * ggml_graph_get_grad(const struct ggml_cgraph * cgraph, const struct ggml_tensor * node);
GGML_API struct ggml_tensor * ggml_graph_get_grad_acc(const struct ggml_cgraph * cgraph,
                                                      const struct ggml_tensor * node);
GGML_API void ggml_graph_reset(struct ggml_cgraph * cgraph);

GGML_API struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * cgraph, const char * name);

// Prints nodes and leafs with the INFO log level.
GGML_API void ggml_graph_print(const struct ggml_cgraph * cgraph);
// Writes a Graphviz file; gf may be NULL.
GGML_API void ggml_graph_dump_dot(const struct ggml_cgraph * gb, const struct ggml_cgraph * gf, const char * filename);

//
// Logging
//

typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
// NULL restores the default (stderr).
GGML_API void ggml_log_set(ggml_log_callback log_callback, void * user_data);
GGML_API void ggml_log_get(ggml_log_callback * log_callback, void ** user_data);

//
// Quantization
//

// Quantizes nrows rows of n_per_row floats starting at row start / n_per_row
// into dst (which points at the start of the whole destination), the bytes
// ggml writes. imatrix: n_per_row importance weights shared by the rows, or
// NULL (required by the types for which ggml_quantize_requires_imatrix
// holds). Returns the bytes written.
GGML_API size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float * imatrix);
GGML_API bool   ggml_quantize_requires_imatrix(enum ggml_type type);
GGML_API void   ggml_quantize_init(enum ggml_type type);
GGML_API void   ggml_quantize_free(void);

// Row conversion between a type and F32, as a table per type.
typedef void (*ggml_to_float_t)(const void * GGML_RESTRICT x, float * GGML_RESTRICT y, int64_t k);
typedef void (*ggml_from_float_t)(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k);

struct ggml_type_traits {
    const char *      type_name;
    int64_t           blck_size;
    int64_t           blck_size_interleave;
    size_t            type_size;
    bool              is_quantized;
    ggml_to_float_t   to_float;
    ggml_from_float_t from_float_ref;
};

GGML_API const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);

// Thread pools of the CPU backend (created and run with the functions of
// ggml-cpu.h; the parameters live here, as in ggml).

enum ggml_sched_priority {
    GGML_SCHED_PRIO_LOW = -1,
    GGML_SCHED_PRIO_NORMAL,
    GGML_SCHED_PRIO_MEDIUM,
    GGML_SCHED_PRIO_HIGH,
    GGML_SCHED_PRIO_REALTIME
};

struct ggml_threadpool_params {
    bool                     cpumask[GGML_MAX_N_THREADS]; // CPUs the workers may use; all false: no affinity
    int                      n_threads;                   // threads of the pool, the calling thread included
    enum ggml_sched_priority prio;                        // best effort: logged when the system refuses
    uint32_t                 poll;                        // 0: workers sleep when idle; up to 100: spin longer first
    bool                     strict_cpu;                  // one CPU of the mask per worker, in turn
    bool                     paused;                      // start paused
};

struct ggml_threadpool;
typedef struct ggml_threadpool * ggml_threadpool_t;

GGML_API struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads);
GGML_API void ggml_threadpool_params_init(struct ggml_threadpool_params * p, int n_threads);
GGML_API bool ggml_threadpool_params_match(const struct ggml_threadpool_params * p0,
                                           const struct ggml_threadpool_params * p1);

#ifdef __cplusplus
}
#endif
