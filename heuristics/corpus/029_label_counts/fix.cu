#include <cuda_runtime.h>

// Adds one label to per-thread counters packed four to a register (8 bits per label):
// bins 0-3 in lo, 4-7 in hi.
__device__ __forceinline__ void tally(unsigned int label, unsigned int& lo, unsigned int& hi) {
  unsigned int inc = 1u << ((label & 3u) * 8u);
  lo += (label & 4u) ? 0u : inc;
  hi += (label & 4u) ? inc : 0u;
}

__device__ __forceinline__ void unpack(unsigned int lo, unsigned int hi, unsigned int* c) {
#pragma unroll
  for (int j = 0; j < 4; j++) {
    c[j] += (lo >> (8 * j)) & 0xffu;
    c[4 + j] += (hi >> (8 * j)) & 0xffu;
  }
}

__global__ void count_private(const unsigned char* __restrict__ labels, unsigned int* __restrict__ counts, int n) {
  __shared__ unsigned int local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  unsigned int c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  unsigned int lo = 0, hi = 0;
  int stride = gridDim.x * blockDim.x;
  int words = n / 4;
  const uchar4* packed = reinterpret_cast<const uchar4*>(labels);
  int pending = 0;  // words tallied since the last unpack: at most 63 (252 labels per 8-bit field)
  for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
    uchar4 l = packed[w];
    tally(l.x & 7, lo, hi);
    tally(l.y & 7, lo, hi);
    tally(l.z & 7, lo, hi);
    tally(l.w & 7, lo, hi);
    if (++pending == 63) {
      unpack(lo, hi, c);
      lo = hi = 0;
      pending = 0;
    }
  }
  for (int i = 4 * words + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) tally(labels[i] & 7, lo, hi);
  unpack(lo, hi, c);
  // One warp reduction per bin, then one shared atomic per warp and bin.
#pragma unroll
  for (int j = 0; j < 8; j++) {
    unsigned int v = c[j];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0 && v) atomicAdd(&local[j], v);
  }
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&counts[threadIdx.x], local[threadIdx.x]);
}

extern "C" void label_counts(const unsigned char* labels, unsigned int* counts, int n, cudaStream_t stream) {
  cudaMemsetAsync(counts, 0, 8 * sizeof(unsigned int), stream);
  if (n <= 0) return;
  int blocks = (n / 4 + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 2048) blocks = 2048;
  count_private<<<blocks, 256, 0, stream>>>(labels, counts, n);
}
