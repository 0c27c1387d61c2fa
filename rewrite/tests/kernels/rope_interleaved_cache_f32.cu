// entry: rope_interleaved_f32
// arg: x inout float tokens*heads*2*half_dim
// arg: cos_cache in float tokens*half_dim
// arg: sin_cache in float tokens*half_dim
// arg: tokens int 2048
// arg: heads int 16
// arg: half_dim int 64
// tolerance: 1e-5 1e-6
// expect: applies fast-divmod
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines intrinsics
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines index-width
#include <cuda_runtime.h>

// Rotary embedding (GPT-J / interleaved layout), in place on x[tokens, heads, 2*half_dim].
// Each thread rotates one (even, odd) pair using precomputed cos/sin tables.
__global__ void rope_interleaved_kernel(float* x, const float* cos_cache, const float* sin_cache,
                                        int tokens, int heads, int half_dim)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;   // pair index
    int num_pairs = tokens * heads * half_dim;
    if (p < num_pairs) {
        int j = p % half_dim;
        int t = p / (heads * half_dim);
        float c = cos_cache[t * half_dim + j];
        float s = sin_cache[t * half_dim + j];
        float x0 = x[2 * p];
        float x1 = x[2 * p + 1];
        x[2 * p] = x0 * c - x1 * s;
        x[2 * p + 1] = x0 * s + x1 * c;
    }
}

extern "C" void rope_interleaved_f32(float* x, const float* cos_cache, const float* sin_cache,
                                     int tokens, int heads, int half_dim, cudaStream_t stream)
{
    int num_pairs = tokens * heads * half_dim;
    rope_interleaved_kernel<<<(num_pairs + 255) / 256, 256, 0, stream>>>(x, cos_cache, sin_cache,
                                                                         tokens, heads, half_dim);
}
