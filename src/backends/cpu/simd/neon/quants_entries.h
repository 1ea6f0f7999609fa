// The quantized entries of a NEON table, on quants_impl.h's and
// kquants_impl.h's templates (in the anonymous namespace of the including
// file). Included inside the table's namespace (neon:: or neon_dot::),
// after them.

float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y) {
    return dot_blocks<Q80>(n, x, y);
}

float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y) {
    return dot_blocks<Q40>(n, x, y);
}

void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q80>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q40>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    gemv<IQ4NL>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv<MXFP4>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q2_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q2K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q3_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q3K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q4K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q5_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q5K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q6K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    kq_gemv<IQ4XS>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

// These entries into a table.
void add_quant_kernels(KernelTable & t) {
    t.dot_q8_0_q8_0                = dot_q8_0_q8_0;
    t.dot_q4_0_q8_0                = dot_q4_0_q8_0;
    t.gemv_q8_0                    = gemv_q8_0;
    t.gemv_q4_0                    = gemv_q4_0;
    t.gemv_quant[GGML_TYPE_IQ4_NL] = gemv_iq4_nl;
    t.gemv_quant[GGML_TYPE_MXFP4]  = gemv_mxfp4;
    t.gemv_quant[GGML_TYPE_Q2_K]   = gemv_q2_K;
    t.gemv_quant[GGML_TYPE_Q3_K]   = gemv_q3_K;
    t.gemv_quant[GGML_TYPE_Q4_K]   = gemv_q4_K;
    t.gemv_quant[GGML_TYPE_Q5_K]   = gemv_q5_K;
    t.gemv_quant[GGML_TYPE_Q6_K]   = gemv_q6_K;
    t.gemv_quant[GGML_TYPE_IQ4_XS] = gemv_iq4_xs;
}
