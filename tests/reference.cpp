#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace loomtest {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

const char * row_ptr(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<const char *>(t->data) + i1 * int64_t(t->nb[1]) + i2 * int64_t(t->nb[2]) +
           i3 * int64_t(t->nb[3]);
}

char * row_ptr(ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return static_cast<char *>(t->data) + i1 * int64_t(t->nb[1]) + i2 * int64_t(t->nb[2]) + i3 * int64_t(t->nb[3]);
}

void write_element(ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double x) {
    char * p = row_ptr(t, i1, i2, i3) + i0 * int64_t(t->nb[0]);
    switch (t->type) {
        case GGML_TYPE_F32: {
            const float f = float(x);
            std::memcpy(p, &f, sizeof(f));
            break;
        }
        case GGML_TYPE_F16: {
            const ggml_fp16_t h = ggml_fp32_to_fp16(float(x));
            std::memcpy(p, &h, sizeof(h));
            break;
        }
        case GGML_TYPE_BF16: {
            const ggml_bf16_t h = ggml_fp32_to_bf16(float(x));
            std::memcpy(p, &h, sizeof(h));
            break;
        }
        case GGML_TYPE_I8: {
            const int8_t i = int8_t(x);
            std::memcpy(p, &i, sizeof(i));
            break;
        }
        case GGML_TYPE_I16: {
            const int16_t i = int16_t(x);
            std::memcpy(p, &i, sizeof(i));
            break;
        }
        case GGML_TYPE_I32: {
            const int32_t i = int32_t(x);
            std::memcpy(p, &i, sizeof(i));
            break;
        }
        case GGML_TYPE_I64: {
            const int64_t i = int64_t(x);
            std::memcpy(p, &i, sizeof(i));
            break;
        }
        default: throw std::invalid_argument(std::string("write_element: unsupported type ") + ggml_type_name(t->type));
    }
}

// Rounds a finite positive x to a binary format with `digits` significant
// bits whose smallest normal exponent is emin, ties to even.
double round_binary(double ax, int digits, int emin) {
    int e = 0;
    std::frexp(ax, &e); // ax in [2^(e-1), 2^e)
    const int    exponent = std::max(e - 1, emin);
    const double quantum  = std::ldexp(1.0, exponent - (digits - 1));
    return std::nearbyint(ax / quantum) * quantum;
}

} // namespace

Array::Array(Shape shape, double fill) : ne(shape), v(size_t(shape[0] * shape[1] * shape[2] * shape[3]), fill) {}

std::string shape_str(const Shape & ne) {
    std::ostringstream s;
    s << "[" << ne[0] << ", " << ne[1] << ", " << ne[2] << ", " << ne[3] << "]";
    return s.str();
}

Shape shape_of(const ggml_tensor * t) {
    return {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
}

double read_element(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char * p = row_ptr(t, i1, i2, i3) + i0 * int64_t(t->nb[0]);
    switch (t->type) {
        case GGML_TYPE_F32: {
            float f;
            std::memcpy(&f, p, sizeof(f));
            return f;
        }
        case GGML_TYPE_F16: {
            ggml_fp16_t h;
            std::memcpy(&h, p, sizeof(h));
            return ggml_fp16_to_fp32(h);
        }
        case GGML_TYPE_BF16: {
            ggml_bf16_t h;
            std::memcpy(&h, p, sizeof(h));
            return ggml_bf16_to_fp32(h);
        }
        case GGML_TYPE_I8: {
            int8_t i;
            std::memcpy(&i, p, sizeof(i));
            return i;
        }
        case GGML_TYPE_I16: {
            int16_t i;
            std::memcpy(&i, p, sizeof(i));
            return i;
        }
        case GGML_TYPE_I32: {
            int32_t i;
            std::memcpy(&i, p, sizeof(i));
            return i;
        }
        case GGML_TYPE_I64: {
            int64_t i;
            std::memcpy(&i, p, sizeof(i));
            return double(i);
        }
        default: throw std::invalid_argument(std::string("read_element: unsupported type ") + ggml_type_name(t->type));
    }
}

Array read_tensor(const ggml_tensor * t) {
    Array a(shape_of(t));
    if (ggml_is_quantized(t->type)) {
        const ggml_type_traits * traits = ggml_get_type_traits(t->type);
        std::vector<float>       row(size_t(t->ne[0]));
        for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
                for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                    traits->to_float(row_ptr(t, i1, i2, i3), row.data(), t->ne[0]);
                    for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                        a(i0, i1, i2, i3) = row[size_t(i0)];
                    }
                }
            }
        }
        return a;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    a(i0, i1, i2, i3) = read_element(t, i0, i1, i2, i3);
                }
            }
        }
    }
    return a;
}

