// The quantized products each NEON table defines in its namespace (neon::,
// neon_dot::); included inside the namespace by neon.h.

float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y);
float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y);
void  gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
// IQ4_NL and MXFP4 against Q8_0 columns.
void  gemv_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
void  gemv_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd);
// The K-quants and IQ4_XS against Q8_K columns.
void  gemv_q2_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_q3_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_q5_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  gemv_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
// Sets the entries above in t.
void add_quant_kernels(KernelTable & t);
