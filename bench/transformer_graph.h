#pragma once

// Decoder-only transformer graphs for the allocator benchmark, in the shapes
// llama.cpp builds them. Llama: token embeddings, per layer RMS norm, rotary
// attention with grouped KV heads (softmax or flash attention), a gated
// feed-forward and residual adds. GPT-2: learned positions, layer norms with
// biases, one fused QKV product split by views, scale + causal mask +
// softmax, a GELU feed-forward. Both end with the logits of the last token.
//
// Written against the ggml C API alone (ggml.h), so that the same source
// builds the same graphs against loom or against ggml for a comparison.
// Weights and the KV cache belong to the caller: they get a buffer and no
// data, which both allocators treat as memory that is not theirs, so a
// graph can be planned without the gigabytes a real model would need.

#include <stdio.h>

#include "ggml.h"

struct bench_transformer {
    const char * name;
    int          n_layer;
    int          n_embd;
    int          n_head;
    int          n_head_kv;
    int          n_ff;
    int          n_vocab;
    int          n_tokens; // batch
    int          n_past;   // tokens already in the KV cache; < 0: no cache
    int          flash;    // flash attention instead of mul_mat + softmax
    int          gpt2;     // GPT-2 layers instead of Llama ones
};

// Nodes a graph of b needs at most (for ggml_new_graph_custom).
static inline size_t bench_transformer_graph_size(const struct bench_transformer * b) {
    return (size_t) (64 * b->n_layer + 64);
}

// Context bytes for the weights or the graph of b (no tensor data).
static inline size_t bench_transformer_ctx_size(const struct bench_transformer * b) {
    return ggml_tensor_overhead() * (size_t) (64 * b->n_layer + 64) +
           ggml_graph_overhead_custom(bench_transformer_graph_size(b), false) + 4096;
}

// Builds the graph of b: weights and caches in wctx, with buffer set to
// `owner` (so that no allocator plans them), the rest in gctx.
static inline struct ggml_cgraph * bench_gpt2_build(const struct bench_transformer * b, struct ggml_context * wctx,
                                                    struct ggml_context * gctx, struct ggml_backend_buffer * owner);

