// entry: rmsnorm_f32
// arg: x in float rows*hidden
// arg: weight in float hidden
// arg: y out float rows*hidden
// arg: rows int 4096
// arg: hidden int 1024
// tolerance: 1e-3 1e-4
// expect: applies cooperative
// expect: applies intrinsics
// expect: applies unroll
// expect: applies block-knob
// expect: applies launch-bounds
// expect: applies read-only
// expect: declines shuffle-reduce
// expect: declines vectorize
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines row-cache: `rmsnorm_rows_kernel` runs its loops in one thread, one element a step (`for (int j = 0; j < hidden; ++j)`), none strided across a block or a group's lanes (`cooperative` strides a thread-per-row loop across lanes)
#include <cuda_runtime.h>

// RMSNorm (LLaMA style), one thread per row: a sum-of-squares loop, then a
// loop writing the normalized, scaled row.
__global__ void rmsnorm_rows_kernel(const float* x, const float* weight, float* y, int rows, int hidden)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;

    float ss = 0.0f;
    for (int j = 0; j < hidden; ++j) {
        float v = x[row * hidden + j];
        ss += v * v;
    }
    float inv_rms = 1.0f / sqrtf(ss / (float)hidden + 1e-6f);

    for (int j = 0; j < hidden; ++j) {
        y[row * hidden + j] = x[row * hidden + j] * inv_rms * weight[j];
    }
}

extern "C" void rmsnorm_f32(const float* x, const float* weight, float* y, int rows, int hidden,
                            cudaStream_t stream)
{
    rmsnorm_rows_kernel<<<(rows + 63) / 64, 64, 0, stream>>>(x, weight, y, rows, hidden);
}
