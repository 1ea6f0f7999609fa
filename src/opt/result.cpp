// Results of evaluations: loss and accuracy with their standard errors.

#include <cmath>

#include "opt_impl.h"

extern "C" {

ggml_opt_result_t ggml_opt_result_init(void) {
    return new ggml_opt_result;
}

void ggml_opt_result_free(ggml_opt_result_t result) {
    delete result;
}

void ggml_opt_result_reset(ggml_opt_result_t result) {
    result->ndata = 0;
    result->loss.clear();
    result->pred.clear();
    result->ncorrect = 0;
}

void ggml_opt_result_ndata(ggml_opt_result_t result, int64_t * ndata) {
    *ndata = result->ndata;
}

void ggml_opt_result_loss(ggml_opt_result_t result, double * loss, double * unc) {
    const size_t n = result->loss.size();
    if (n == 0) {
        *loss = 0.0;
        if (unc != nullptr) *unc = NAN;
        return;
    }
    // A per-datapoint loss was divided by opt_period in each batch.
    double sum = 0.0, sum2 = 0.0;
    for (const float l : result->loss) {
        const double v = result->loss_per_datapoint ? double(l) * double(result->opt_period) : double(l);
        sum += v;
        sum2 += v * v;
    }
    const double mean = sum / double(n);
    *loss             = result->loss_per_datapoint ? mean : sum;
    if (unc == nullptr) {
        return;
    }
    if (n < 2) {
        *unc = NAN;
        return;
    }
    // Standard error of the mean (or of the sum) from the batches' spread.
    const double var = sum2 / double(n) - mean * mean;
    *unc = result->loss_per_datapoint ? std::sqrt(var / double(n - 1)) : std::sqrt(var * double(n) / double(n - 1));
}

void ggml_opt_result_pred(ggml_opt_result_t result, int32_t * pred) {
    for (size_t i = 0; i < result->pred.size(); ++i) pred[i] = result->pred[i];
}

void ggml_opt_result_accuracy(ggml_opt_result_t result, double * accuracy, double * unc) {
    *accuracy = result->ncorrect >= 0 ? double(result->ncorrect) / double(result->ndata) : NAN;
    if (unc == nullptr) {
        return;
    }
    *unc = result->ncorrect >= 0 && result->ndata >= 2
               ? std::sqrt(*accuracy * (1.0 - *accuracy) / double(result->ndata - 1))
               : NAN;
}

} // extern "C"
