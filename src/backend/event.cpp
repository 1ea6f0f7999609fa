// Events: the default stream behaviour of backends and the C entry points.

#include "backend_impl.h"
#include "core/common.h"

void ggml_backend::event_record(ggml_backend_event * event) {
    (void) event;
    synchronize();
}

void ggml_backend::event_wait(ggml_backend_event * event) {
    event->device->event_synchronize(event);
}

extern "C" {

ggml_backend_event_t ggml_backend_event_new(ggml_backend_dev_t device) {
    // ggml accepts a NULL device here and answers that it has no events.
    return device != nullptr ? device->event_new() : nullptr;
}

void ggml_backend_event_free(ggml_backend_event_t event) {
    delete event;
}

void ggml_backend_event_record(ggml_backend_event_t event, ggml_backend_t backend) {
    LOOM_REQUIRE(event != nullptr && backend != nullptr, "NULL event or backend");
    LOOM_REQUIRE(event->device == backend->device, "event of device %s recorded on backend %s of device %s",
                 event->device->name(), backend->name(), backend->device->name());
    backend->event_record(event);
}

void ggml_backend_event_synchronize(ggml_backend_event_t event) {
    LOOM_REQUIRE(event != nullptr, "NULL event");
    event->device->event_synchronize(event);
}

void ggml_backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event) {
    LOOM_REQUIRE(event != nullptr && backend != nullptr, "NULL event or backend");
    backend->event_wait(event);
}

} // extern "C"
