#pragma once

// loom: reading and writing GGUF files (the model file format of ggml).
//
// Layout of a file, all numbers little-endian:
//   "GGUF" | version u32 | n_tensors | n_kv
//   n_kv x       { key: string | type i32 | value }    value of type ARRAY: elem type i32 | count | elems
//   n_tensors x  { name: string | n_dims u32 | ne[n_dims] | ggml_type i32 | offset u64 }
//   padding to the alignment | tensor data (each tensor at data offset + its offset)
// A string is a length followed by that many bytes (no terminator); bool is one byte.
// Versions 2 and 3 store counts, string/array lengths and dimensions as 64-bit
// integers; version 1 stores them as uint32 (offsets are 64-bit in every version).
// The alignment is the u32 key "general.alignment" when present, GGUF_DEFAULT_ALIGNMENT
// otherwise; tensor offsets are relative to the data section and aligned, each
// tensor following the previous one (rounded up to the alignment).
//
// Untrusted input: the readers check every count, length, type, dimension,
// offset and the alignment before using it, and that each tensor's data lies
// inside the file. A malformed file gives NULL and an error logged through
// ggml_log_set's callback naming the problem; it never aborts the process.
// Tensors of a ggml_type that loom does not implement are rejected the same way
// (the message names the tensor and the type).
//
// Preconditions of the accessors (a key or tensor id out of range, asking for a
// value with the wrong type, duplicate tensor names given to gguf_add_tensor)
// are programming errors: they abort with a message naming the function.
//
// A gguf_context is not thread-safe; distinct contexts are independent.
//
// Memory-mapping the weights instead of copying them:
//
//     struct ggml_context * meta = NULL;
//     struct gguf_init_params p = { /*no_alloc =*/ true, /*ctx =*/ &meta };
//     struct gguf_context * g = gguf_init_from_file(path, p);     // tensors without data
//     int fd = open(path, O_RDONLY); struct stat st; fstat(fd, &st);
//     void * map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
//     ggml_backend_buffer_t buf = ggml_backend_cpu_buffer_from_ptr(map, st.st_size);
//     for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
//         struct ggml_tensor * t = ggml_get_tensor(meta, gguf_get_tensor_name(g, i));
//         char * addr = (char *) map + gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i);
//         ggml_backend_tensor_alloc(buf, t, addr);   // t->data = addr, t->buffer = buf
//     }
//
// The reader has checked that every such address range lies inside the file.
// The mapping must outlive the buffer, which does not own it; the pages are
// shared with the page cache, so the weights cost no copy (PROT_READ: the
// tensors must not be written). Mark the buffer GGML_BACKEND_BUFFER_USAGE_WEIGHTS
// so that the scheduler places the operations that use them on the CPU.
// Devices whose buffer_from_host_ptr capability is set can wrap the same
// range with ggml_backend_dev_buffer_from_host_ptr.

#include "ggml.h"

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAGIC   "GGUF"
#define GGUF_VERSION 3

#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

#define GGUF_DEFAULT_ALIGNMENT 32

#ifdef __cplusplus
extern "C" {
#endif

// Types of key/value data; the values are those stored in files.
enum gguf_type {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT, // not a type: the number of types
};

struct gguf_context;

struct gguf_init_params {
    // With ctx set: true creates the tensors without data; false also reads
    // the tensor data into the new context.
    bool no_alloc;

    // If not NULL, receives a new ggml_context (owned by the caller, freed with
    // ggml_free) holding one tensor per tensor of the file, with the file's
    // names, types and shapes. With no_alloc = false its first tensor is an
    // I8 tensor named "GGUF tensor data binary blob" holding the whole data
    // section, and every other tensor's data points into it. On failure it is
    // set to NULL.
    struct ggml_context ** ctx;
};

// A context with no keys and no tensors, for writing. Free with gguf_free.
GGML_API struct gguf_context * gguf_init_empty(void);

// Reads a file (or size bytes at data, which the result does not reference).
// Returns NULL when the file cannot be read or is not valid GGUF (logged).
GGML_API struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);
GGML_API struct gguf_context * gguf_init_from_buffer(const void * data, size_t size, struct gguf_init_params params);
// Reads from the stream's current position to its end; the stream stays
// open (the caller's) and its position is unspecified afterwards.
GGML_API struct gguf_context * gguf_init_from_file_ptr(FILE * file, struct gguf_init_params params);

// Reads up to len bytes at offset into output; returns the bytes read
// (fewer only at the end of the data or on an error).
typedef size_t (*gguf_reader_callback_t)(void * userdata, void * output, uint64_t offset, size_t len);
// Reads through callback: offsets start at 0, at most max_chunk_read bytes
// a call (0: no limit), and no byte at or past max_expected_size is asked for.
GGML_API struct gguf_context * gguf_init_from_callback(gguf_reader_callback_t callback, void * userdata,
                                                       size_t max_chunk_read, uint64_t max_expected_size,
                                                       struct gguf_init_params params);

GGML_API void gguf_free(struct gguf_context * ctx); // NULL is ignored

// "u8", "i8", ..., "str", "arr"; NULL for a value that is not a type.
GGML_API const char * gguf_type_name(enum gguf_type type);

GGML_API uint32_t gguf_get_version(const struct gguf_context * ctx); // as read (1, 2 or 3); 3 for new contexts
GGML_API size_t   gguf_get_alignment(const struct gguf_context * ctx);
// Where the data section starts in the file: just after the metadata, padded
// to the alignment when there is at least one tensor.
GGML_API size_t   gguf_get_data_offset(const struct gguf_context * ctx);

GGML_API int64_t      gguf_get_n_kv(const struct gguf_context * ctx);
GGML_API int64_t      gguf_find_key(const struct gguf_context * ctx, const char * key); // -1 if absent
GGML_API const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id);

