#version 450
// dst = src0 x src1 in tiles of 32 rows of src0 by 32 columns of src1, the
// shared dimension taken 32 at a time through shared memory. 16 x 16
// invocations, each computing 2 x 2 results. Workgroup (x, y, z): tile of
// rows, tile of columns, batch (i12 + ne12 * i13).
#include "common.glsl"
#include "matmul.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

shared float As[32][33]; // [row][k]
shared float Bs[32][33]; // [column][k]

void main() {
    const uint M = P.ne[1], N = P.ne[5], K = P.ne[0];
    const uint r0 = gl_WorkGroupID.x * 32u, c0 = gl_WorkGroupID.y * 32u;
    const uint i12 = gl_WorkGroupID.z % P.ne[6], i13 = gl_WorkGroupID.z / P.ne[6];
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * 16u + tx;

    float acc[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
    for (uint k0 = 0u; k0 < K; k0 += 32u) {
        // 1024 values of each tile, 4 per invocation; zeros outside.
        [[unroll]] for (uint l = 0u; l < 4u; ++l) {
            const uint e  = tid + l * 256u;
            const uint rr = e / 32u, kk = e % 32u;
            const uint k  = k0 + kk;
            As[rr][kk] = (r0 + rr < M && k < K) ? a_elem(a_row(r0 + rr, i12, i13), k) : 0.0;
            Bs[rr][kk] = (c0 + rr < N && k < K) ? s1_f32[at(1u, k, c0 + rr, i12, i13) >> 2] : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < 32u; ++kk) {
            const float a0 = As[tx][kk], a1 = As[tx + 16u][kk];
            const float b0 = Bs[ty][kk], b1 = Bs[ty + 16u][kk];
            acc[0][0] += a0 * b0;
            acc[0][1] += a0 * b1;
            acc[1][0] += a1 * b0;
            acc[1][1] += a1 * b1;
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 2u; ++i) {
        [[unroll]] for (uint j = 0u; j < 2u; ++j) {
            const uint r = r0 + tx + 16u * i, c = c0 + ty + 16u * j;
            if (r < M && c < N) {
                d_f32[at(3u, r, c, i12, i13) >> 2] = acc[i][j];
            }
        }
    }
}