static inline struct ggml_cgraph * bench_transformer_build(const struct bench_transformer * b, struct ggml_context * wctx,
                                                           struct ggml_context * gctx, struct ggml_backend_buffer * owner) {
    if (b->gpt2) {
        return bench_gpt2_build(b, wctx, gctx, owner);
    }
    const int64_t hd    = b->n_embd / b->n_head;
    const int64_t n_gqa = hd * b->n_head_kv;
    const int64_t nt    = b->n_tokens;
    const int     cache = b->n_past >= 0;
    const int64_t n_kv  = cache ? b->n_past + nt : nt;
    const size_t  es    = sizeof(float);

    struct ggml_cgraph * gf = ggml_new_graph_custom(gctx, bench_transformer_graph_size(b), false);

#define BENCH_WEIGHT(var, ...)                 \
    struct ggml_tensor * var = __VA_ARGS__;    \
    var->buffer              = owner;

    BENCH_WEIGHT(tok_embd, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_vocab));
    BENCH_WEIGHT(out_norm, ggml_new_tensor_1d(wctx, GGML_TYPE_F32, b->n_embd));
    BENCH_WEIGHT(output, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_vocab));

    struct ggml_tensor * inp_tokens = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, nt);
    struct ggml_tensor * inp_pos    = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, nt);
    struct ggml_tensor * inp_out    = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, 1);
    struct ggml_tensor * kq_mask    = ggml_new_tensor_2d(gctx, b->flash ? GGML_TYPE_F16 : GGML_TYPE_F32, n_kv, nt);
    ggml_set_input(inp_tokens);
    ggml_set_input(inp_pos);
    ggml_set_input(inp_out);
    ggml_set_input(kq_mask);

    struct ggml_tensor * inpL = ggml_get_rows(gctx, tok_embd, inp_tokens);
    for (int il = 0; il < b->n_layer; ++il) {
        BENCH_WEIGHT(attn_norm, ggml_new_tensor_1d(wctx, GGML_TYPE_F32, b->n_embd));
        BENCH_WEIGHT(wq, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_embd));
        BENCH_WEIGHT(wk, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, n_gqa));
        BENCH_WEIGHT(wv, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, n_gqa));
        BENCH_WEIGHT(wo, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_embd));
        BENCH_WEIGHT(ffn_norm, ggml_new_tensor_1d(wctx, GGML_TYPE_F32, b->n_embd));
        BENCH_WEIGHT(w_gate, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_ff));
        BENCH_WEIGHT(w_up, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_embd, b->n_ff));
        BENCH_WEIGHT(w_down, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_ff, b->n_embd));

        struct ggml_tensor * cur = ggml_mul(gctx, ggml_rms_norm(gctx, inpL, 1e-5f), attn_norm);

        struct ggml_tensor * q = ggml_reshape_3d(gctx, ggml_mul_mat(gctx, wq, cur), hd, b->n_head, nt);
        struct ggml_tensor * k = ggml_reshape_3d(gctx, ggml_mul_mat(gctx, wk, cur), hd, b->n_head_kv, nt);
        struct ggml_tensor * v = ggml_mul_mat(gctx, wv, cur);
        q = ggml_rope_ext(gctx, q, inp_pos, NULL, (int) hd, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                          32.0f, 1.0f);
        k = ggml_rope_ext(gctx, k, inp_pos, NULL, (int) hd, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                          32.0f, 1.0f);

        struct ggml_tensor * K;
        struct ggml_tensor * V;
        if (cache) {
            // The cache holds n_kv rows; this batch is written at n_past.
            BENCH_WEIGHT(cache_k, ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n_gqa * n_kv));
            BENCH_WEIGHT(cache_v, ggml_new_tensor_1d(wctx, GGML_TYPE_F32, n_gqa * n_kv));
            struct ggml_tensor * k_dst = ggml_view_1d(gctx, cache_k, n_gqa * nt, es * n_gqa * (size_t) b->n_past);
            ggml_build_forward_expand(gf, ggml_cpy(gctx, k, k_dst));
            K = ggml_view_3d(gctx, cache_k, hd, n_kv, b->n_head_kv, es * n_gqa, es * hd, 0);
            if (b->flash) {
                struct ggml_tensor * v_dst = ggml_view_1d(gctx, cache_v, n_gqa * nt, es * n_gqa * (size_t) b->n_past);
                ggml_build_forward_expand(gf, ggml_cpy(gctx, v, v_dst));
                V = ggml_view_3d(gctx, cache_v, hd, n_kv, b->n_head_kv, es * n_gqa, es * hd, 0);
            } else {
                // Stored transposed, one row per channel, as llama.cpp does
                // without flash attention.
                struct ggml_tensor * v_dst =
                    ggml_view_2d(gctx, cache_v, nt, n_gqa, es * n_kv, es * (size_t) b->n_past);
                ggml_build_forward_expand(gf, ggml_cpy(gctx, ggml_transpose(gctx, v), v_dst));
                V = ggml_view_3d(gctx, cache_v, n_kv, hd, b->n_head_kv, es * n_kv, es * n_kv * hd, 0);
            }
        } else {
            K = k;
            V = b->flash ? ggml_reshape_3d(gctx, v, hd, b->n_head_kv, nt)
                         : ggml_cont_3d(gctx, ggml_transpose(gctx, v), nt, hd, b->n_head_kv);
            if (b->flash) {
                V = ggml_permute(gctx, V, 0, 2, 1, 3);
            }
            K = ggml_permute(gctx, K, 0, 2, 1, 3);
        }

        struct ggml_tensor * qp = ggml_permute(gctx, q, 0, 2, 1, 3);
        if (b->flash) {
            struct ggml_tensor * o = ggml_flash_attn_ext(gctx, qp, K, V, kq_mask, 0.125f, 0.0f, 0.0f);
            cur                    = ggml_reshape_2d(gctx, o, b->n_embd, nt);
        } else {
            struct ggml_tensor * kq  = ggml_mul_mat(gctx, K, qp);
            kq                       = ggml_soft_max_ext(gctx, kq, kq_mask, 0.125f, 0.0f);
            struct ggml_tensor * kqv = ggml_mul_mat(gctx, V, kq);
            cur = ggml_cont_2d(gctx, ggml_permute(gctx, kqv, 0, 2, 1, 3), b->n_embd, nt);
        }
        cur = ggml_mul_mat(gctx, wo, cur);

        if (il == b->n_layer - 1) {
            // Only the rows whose logits are wanted go on.
            cur  = ggml_get_rows(gctx, cur, inp_out);
            inpL = ggml_get_rows(gctx, inpL, inp_out);
        }
        struct ggml_tensor * ffn_inp = ggml_add(gctx, cur, inpL);
        cur                          = ggml_mul(gctx, ggml_rms_norm(gctx, ffn_inp, 1e-5f), ffn_norm);
        struct ggml_tensor * gate    = ggml_silu(gctx, ggml_mul_mat(gctx, w_gate, cur));
        struct ggml_tensor * up      = ggml_mul_mat(gctx, w_up, cur);
        cur                          = ggml_mul_mat(gctx, w_down, ggml_mul(gctx, gate, up));
        inpL                         = ggml_add(gctx, cur, ffn_inp);
    }
    struct ggml_tensor * logits = ggml_mul_mat(gctx, output, ggml_mul(gctx, ggml_rms_norm(gctx, inpL, 1e-5f), out_norm));
    ggml_set_output(logits);
    ggml_build_forward_expand(gf, logits);
