#pragma once

// The in-memory form of a GGUF file's metadata, shared by the reader
// (reader.cpp), the accessors (context.cpp) and the writer (writer.cpp).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"

// GGUF numbers are little-endian; values are copied between files and memory
// byte for byte, which is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "loom's GGUF code assumes a little-endian host");

namespace loom::gguf {

// Bytes of one element of a fixed-size type; 0 for STRING, ARRAY and values
// that are not types.
size_t type_size(int type);

// A key with its value. Fixed-size elements (bool as one byte 0/1) are packed
// in bytes; strings are kept in strings. A scalar is an array of one element
// with is_array false.
struct KeyValue {
    std::string              key;
    gguf_type                type     = GGUF_TYPE_UINT8; // of the elements, never ARRAY
    bool                     is_array = false;
    std::vector<uint8_t>     bytes;
    std::vector<std::string> strings;

    size_t count() const { return type == GGUF_TYPE_STRING ? strings.size() : bytes.size() / type_size(type); }
};

// A tensor's description. t holds name, type, ne and contiguous nb; when the
// tensor was added for writing, also the data pointer and backend buffer its
// bytes are read from.
struct TensorInfo {
    ggml_tensor t;
    uint64_t    offset = 0; // from the start of the data section
};

// Bytes of a contiguous tensor of this type and shape; the caller has checked
// that the type is known and that the size is representable.
size_t tensor_nbytes(ggml_type type, const int64_t ne[GGML_MAX_DIMS]);

// Fills t's nb for a contiguous layout of its type and ne.
void set_contiguous_strides(ggml_tensor & t);

} // namespace loom::gguf

struct gguf_context {
    uint32_t version     = GGUF_VERSION;
    size_t   alignment   = GGUF_DEFAULT_ALIGNMENT;
    size_t   data_offset = 0; // where the data section starts in the file that was read

    std::vector<loom::gguf::KeyValue>   kv;
    std::vector<loom::gguf::TensorInfo> tensors;

    // Offset of the tensor after the last one: the padded size of the data section.
    uint64_t data_size() const;
    // Lays the tensors out one after another, each padded to the alignment.
    void     relayout();
};
