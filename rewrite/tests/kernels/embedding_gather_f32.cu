// entry: embedding_forward
// arg: ids in int64_t n_tokens
// arg: table in float vocab*dim
// arg: out out float n_tokens*dim
// arg: n_tokens int 8192
// arg: vocab int 32000
// arg: dim int 512
// tolerance: 1e-6 1e-6
// expect: applies fast-divmod
// expect: declines index-width
// note: the 64-bit id is loaded from memory: narrowing it before its range check would change which ids count as out of range.
// expect: applies vectorize
// expect: applies grid-stride
// expect: applies read-only
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines cooperative
// expect: declines shuffle-reduce
// expect: declines unroll
// expect: declines intrinsics
#include <cuda_runtime.h>
#include <stdint.h>

// Embedding lookup: out[t, d] = table[ids[t], d]. Out-of-range ids (e.g. a
// padding id of -1) read row 0.
__global__ void embedding_kernel(const int64_t* ids, const float* table, float* out,
                                 int n_tokens, int vocab, int dim)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tokens * dim) return;

    int tok = i / dim;
    int d = i % dim;
    int64_t id = ids[tok];
    if (id < 0 || id >= vocab) id = 0;
    out[i] = table[id * dim + d];
}

extern "C" void embedding_forward(const int64_t* ids, const float* table, float* out,
                                  int n_tokens, int vocab, int dim, cudaStream_t stream)
{
    int total = n_tokens * dim;
    embedding_kernel<<<(total + 255) / 256, 256, 0, stream>>>(ids, table, out, n_tokens, vocab, dim);
}
