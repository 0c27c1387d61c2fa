// Segmented sum of bf16 rows given segment lengths (Caffe2's SparseLengthsSum, an
// EmbeddingBag in sum mode over pre-gathered rows, the sum aggregation of a GNN layer
// over a CSR adjacency): the rows of segment s are packed after those of segment s - 1,
//   offsets[0] = 0, offsets[s + 1] = offsets[s] + lengths[s]
//   out[s, :] = sum over r in [offsets[s], offsets[s + 1]) of values[r, :]
// in fp32, rounded to bf16 once. The offsets are returned too.
// Two kernels: a one-block scan of the lengths into offsets, then one thread per output
// element (segment, column), which walks the rows of its segment.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define SCAN_THREADS 1024

// Exclusive scan of lengths into offsets, one tile of SCAN_THREADS lengths at a time
// (Hillis-Steele in shared memory), carrying the running total across tiles.
__global__ void lengths_to_offsets_kernel(const int* lengths, int* offsets, int segments) {
  __shared__ int buf[SCAN_THREADS];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < segments; base += SCAN_THREADS) {
    int i = base + threadIdx.x;
    int len = i < segments ? lengths[i] : 0;
    buf[threadIdx.x] = len;
    __syncthreads();
    for (int d = 1; d < SCAN_THREADS; d <<= 1) {
      int add = threadIdx.x >= d ? buf[threadIdx.x - d] : 0;
      __syncthreads();
      buf[threadIdx.x] += add;
      __syncthreads();
    }
    if (i < segments) offsets[i] = carry + buf[threadIdx.x] - len;
    __syncthreads();
    if (threadIdx.x == SCAN_THREADS - 1) carry += buf[threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.x == 0) offsets[segments] = carry;
}

__global__ void segment_sum_kernel(const __nv_bfloat16* values, const int* offsets, __nv_bfloat16* out,
                                   int segments, int dim) {
  int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (int64_t)segments * dim) return;
  int s = (int)(idx / dim);
  int c = (int)(idx % dim);

  int start = offsets[s];
  int end = offsets[s + 1];
  float acc = 0.0f;
  for (int r = start; r < end; ++r) {
    acc += __bfloat162float(values[(int64_t)r * dim + c]);
  }
  out[idx] = __float2bfloat16(acc);
}

extern "C" void segment_sum(const __nv_bfloat16* values, const int* lengths, __nv_bfloat16* out, int* offsets,
                            int segments, int dim, cudaStream_t stream) {
  if (segments < 0) return;
  lengths_to_offsets_kernel<<<1, SCAN_THREADS, 0, stream>>>(lengths, offsets, segments);
  int64_t total = (int64_t)segments * dim;
  if (total <= 0) return;
  const int threads = 256;
  int64_t blocks = (total + threads - 1) / threads;
  segment_sum_kernel<<<(unsigned)blocks, threads, 0, stream>>>(values, offsets, out, segments, dim);
}
