#version 450
// Rotary position embedding, one invocation per pair of values of src0.
// Pair i < n_dims/2 of a row (values 2i, 2i+1 in normal mode; i, i + n_dims/2
// in NeoX mode) turns by theta_i = pos * theta_scale^i (the power built by
// repeated multiplication, as the CPU does), divided by the pair's
// frequency factor (src2) when there is one, with YaRN's blend between the
// interpolated and extrapolated angle. Pairs past n_dims are copied.
// ip[0] n_dims, ip[1] 1 for NeoX, ip[2] 1 with frequency factors;
// fp[0] freq_scale, fp[1] ext_factor, fp[2] mscale, fp[3] theta_scale,
// fp[4], fp[5] YaRN's corrected dimensions. src1 holds the I32 positions.
#include "common.glsl"

layout(local_size_x = 256) in;

void main() {
    const uint g = group_index() * 256u + gl_LocalInvocationID.x;
    if (g >= P.n) {
        return;
    }
    const uint half_ne0 = P.ne[0] / 2u;
    const uint p  = g % half_ne0;
    const uint r  = g / half_ne0;
    const uint i1 = r % P.ne[1], i2 = r / P.ne[1] % P.ne[2], i3 = r / (P.ne[1] * P.ne[2]);
    const uint n_dims = P.ip[0];
    const uint half_d = n_dims / 2u;

    if (p >= half_d) {
        const uint j = 2u * p;
        store_d(at(3u, j, i1, i2, i3), load_s0(at(0u, j, i1, i2, i3)));
        store_d(at(3u, j + 1u, i1, i2, i3), load_s0(at(0u, j + 1u, i1, i2, i3)));
        return;
    }
    const uint j     = P.ip[1] != 0u ? p : 2u * p;
    const uint other = P.ip[1] != 0u ? half_d : 1u;

    const int pos        = int(s1_u32[(P.off[1] + i2 * P.nb[4]) >> 2]);
    float     theta_base = float(pos);
    for (uint k = 0u; k < p; ++k) {
        theta_base *= P.fp[3];
    }
    const float ff           = P.ip[2] != 0u ? s2_f32[(P.off[2] + p * P.nb[8]) >> 2] : 1.0;
    const float theta_extrap = theta_base / ff;
    const float theta_interp = P.fp[0] * theta_extrap;
    float       theta        = theta_interp;
    if (P.fp[1] != 0.0) {
        const float y    = (float(p) - P.fp[4]) / max(0.001, P.fp[5] - P.fp[4]);
        const float ramp = (1.0 - min(1.0, max(0.0, y))) * P.fp[1];
        theta            = theta_interp * (1.0 - ramp) + theta_extrap * ramp;
    }
    const float c = cos(theta) * P.fp[2];
    const float s = sin(theta) * P.fp[2];

    const float x0 = load_s0(at(0u, j, i1, i2, i3));
    const float x1 = load_s0(at(0u, j + other, i1, i2, i3));
    store_d(at(3u, j, i1, i2, i3), x0 * c - x1 * s);
    store_d(at(3u, j + other, i1, i2, i3), x0 * s + x1 * c);
}
