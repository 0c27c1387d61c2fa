// entry: launch_add_f32
// arg: a in float n
// arg: b in float n
// arg: c out float n
// arg: n int 1048576
// tolerance: 1e-6 1e-6
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies block-knob
// expect: applies read-only
// expect: applies launch-bounds
// expect: declines index-width
// expect: declines fast-divmod
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines intrinsics
// expect: declines unroll
// expect: declines row-strip: `add_f32` does not read `blockIdx.y`: a 1-D grid has no rows of blocks to strip
// expect: applies coarsen
// expect: declines reciprocal: no float division inside a loop by a value that holds over it (a `const float` local, a float parameter the function only reads, or a float literal)
#include <cuda_runtime.h>

// Plain elementwise add, one element per thread: c = a + b.
__global__ void add_f32(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

extern "C" void launch_add_f32(const float* a, const float* b, float* c, int n, cudaStream_t stream)
{
    add_f32<<<(n + 255) / 256, 256, 0, stream>>>(a, b, c, n);
}
