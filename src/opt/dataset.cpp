// Datasets: data and labels in host memory, batches copied shard by shard in
// a shuffled order.

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "ggml-alloc.h"
#include "opt_impl.h"

using namespace loom;

namespace loom::opt {

ggml_backend_buffer_type_t host_buffer_type() {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    LOOM_REQUIRE(cpu != nullptr, "no CPU device is registered");
    return ggml_backend_dev_buffer_type(cpu);
}

} // namespace loom::opt

ggml_opt_dataset::~ggml_opt_dataset() {
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

namespace {

int64_t shards_per_batch(const ggml_opt_dataset * d, size_t nb_data_batch, const char * fn) {
    if (nb_data_batch % d->shard_data != 0) {
        fail(fn, "a batch of %zu bytes is not a whole number of shards of %zu bytes (%lld datapoints each)",
             nb_data_batch, d->shard_data, (long long) d->ndata_shard);
    }
    return int64_t(nb_data_batch / d->shard_data);
}

} // namespace

extern "C" {

ggml_opt_dataset_t ggml_opt_dataset_init(ggml_type type_data, ggml_type type_label, int64_t ne_datapoint,
                                         int64_t ne_label, int64_t ndata, int64_t ndata_shard) {
    LOOM_REQUIRE(ne_datapoint > 0 && ne_label >= 0 && ndata > 0 && ndata_shard > 0,
                 "bad sizes: ne_datapoint %lld, ne_label %lld, ndata %lld, ndata_shard %lld",
                 (long long) ne_datapoint, (long long) ne_label, (long long) ndata, (long long) ndata_shard);
    auto * d        = new ggml_opt_dataset;
    d->ndata        = ndata;
    d->ndata_shard  = ndata_shard;
    ggml_init_params p = {2 * ggml_tensor_overhead(), nullptr, true};
    d->ctx             = ggml_init(p);
    d->data            = ggml_new_tensor_2d(d->ctx, type_data, ne_datapoint, ndata);
    d->shard_data      = ggml_nbytes(d->data) * size_t(ndata_shard) / size_t(ndata);
    if (ne_label > 0) {
        d->labels       = ggml_new_tensor_2d(d->ctx, type_label, ne_label, ndata);
        d->shard_labels = ggml_nbytes(d->labels) * size_t(ndata_shard) / size_t(ndata);
    }
    d->buf = ggml_backend_alloc_ctx_tensors_from_buft(d->ctx, opt::host_buffer_type());
    if (d->buf == nullptr) {
        delete d;
        return nullptr;
    }
    d->order.resize(size_t(ndata / ndata_shard)); // whole shards; a remainder is never batched
    for (size_t i = 0; i < d->order.size(); ++i) d->order[i] = int64_t(i);
    return d;
}

void ggml_opt_dataset_free(ggml_opt_dataset_t dataset) {
    delete dataset;
}

int64_t ggml_opt_dataset_ndata(ggml_opt_dataset_t dataset) {
    return dataset->ndata;
}

ggml_tensor * ggml_opt_dataset_data(ggml_opt_dataset_t dataset) {
    return dataset->data;
}

ggml_tensor * ggml_opt_dataset_labels(ggml_opt_dataset_t dataset) {
    return dataset->labels;
}

void ggml_opt_dataset_shuffle(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, int64_t idata) {
    LOOM_REQUIRE(idata <= dataset->ndata, "idata %lld beyond the dataset's %lld datapoints", (long long) idata,
                 (long long) dataset->ndata);
    if (idata < 0) {
        std::shuffle(dataset->order.begin(), dataset->order.end(), opt_ctx->rng);
        return;
    }
    LOOM_REQUIRE(idata % dataset->ndata_shard == 0, "idata %lld is not a multiple of the shard size %lld",
                 (long long) idata, (long long) dataset->ndata_shard);
    std::shuffle(dataset->order.begin(), dataset->order.begin() + idata / dataset->ndata_shard, opt_ctx->rng);
}

void ggml_opt_dataset_get_batch(ggml_opt_dataset_t dataset, ggml_tensor * data_batch, ggml_tensor * labels_batch,
                                int64_t ibatch) {
    LOOM_REQUIRE(data_batch != nullptr && ggml_is_contiguous(data_batch), "data_batch must be a contiguous tensor");
    LOOM_REQUIRE(labels_batch == nullptr || ggml_is_contiguous(labels_batch), "labels_batch must be contiguous");
    LOOM_REQUIRE((labels_batch == nullptr) == (dataset->labels == nullptr),
                 "labels_batch %s but the dataset %s labels", labels_batch ? "given" : "missing",
                 dataset->labels ? "has" : "has no");
    LOOM_REQUIRE(data_batch->type == dataset->data->type, "data_batch is %s, the dataset's data %s",
                 ggml_type_name(data_batch->type), ggml_type_name(dataset->data->type));
    LOOM_REQUIRE(labels_batch == nullptr || labels_batch->type == dataset->labels->type,
                 "labels_batch is %s, the dataset's labels %s", ggml_type_name(labels_batch->type),
                 ggml_type_name(dataset->labels->type));
    const int64_t n = shards_per_batch(dataset, ggml_nbytes(data_batch), __func__);
    LOOM_REQUIRE(labels_batch == nullptr || ggml_nbytes(labels_batch) == size_t(n) * dataset->shard_labels,
                 "labels_batch of %zu bytes does not match data_batch's %lld shards", ggml_nbytes(labels_batch),
                 (long long) n);
    LOOM_REQUIRE(ibatch >= 0 && (ibatch + 1) * n <= int64_t(dataset->order.size()),
                 "batch %lld of %lld shards is beyond the dataset's %zu shards", (long long) ibatch, (long long) n,
                 dataset->order.size());
    for (int64_t j = 0; j < n; ++j) {
        const int64_t s = dataset->order[size_t(ibatch * n + j)];
        ggml_backend_tensor_set(data_batch, static_cast<const char *>(dataset->data->data) + size_t(s) * dataset->shard_data,
                                size_t(j) * dataset->shard_data, dataset->shard_data);
        if (labels_batch != nullptr) {
            ggml_backend_tensor_set(labels_batch,
                                    static_cast<const char *>(dataset->labels->data) + size_t(s) * dataset->shard_labels,
                                    size_t(j) * dataset->shard_labels, dataset->shard_labels);
        }
    }
}

void ggml_opt_dataset_get_batch_host(ggml_opt_dataset_t dataset, void * data_batch, size_t nb_data_batch,
                                     void * labels_batch, int64_t ibatch) {
    LOOM_REQUIRE((labels_batch == nullptr) == (dataset->labels == nullptr),
                 "labels_batch %s but the dataset %s labels", labels_batch ? "given" : "missing",
                 dataset->labels ? "has" : "has no");
    const int64_t n = shards_per_batch(dataset, nb_data_batch, __func__);
    LOOM_REQUIRE(ibatch >= 0 && (ibatch + 1) * n <= int64_t(dataset->order.size()),
                 "batch %lld of %lld shards is beyond the dataset's %zu shards", (long long) ibatch, (long long) n,
                 dataset->order.size());
    for (int64_t j = 0; j < n; ++j) {
        const int64_t s = dataset->order[size_t(ibatch * n + j)];
        std::memcpy(static_cast<char *>(data_batch) + size_t(j) * dataset->shard_data,
                    static_cast<const char *>(dataset->data->data) + size_t(s) * dataset->shard_data,
                    dataset->shard_data);
        if (labels_batch != nullptr) {
            std::memcpy(static_cast<char *>(labels_batch) + size_t(j) * dataset->shard_labels,
                        static_cast<const char *>(dataset->labels->data) + size_t(s) * dataset->shard_labels,
                        dataset->shard_labels);
        }
    }
}

} // extern "C"