void write_tensor(ggml_tensor * t, const Array & a) {
    if (shape_of(t) != a.ne) {
        throw std::invalid_argument("write_tensor: shape " + shape_str(a.ne) + " for tensor " +
                                    shape_str(shape_of(t)));
    }
    if (ggml_is_quantized(t->type)) {
        std::vector<float>   row(size_t(t->ne[0]));
        std::vector<uint8_t> q(ggml_row_size(t->type, t->ne[0]));
        for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
                for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                    for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                        row[size_t(i0)] = float(a(i0, i1, i2, i3));
                    }
                    ggml_quantize_chunk(t->type, row.data(), q.data(), 0, 1, t->ne[0], nullptr);
                    std::memcpy(row_ptr(t, i1, i2, i3), q.data(), q.size());
                }
            }
        }
        return;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    write_element(t, i0, i1, i2, i3, a(i0, i1, i2, i3));
                }
            }
        }
    }
}

Array random_array(const Shape & ne, std::mt19937 & rng, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    Array                                  a(ne);
    for (double & x : a.v) {
        x = dist(rng);
    }
    return a;
}

Array fill_random(ggml_tensor * t, std::mt19937 & rng, double lo, double hi) {
    write_tensor(t, random_array(shape_of(t), rng, lo, hi));
    return read_tensor(t);
}

double round_to_f16(double x) {
    if (!std::isfinite(x) || x == 0.0) {
        return x;
    }
    const double r = round_binary(std::fabs(x), 11, -14);
    return std::copysign(r > 65504.0 ? kInf : r, x);
}

double round_to_bf16(double x) {
    if (!std::isfinite(x) || x == 0.0) {
        return x;
    }
    const double r = round_binary(std::fabs(x), 8, -126);
    return std::copysign(r >= std::ldexp(1.0, 128) ? kInf : r, x);
}

double round_to_type(ggml_type type, double x) {
    switch (type) {
        case GGML_TYPE_F32: return double(float(x));
        case GGML_TYPE_F16: return round_to_f16(double(float(x)));
        case GGML_TYPE_BF16: return round_to_bf16(double(float(x)));
        default: return x;
    }
}

namespace {

template <typename T>
bool nonfinite_mismatch(T g, T w) {
    if (std::isfinite(w)) {
        return !std::isfinite(g);
    }
    return std::isnan(w) ? !std::isnan(g) : g != w;
}

template <typename T>
double nmse_of(std::span<const T> got, std::span<const T> want) {
    if (got.size() != want.size()) {
        return kInf;
    }
    double err = 0.0;
    double ref = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double w = double(want[i]), g = double(got[i]);
        if (nonfinite_mismatch(g, w)) {
            return kInf;
        }
        if (!std::isfinite(w)) {
            continue;
        }
        err += (g - w) * (g - w);
        ref += w * w;
    }
    return ref > 0.0 ? err / ref : err;
}

template <typename T>
double max_abs_diff_of(std::span<const T> got, std::span<const T> want) {
    if (got.size() != want.size()) {
        return kInf;
    }
    double m = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double w = double(want[i]), g = double(got[i]);
        if (nonfinite_mismatch(g, w)) {
            return kInf;
        }
        if (std::isfinite(w)) {
            m = std::max(m, std::fabs(g - w));
        }
    }
    return m;
}

} // namespace

double nmse(std::span<const double> got, std::span<const double> want) {
    return nmse_of(got, want);
}
double nmse(std::span<const float> got, std::span<const float> want) {
    return nmse_of(got, want);
}
double nmse(const Array & got, const Array & want) {
    return nmse_of<double>(got.v, want.v);
}
double max_abs_diff(std::span<const double> got, std::span<const double> want) {
    return max_abs_diff_of(got, want);
}
double max_abs_diff(std::span<const float> got, std::span<const float> want) {
    return max_abs_diff_of(got, want);
}
double max_abs_diff(const Array & got, const Array & want) {
    return max_abs_diff_of<double>(got.v, want.v);
}

int64_t first_nonfinite_mismatch(std::span<const double> got, std::span<const double> want) {
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        if (nonfinite_mismatch(got[i], want[i])) {
            return int64_t(i);
        }
    }
    return -1;
}

} // namespace loomtest