#undef BENCH_WEIGHT
    return gf;
}

static inline struct ggml_cgraph * bench_gpt2_build(const struct bench_transformer * b, struct ggml_context * wctx,
                                                    struct ggml_context * gctx, struct ggml_backend_buffer * owner) {
    const int64_t ne    = b->n_embd;
    const int64_t hd    = ne / b->n_head;
    const int64_t nt    = b->n_tokens;
    const int     cache = b->n_past >= 0;
    const int     past  = cache ? b->n_past : 0;
    const int64_t n_kv  = past + nt;
    const size_t  es    = sizeof(float);

    struct ggml_cgraph * gf = ggml_new_graph_custom(gctx, bench_transformer_graph_size(b), false);

#define BENCH_WEIGHT(var, ...)                 \
    struct ggml_tensor * var = __VA_ARGS__;    \
    var->buffer              = owner;
#define BENCH_VEC(n) ggml_new_tensor_1d(wctx, GGML_TYPE_F32, (n))

    BENCH_WEIGHT(tok_embd, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, ne, b->n_vocab));
    BENCH_WEIGHT(pos_embd, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, ne, 4096));
    BENCH_WEIGHT(out_w, BENCH_VEC(ne));
    BENCH_WEIGHT(out_b, BENCH_VEC(ne));

    struct ggml_tensor * inp_tokens = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, nt);
    struct ggml_tensor * inp_pos    = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, nt);
    struct ggml_tensor * inp_out    = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, 1);
    ggml_set_input(inp_tokens);
    ggml_set_input(inp_pos);
    ggml_set_input(inp_out);

    struct ggml_tensor * inpL =
        ggml_add(gctx, ggml_get_rows(gctx, tok_embd, inp_tokens), ggml_get_rows(gctx, pos_embd, inp_pos));
    for (int il = 0; il < b->n_layer; ++il) {
        BENCH_WEIGHT(ln1_w, BENCH_VEC(ne));
        BENCH_WEIGHT(ln1_b, BENCH_VEC(ne));
        BENCH_WEIGHT(wqkv, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, ne, 3 * ne));
        BENCH_WEIGHT(bqkv, BENCH_VEC(3 * ne));
        BENCH_WEIGHT(wo, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, ne, ne));
        BENCH_WEIGHT(bo, BENCH_VEC(ne));
        BENCH_WEIGHT(ln2_w, BENCH_VEC(ne));
        BENCH_WEIGHT(ln2_b, BENCH_VEC(ne));
        BENCH_WEIGHT(w_fc, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, ne, b->n_ff));
        BENCH_WEIGHT(b_fc, BENCH_VEC(b->n_ff));
        BENCH_WEIGHT(w_proj, ggml_new_tensor_2d(wctx, GGML_TYPE_F32, b->n_ff, ne));
        BENCH_WEIGHT(b_proj, BENCH_VEC(ne));

        struct ggml_tensor * cur = ggml_add(gctx, ggml_mul(gctx, ggml_norm(gctx, inpL, 1e-5f), ln1_w), ln1_b);
        struct ggml_tensor * qkv = ggml_add(gctx, ggml_mul_mat(gctx, wqkv, cur), bqkv);
        struct ggml_tensor * Q   = ggml_view_2d(gctx, qkv, ne, nt, qkv->nb[1], 0);
        struct ggml_tensor * Kc  = ggml_view_2d(gctx, qkv, ne, nt, qkv->nb[1], es * ne);
        struct ggml_tensor * Vc  = ggml_view_2d(gctx, qkv, ne, nt, qkv->nb[1], es * 2 * ne);
        struct ggml_tensor * q   = ggml_permute(gctx, ggml_reshape_3d(gctx, ggml_cont(gctx, Q), hd, b->n_head, nt), 0, 2, 1, 3);
        struct ggml_tensor * K;
        struct ggml_tensor * V;
        if (cache) {
            BENCH_WEIGHT(cache_k, BENCH_VEC(ne * n_kv));
            BENCH_WEIGHT(cache_v, BENCH_VEC(ne * n_kv));
            ggml_build_forward_expand(gf, ggml_cpy(gctx, Kc, ggml_view_2d(gctx, cache_k, ne, nt, es * ne, es * ne * (size_t) past)));
            ggml_build_forward_expand(gf, ggml_cpy(gctx, ggml_transpose(gctx, Vc),
                                                   ggml_view_2d(gctx, cache_v, nt, ne, es * n_kv, es * (size_t) past)));
            K = ggml_view_3d(gctx, cache_k, hd, n_kv, b->n_head, es * ne, es * hd, 0);
            V = ggml_view_3d(gctx, cache_v, n_kv, hd, b->n_head, es * n_kv, es * n_kv * hd, 0);
        } else {
            K = ggml_permute(gctx, ggml_reshape_3d(gctx, ggml_cont(gctx, Kc), hd, b->n_head, nt), 0, 2, 1, 3);
            V = ggml_cont_3d(gctx, ggml_transpose(gctx, Vc), nt, hd, b->n_head);
        }
        struct ggml_tensor * kq = ggml_mul_mat(gctx, K, q);
        kq = ggml_soft_max(gctx, ggml_diag_mask_inf(gctx, ggml_scale(gctx, kq, 0.125f), past));
        struct ggml_tensor * kqv = ggml_mul_mat(gctx, V, kq);
        cur = ggml_cont_2d(gctx, ggml_permute(gctx, kqv, 0, 2, 1, 3), ne, nt);
        cur = ggml_add(gctx, ggml_mul_mat(gctx, wo, cur), bo);
        if (il == b->n_layer - 1) {
            cur  = ggml_get_rows(gctx, cur, inp_out);
            inpL = ggml_get_rows(gctx, inpL, inp_out);
        }
        struct ggml_tensor * ffn_inp = ggml_add(gctx, cur, inpL);
        cur = ggml_add(gctx, ggml_mul(gctx, ggml_norm(gctx, ffn_inp, 1e-5f), ln2_w), ln2_b);
        cur = ggml_gelu(gctx, ggml_add(gctx, ggml_mul_mat(gctx, w_fc, cur), b_fc));
        cur = ggml_add(gctx, ggml_mul_mat(gctx, w_proj, cur), b_proj);
        inpL = ggml_add(gctx, cur, ffn_inp);
    }
    struct ggml_tensor * h      = ggml_add(gctx, ggml_mul(gctx, ggml_norm(gctx, inpL, 1e-5f), out_w), out_b);
    struct ggml_tensor * logits = ggml_mul_mat(gctx, tok_embd, h);
    ggml_set_output(logits);
    ggml_build_forward_expand(gf, logits);
