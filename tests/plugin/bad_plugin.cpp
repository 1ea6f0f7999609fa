// Libraries that ggml_backend_load must refuse, one per way a plugin can be
// wrong. BAD_PLUGIN_KIND selects which:
//   1 exports the API version but no ggml_backend_init
//   2 was built for another API version
//   3 has a ggml_backend_init that returns NULL
//   4 scores 0 (cannot run on this machine)
//   5 has no loom_backend_api_version (a library built for another runtime)
// Where the loader must not get as far as ggml_backend_init, init aborts, so
// that reaching it fails the test loudly.

#include <cstdlib>

#include "ggml-backend.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

#if BAD_PLUGIN_KIND != 5
EXPORT int loom_backend_api_version(void) {
#    if BAD_PLUGIN_KIND == 2
    return LOOM_BACKEND_API_VERSION + 1000;
#    else
    return LOOM_BACKEND_API_VERSION;
#    endif
}
#endif

#if BAD_PLUGIN_KIND == 4
EXPORT int ggml_backend_score(void) {
    return 0;
}
#endif

#if BAD_PLUGIN_KIND != 1
EXPORT ggml_backend_reg_t ggml_backend_init(void) {
#    if BAD_PLUGIN_KIND == 3
    return nullptr;
#    else
    std::abort();
#    endif
}
#endif
