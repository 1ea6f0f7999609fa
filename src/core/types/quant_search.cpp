#include "quant_search.h"

#include <algorithm>
#include <cmath>

namespace loom::quant {

namespace {

int clamp_level(int l, int lo, int hi) {
    return std::max(lo, std::min(hi, l));
}

// The value of largest magnitude, with its sign (the first one on ties).
float signed_absmax(int n, const float * x, float & amax) {
    float max = 0.0f;
    amax      = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    return max;
}

} // namespace

float fit_symmetric(int n, int nmax, const float * x, int8_t * L, const float * w) {
    float       amax;
    const float max = signed_absmax(n, x, amax);
    if (amax < GROUP_MAX_EPS) {
        std::fill(L, L + n, int8_t(0));
        return 0.0f;
    }
    auto weight = [&](int i) { return w != nullptr ? w[i] : x[i] * x[i]; };
    // Weighted sums of x l and l^2 for the levels of inverse scale iscale.
    auto sums = [&](float iscale, float & sumlx, float & suml2, bool store) {
        sumlx = 0.0f;
        suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int   l  = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float wi = weight(i);
            if (store) {
                L[i] = int8_t(l + nmax);
            }
            sumlx += wi * x[i] * float(l);
            suml2 += wi * float(l) * float(l);
        }
    };
    float sumlx, suml2;
    sums(float(-nmax) / max, sumlx, suml2, true);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best  = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) {
            continue;
        }
        const float iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sums(iscale, sumlx, suml2, false);
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                L[i] = int8_t(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
    return scale;
}

float fit_symmetric_refined(int n, int nmax, const float * x, int8_t * L) {
    float       amax;
    const float max = signed_absmax(n, x, amax);
    if (amax < GROUP_MAX_EPS) {
        std::fill(L, L + n, int8_t(0));
        return 0.0f;
    }
    const float iscale = float(-nmax) / max;
    float       sumlx  = 0.0f;
    float       suml2  = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i]        = int8_t(l);
        const float wi = x[i] * x[i];
        sumlx += wi * x[i] * float(l);
        suml2 += wi * float(l) * float(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float wi  = x[i] * x[i];
            float       slx = sumlx - wi * x[i] * float(L[i]);
            if (slx > 0.0f) {
                float     sl2   = suml2 - wi * float(L[i]) * float(L[i]);
                const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += wi * x[i] * float(new_l);
                    sl2 += wi * float(new_l) * float(new_l);
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i]  = int8_t(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) {
            break;
        }
    }
    for (int i = 0; i < n; ++i) {
        L[i] = int8_t(L[i] + nmax);
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float fit_affine(int n, int nmax, const float * x, const float * w, uint8_t * L, float * the_min, uint8_t * Laux,
                 float rmin, float rdelta, int nstep, bool use_mad) {
    float min   = x[0];
    float max   = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        min = x[i] < min ? x[i] : min;
        max = x[i] > max ? x[i] : max;
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) {
        min = 0.0f;
    }
    if (max <= min) {
        std::fill(L, L + n, uint8_t(0));
        *the_min = -min;
        return 0.0f;
    }
    auto error = [&](const uint8_t * lv, float scale, float m) {
        float e = 0.0f;
        for (int i = 0; i < n; ++i) {
            float diff = scale * float(lv[i]) + m - x[i];
            diff       = use_mad ? std::fabs(diff) : diff * diff;
            e += w[i] * diff;
        }
        return e;
    };
    float iscale = float(nmax) / (max - min);
    float scale  = 1.0f / iscale;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax));
    }
    float best_error = error(L, scale, min);
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale      = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i]     = uint8_t(l);
            sum_l += w[i] * float(l);
            sum_l2 += w[i] * float(l) * float(l);
            sum_xl += w[i] * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min   = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            const float cur_error = error(Laux, this_scale, this_min);
            if (cur_error < best_error) {
                std::copy(Laux, Laux + n, L);
                best_error = cur_error;
                scale      = this_scale;
                min        = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

float fit_positive(int n, int nmax, const float * x, uint8_t * L, const float * w) {
    float max = 0.0f;
    for (int i = 0; i < n; ++i) {
        max = std::max(max, x[i]);
    }
    if (max < GROUP_MAX_EPS) {
        std::fill(L, L + n, uint8_t(0));
        return 0.0f;
    }
    float iscale = float(nmax) / max;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(nearest_int(iscale * x[i]));
    }
    const float scale    = 1.0f / iscale;
    float       best_mse = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * float(L[i]);
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) {
            continue;
        }
        const float iscale_is = (0.1f * float(is) + float(nmax)) / max;
        const float scale_is  = 1.0f / iscale_is;
        float       mse       = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int   l    = std::min(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * float(l);
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale   = iscale_is;
        }
    }
    float sumlx = 0.0f;
    float suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        L[i]        = uint8_t(l);
        sumlx += w[i] * x[i] * float(l);
        suml2 += w[i] * float(l) * float(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - w[i] * x[i] * float(L[i]);
            float sl2 = suml2 - w[i] * float(L[i]) * float(L[i]);
            if (slx > 0.0f && sl2 > 0.0f) {
                const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w[i] * x[i] * float(new_l);
                    sl2 += w[i] * float(new_l) * float(new_l);
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i]  = uint8_t(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0) {
            break;
        }
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

} // namespace loom::quant