#undef BENCH_VEC
#undef BENCH_WEIGHT
    return gf;
}

// The configurations the benchmark reports: widths from a small model to a
// Llama-3-8B-like one, 4 to 32 layers, one token, a short batch and a
// prompt-sized batch, with and without a KV cache, softmax or flash
// attention; GPT-2 sizes with odd batch and cache lengths; then a series
// over depth for the planning time per node.
static const struct bench_transformer bench_transformer_configs[] = {
    // name                 layers embd heads kv  ff     vocab  tokens past   flash
    {"s512-L4-b1",          4,     512, 8,    8,  1376,  32000, 1,     -1,    0},
    {"s512-L4-b32",         4,     512, 8,    8,  1376,  32000, 32,    -1,    0},
    {"s512-L4-b512",        4,     512, 8,    8,  1376,  32000, 512,   -1,    0},
    {"s512-L4-b1-kv",       4,     512, 8,    8,  1376,  32000, 1,     1024,  0},
    {"s512-L4-b32-kv",      4,     512, 8,    8,  1376,  32000, 32,    1024,  0},
    {"s512-L4-b512-kv",     4,     512, 8,    8,  1376,  32000, 512,   1024,  0},
    {"m2048-L16-b1",        16,    2048, 32,  4,  5632,  32000, 1,     -1,    0},
    {"m2048-L16-b32",       16,    2048, 32,  4,  5632,  32000, 32,    -1,    0},
    {"m2048-L16-b512",      16,    2048, 32,  4,  5632,  32000, 512,   -1,    0},
    {"m2048-L16-b1-kv",     16,    2048, 32,  4,  5632,  32000, 1,     2048,  0},
    {"m2048-L16-b32-kv",    16,    2048, 32,  4,  5632,  32000, 32,    2048,  0},
    {"m2048-L16-b512-kv",   16,    2048, 32,  4,  5632,  32000, 512,   2048,  0},
    {"m2048-L16-b512-kv-fa",16,    2048, 32,  4,  5632,  32000, 512,   2048,  1},
    {"l4096-L32-b1",        32,    4096, 32,  8,  14336, 128256, 1,    -1,    0},
    {"l4096-L32-b32",       32,    4096, 32,  8,  14336, 128256, 32,   -1,    0},
    {"l4096-L32-b512",      32,    4096, 32,  8,  14336, 128256, 512,  -1,    0},
    {"l4096-L32-b1-kv",     32,    4096, 32,  8,  14336, 128256, 1,    4096,  0},
    {"l4096-L32-b32-kv",    32,    4096, 32,  8,  14336, 128256, 32,   4096,  0},
    {"l4096-L32-b512-kv",   32,    4096, 32,  8,  14336, 128256, 512,  4096,  0},
    {"l4096-L32-b32-kv-fa", 32,    4096, 32,  8,  14336, 128256, 32,   4096,  1},
    {"l4096-L32-b512-kv-fa",32,    4096, 32,  8,  14336, 128256, 512,  4096,  1},
    {"gpt2-L12-b1",         12,    768,  12,  12, 3072,  50257, 1,     -1,    0, 1},
    {"gpt2-L12-b77",        12,    768,  12,  12, 3072,  50257, 77,    -1,    0, 1},
    {"gpt2-L12-b512",       12,    768,  12,  12, 3072,  50257, 512,   -1,    0, 1},
    {"gpt2-L12-b1-kv",      12,    768,  12,  12, 3072,  50257, 1,     500,   0, 1},
    {"gpt2-L12-b77-kv",     12,    768,  12,  12, 3072,  50257, 77,    500,   0, 1},
    {"gpt2-L24-b300-kv",    24,    1024, 16,  16, 4096,  50257, 300,   700,   0, 1},
    {"gpt2-L48-b128-kv",    48,    1600, 25,  25, 6400,  50257, 128,   900,   0, 1},
    {"depth-L8-b64-kv",     8,     2048, 32,  4,  5632,  32000, 64,    1024,  0},
    {"depth-L32-b64-kv",    32,    2048, 32,  4,  5632,  32000, 64,    1024,  0},
    {"depth-L128-b64-kv",   128,   2048, 32,  4,  5632,  32000, 64,    1024,  0},
    {"depth-L256-b64-kv",   256,   2048, 32,  4,  5632,  32000, 64,    1024,  0},
};
