#pragma once

// loom: the Vulkan backend. A GPU device reached through Vulkan compute:
// device-local buffers (not host memory), a pinned host buffer type for
// fast uploads, one queue per backend stream with timeline-semaphore events,
// and compute shaders (compiled to SPIR-V at build time, embedded in the
// library) for a subset of ops: mul_mat with F32, F16, Q8_0 and Q4_0
// weights and F32 activations, add/sub/mul/div with broadcasting, scale,
// rms_norm, norm, soft_max (with mask and ALiBi), rope (normal and NeoX),
// get_rows, cpy/dup/cont between F32 and F16, the unary ops silu, gelu,
// gelu_quick, neg, relu, tanh, sigmoid, exp, and sqr, sqrt, and views.
// supports_op declines everything else, so a scheduler runs it elsewhere.
//
// Devices. By default one registry device ("Vulkan0", "Vulkan1", ...) per
// discrete or integrated GPU that has Vulkan 1.2, timeline semaphores and
// 16-bit storage buffers; typed GGML_BACKEND_DEVICE_TYPE_GPU (IGPU for an
// integrated one). Devices of other Vulkan types, such as Mesa's lavapipe
// which runs on the CPU, are used only when asked for:
//   GGML_VK_VISIBLE_DEVICES=0,2   the physical devices of these indices (in
//                                 the Vulkan loader's order), of any type,
// read once when the family is first used; set to an empty string, no
// devices and no Vulkan instance (the drivers are not even loaded). Such a device reports type GPU
// and says what it is in its description ("llvmpipe ... (CPU device)").
// A machine without a Vulkan loader, driver or device has no Vulkan
// devices; nothing fails.
//
// Transfers: synchronous ones (ggml_backend_tensor_set/get/memset/copy) go
// through a staging buffer and return when done. Async uploads and copies
// from host memory are staged when they are queued, so the source may be
// reused at once; async downloads reach their destination at the latest
// when the backend is synchronized. Copies between this device's buffers,
// and between them and its pinned host buffers, need no staging.
//
// Built when CMake finds the Vulkan loader and glslc (option LOOM_VULKAN);
// the functions below then exist and the family is in the registry before
// BLAS and the CPU.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_VK_NAME        "Vulkan"
#define GGML_VK_MAX_DEVICES 16

// A new backend (a stream with its own command buffers) on device dev_num
// (0 .. ggml_backend_vk_get_device_count() - 1), freed with
// ggml_backend_free; NULL (logged) when dev_num is out of range or the
// device cannot be opened.
GGML_BACKEND_API ggml_backend_t ggml_backend_vk_init(size_t dev_num);

GGML_BACKEND_API bool ggml_backend_is_vk(ggml_backend_t backend);

// The number of Vulkan devices in use (see above); 0 without any.
GGML_BACKEND_API int ggml_backend_vk_get_device_count(void);

// The device's description, truncated to description_size bytes with its
// terminating NUL; "" for a device number out of range.
GGML_BACKEND_API void ggml_backend_vk_get_device_description(int device, char * description, size_t description_size);

// Free and total bytes of the device's local memory (free from
// VK_EXT_memory_budget when the driver has it, else the total); 0 and 0 for
// a device number out of range.
GGML_BACKEND_API void ggml_backend_vk_get_device_memory(int device, size_t * free, size_t * total);

// The device-local buffer type of device dev_num; NULL when out of range.
// Lives for the whole process.
GGML_BACKEND_API ggml_backend_buffer_type_t ggml_backend_vk_buffer_type(size_t dev_num);

// Pinned (host-visible, coherent) host memory of the first device: host
// memory to the CPU, which the device copies to and from without staging
// (ggml_backend_tensor_copy); NULL without devices. Lives for the whole
// process.
GGML_BACKEND_API ggml_backend_buffer_type_t ggml_backend_vk_host_buffer_type(void);

// The Vulkan backend family; lives for the whole process.
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_vk_reg(void);

#ifdef __cplusplus
}
#endif
