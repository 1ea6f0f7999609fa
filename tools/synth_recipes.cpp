// The file-type recipes as a table. The facts (which role gets which type
// for which layers, the fallbacks for rows that are not whole blocks, the
// llama_ftype values) are those of llama.cpp's quantizer
// (src/llama-quant.cpp: llama_tensor_get_type and tensor_type_fallback;
// include/llama.h: enum llama_ftype), for a dense llama model quantized
// without an importance matrix and without per-tensor overrides.

#include "synth_recipes.h"

namespace loom_synth {

namespace {

// When a role's rule picks `hit` instead of the recipe's base type.
enum class When {
    never,        // the base type everywhere
    always,       // hit in every layer
    more_bits,    // layers of the first and last eighth, and every third between
    first_n,      // layer < arg
    first_part,   // layer < layers / arg
    gqa_at_least, // heads / heads_kv >= arg: hit, else `miss`
};

struct Rule {
    When      when = When::never;
    int64_t   arg  = 0;
    ggml_type hit  = GGML_TYPE_COUNT;
    ggml_type miss = GGML_TYPE_COUNT; // GGML_TYPE_COUNT: the base type
};

constexpr ggml_type kBase = GGML_TYPE_COUNT;

} // namespace

struct Recipe {
    const char * name;
    uint32_t     file_type; // llama_ftype
    ggml_type    base;
    Rule         attn_v;
    Rule         ffn_down;
    Rule         attn_output;
    bool         all_q8_0 = false; // MXFP4_MOE: a dense model's matrices all Q8_0 (MXFP4 is for experts)
};

namespace {

const Recipe kRecipes[] = {
    {"F32", 0, GGML_TYPE_F32, {}, {}, {}},
    {"F16", 1, GGML_TYPE_F16, {}, {}, {}},
    {"BF16", 32, GGML_TYPE_BF16, {}, {}, {}},
    {"Q4_0", 2, GGML_TYPE_Q4_0, {}, {}, {}},
    {"Q4_1", 3, GGML_TYPE_Q4_1, {}, {}, {}},
    {"Q5_0", 8, GGML_TYPE_Q5_0, {}, {}, {}},
    {"Q5_1", 9, GGML_TYPE_Q5_1, {}, {}, {}},
    {"Q8_0", 7, GGML_TYPE_Q8_0, {}, {}, {}},
    {"Q2_K", 10, GGML_TYPE_Q2_K,
     {When::gqa_at_least, 4, GGML_TYPE_Q4_K, GGML_TYPE_Q3_K},
     {When::always, 0, GGML_TYPE_Q3_K, kBase},
     {When::always, 0, GGML_TYPE_Q3_K, kBase}},
    {"Q3_K_M", 12, GGML_TYPE_Q3_K,
     {When::first_n, 2, GGML_TYPE_Q5_K, GGML_TYPE_Q4_K},
     {When::first_part, 16, GGML_TYPE_Q5_K, GGML_TYPE_Q4_K},
     {When::always, 0, GGML_TYPE_Q4_K, kBase}},
    {"Q4_K_S", 14, GGML_TYPE_Q4_K,
     {When::first_n, 4, GGML_TYPE_Q5_K, kBase},
     {When::first_part, 8, GGML_TYPE_Q5_K, kBase},
     {}},
    {"Q4_K_M", 15, GGML_TYPE_Q4_K,
     {When::more_bits, 0, GGML_TYPE_Q6_K, kBase},
     {When::more_bits, 0, GGML_TYPE_Q6_K, kBase},
     {}},
    {"Q5_K_S", 16, GGML_TYPE_Q5_K, {}, {}, {}},
    {"Q5_K_M", 17, GGML_TYPE_Q5_K,
     {When::more_bits, 0, GGML_TYPE_Q6_K, kBase},
     {When::more_bits, 0, GGML_TYPE_Q6_K, kBase},
     {}},
    {"Q6_K", 18, GGML_TYPE_Q6_K, {}, {}, {}},
    {"IQ4_NL", 25, GGML_TYPE_IQ4_NL,
     {When::gqa_at_least, 4, GGML_TYPE_Q5_K, kBase},
     {When::first_part, 8, GGML_TYPE_Q5_K, kBase},
     {}},
    {"IQ4_XS", 30, GGML_TYPE_IQ4_XS,
     {When::gqa_at_least, 4, GGML_TYPE_Q5_K, kBase},
     {When::first_part, 8, GGML_TYPE_Q5_K, kBase},
     {}},
    {"MXFP4_MOE", 38, GGML_TYPE_MXFP4, {}, {}, {}, true},
};

bool more_bits(int64_t layer, int64_t layers) {
    return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

ggml_type apply(const Rule & rule, ggml_type base, const ModelShape & shape, int64_t layer) {
    bool hit = false;
    switch (rule.when) {
        case When::never: return base;
        case When::always: hit = true; break;
        case When::more_bits: hit = more_bits(layer, shape.layers); break;
        case When::first_n: hit = layer < rule.arg; break;
        case When::first_part: hit = layer < shape.layers / rule.arg; break;
        case When::gqa_at_least: hit = shape.heads / shape.heads_kv >= rule.arg; break;
    }
    const ggml_type chosen = hit ? rule.hit : rule.miss;
    return chosen == kBase ? base : chosen;
}

// A type for rows that are not whole blocks of `type`: the 256-value types
// fall back to a 32-value one, and F16 where even that does not divide.
ggml_type fallback(ggml_type type, int64_t row_length) {
    if (row_length % ggml_blck_size(type) == 0) {
        return type;
    }
    switch (type) {
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ4_XS: type = GGML_TYPE_IQ4_NL; break;
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0: type = GGML_TYPE_Q4_0; break;
        case GGML_TYPE_Q4_K: type = GGML_TYPE_Q5_0; break;
        case GGML_TYPE_Q5_K: type = GGML_TYPE_Q5_1; break;
        case GGML_TYPE_Q6_K: type = GGML_TYPE_Q8_0; break;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_BF16: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0:
        case GGML_TYPE_COUNT: break; // a 32-value type has nothing smaller to go to
    }
    return row_length % ggml_blck_size(type) == 0 ? type : GGML_TYPE_F16;
}

} // namespace

const Recipe * find_recipe(const std::string & name) {
    for (const Recipe & r : kRecipes) {
        if (name == r.name) {
            return &r;
        }
    }
    return nullptr;
}

std::vector<std::string> recipe_names() {
    std::vector<std::string> names;
    for (const Recipe & r : kRecipes) {
        names.emplace_back(r.name);
    }
    return names;
}

uint32_t recipe_file_type(const Recipe & recipe) {
    return recipe.file_type;
}

ggml_type recipe_tensor_type(const Recipe & recipe, const ModelShape & shape, Role role, int64_t layer,
                             int64_t row_length) {
    const ggml_type base = recipe.base;
    if (!ggml_is_quantized(base)) {
        return base; // the float file types: every matrix of that type
    }
    ggml_type type = base;
    if (role == Role::output) {
        // The output matrix gets more bits, Q8_0 when its rows are not
        // whole blocks of the base type.
        if (recipe.all_q8_0 || row_length % ggml_blck_size(base) != 0) {
            type = GGML_TYPE_Q8_0;
        } else if (base != GGML_TYPE_Q8_0) {
            type = GGML_TYPE_Q6_K;
        }
    } else if (recipe.all_q8_0) {
        type = GGML_TYPE_Q8_0;
    } else if (role == Role::attn_v) {
        type = apply(recipe.attn_v, base, shape, layer);
        // The 70B shape (80 layers, grouped K/V heads): its small V matrices
        // get Q5_K instead of Q3_K or Q4_K.
        if (shape.layers == 80 && shape.heads != shape.heads_kv &&
            (type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K)) {
            type = GGML_TYPE_Q5_K;
        }
    } else if (role == Role::ffn_down) {
        type = apply(recipe.ffn_down, base, shape, layer);
    } else if (role == Role::attn_output) {
        type = apply(recipe.attn_output, base, shape, layer);
    }
    return fallback(type, row_length);
}

} // namespace loom_synth
