#pragma once

// The tensor types of a llama-architecture model for llama.cpp's file types
// (the names llama-quantize takes: Q4_K_M, Q8_0, IQ4_XS, ...): which type
// each weight matrix gets for a model of a given shape, as llama.cpp's
// quantizer chooses them without an importance matrix, and the value of
// general.file_type (llama.cpp's enum llama_ftype).

#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"

namespace loom_synth {

// The shape the choice depends on.
struct ModelShape {
    int64_t embd     = 2048;
    int64_t ff       = 5632;
    int64_t layers   = 22;
    int64_t heads    = 32;
    int64_t heads_kv = 4;
};

// The matrices of a llama model, by role. A tensor's name is
// "blk.<layer>.<role>.weight" for the layer roles, "token_embd.weight" and
// "output.weight" for the others.
enum class Role { token_embd, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, output };

struct Recipe;

// The recipe of a file type by its llama-quantize name (case as written
// there: "Q4_K_M", "IQ4_NL", "F16"); nullptr for an unknown name.
const Recipe * find_recipe(const std::string & name);

// Every recipe's name, in the order of the table.
std::vector<std::string> recipe_names();

// general.file_type of files of this recipe (llama.cpp's llama_ftype).
uint32_t recipe_file_type(const Recipe & recipe);

// The type of the matrix of this role in layer `layer` (ignored for
// token_embd and output) of a model of shape `shape`; its rows are
// `row_length` values long (a row length that is not a whole number of the
// chosen type's blocks gives the type llama.cpp falls back to).
ggml_type recipe_tensor_type(const Recipe & recipe, const ModelShape & shape, Role role, int64_t layer,
                             int64_t row_length);

} // namespace loom_synth