// GGUF_TYPE_ARRAY for arrays, whose element type gguf_get_arr_type gives.
GGML_API enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id);
GGML_API enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);

// The value of a key holding one element of exactly that type; anything else aborts.
GGML_API uint8_t      gguf_get_val_u8(const struct gguf_context * ctx, int64_t key_id);
GGML_API int8_t       gguf_get_val_i8(const struct gguf_context * ctx, int64_t key_id);
GGML_API uint16_t     gguf_get_val_u16(const struct gguf_context * ctx, int64_t key_id);
GGML_API int16_t      gguf_get_val_i16(const struct gguf_context * ctx, int64_t key_id);
GGML_API uint32_t     gguf_get_val_u32(const struct gguf_context * ctx, int64_t key_id);
GGML_API int32_t      gguf_get_val_i32(const struct gguf_context * ctx, int64_t key_id);
GGML_API float        gguf_get_val_f32(const struct gguf_context * ctx, int64_t key_id);
GGML_API uint64_t     gguf_get_val_u64(const struct gguf_context * ctx, int64_t key_id);
GGML_API int64_t      gguf_get_val_i64(const struct gguf_context * ctx, int64_t key_id);
GGML_API double       gguf_get_val_f64(const struct gguf_context * ctx, int64_t key_id);
GGML_API bool         gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id);
GGML_API const char * gguf_get_val_str(const struct gguf_context * ctx, int64_t key_id); // valid until the key changes
// The bytes of a one-element, non-string value.
GGML_API const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);

// Number of elements (1 for a value that is not an array).
GGML_API size_t       gguf_get_arr_n(const struct gguf_context * ctx, int64_t key_id);
// The elements of a non-string value, packed; bool elements are one byte each (0 or 1).
GGML_API const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);
// Element i of a string array, NUL-terminated (a string holding NUL bytes ends at the first).
GGML_API const char * gguf_get_arr_str(const struct gguf_context * ctx, int64_t key_id, size_t i);

GGML_API int64_t         gguf_get_n_tensors(const struct gguf_context * ctx);
GGML_API int64_t         gguf_find_tensor(const struct gguf_context * ctx, const char * name); // -1 if absent
// Offset of the tensor's data from the start of the data section.
GGML_API size_t          gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id);
GGML_API const char *    gguf_get_tensor_name(const struct gguf_context * ctx, int64_t tensor_id);
// GGML_MAX_DIMS elements; 1 beyond the tensor's dimensions.
GGML_API const int64_t * gguf_get_tensor_ne(const struct gguf_context * ctx, int64_t tensor_id);
GGML_API enum ggml_type  gguf_get_tensor_type(const struct gguf_context * ctx, int64_t tensor_id);
GGML_API size_t          gguf_get_tensor_size(const struct gguf_context * ctx, int64_t tensor_id); // bytes

// Removes the key if present; returns the id it had, or -1.
GGML_API int64_t gguf_remove_key(struct gguf_context * ctx, const char * key);

// Set a value, replacing any value of that key; the key moves to the end.
// "general.alignment" must be a u32 power of two; setting it (or removing
// it) recomputes the offsets of the tensors already added.
GGML_API void gguf_set_val_u8(struct gguf_context * ctx, const char * key, uint8_t val);
GGML_API void gguf_set_val_i8(struct gguf_context * ctx, const char * key, int8_t val);
GGML_API void gguf_set_val_u16(struct gguf_context * ctx, const char * key, uint16_t val);
GGML_API void gguf_set_val_i16(struct gguf_context * ctx, const char * key, int16_t val);
GGML_API void gguf_set_val_u32(struct gguf_context * ctx, const char * key, uint32_t val);
GGML_API void gguf_set_val_i32(struct gguf_context * ctx, const char * key, int32_t val);
GGML_API void gguf_set_val_f32(struct gguf_context * ctx, const char * key, float val);
GGML_API void gguf_set_val_u64(struct gguf_context * ctx, const char * key, uint64_t val);
GGML_API void gguf_set_val_i64(struct gguf_context * ctx, const char * key, int64_t val);
GGML_API void gguf_set_val_f64(struct gguf_context * ctx, const char * key, double val);
GGML_API void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool val);
GGML_API void gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val);

// An array of n elements of a non-string, non-array type, copied from data.
GGML_API void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data,
                                size_t n);
// An array of n strings, copied.
GGML_API void gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n);

// Sets every key of src in ctx (values copied).
GGML_API void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src);

// Adds a tensor (name, type, shape; its data pointer or backend buffer is
// remembered for gguf_write_to_file). Its offset follows the previous tensor.
// A name already present aborts.
GGML_API void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);

// Changes a tensor's type; the offsets of the tensors after it are recomputed.
GGML_API void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type);

// The host memory gguf_write_to_file reads the tensor from: gguf_get_tensor_size bytes at data.
GGML_API void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data);

// Writes the file (always as version GGUF_VERSION). With only_meta, writes the
// metadata and the padding before the data section; tensor data can then be
// appended in order, each tensor padded to the alignment. Returns false
// (logged) when the file cannot be written. Every tensor needs data unless
// only_meta is set.
GGML_API bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);
// The same into an open stream, from its current position; the stream stays open.
GGML_API bool gguf_write_to_file_ptr(const struct gguf_context * ctx, FILE * file, bool only_meta);

// Bytes of the metadata including the padding before the data section, and
// those bytes (written to data, which must hold gguf_get_meta_size bytes).
GGML_API size_t gguf_get_meta_size(const struct gguf_context * ctx);
GGML_API void   gguf_get_meta_data(const struct gguf_context * ctx, void * data);

#ifdef __cplusplus
}
#endif
