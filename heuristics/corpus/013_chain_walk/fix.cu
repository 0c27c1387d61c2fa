#include <cuda_runtime.h>

#define HOPS 256
#define PER_THREAD 8

__global__ void walk_lockstep(const int* __restrict__ next, const float* __restrict__ val, float* __restrict__ out, int chains) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int node[PER_THREAD];
  float acc[PER_THREAD];
#pragma unroll
  for (int k = 0; k < PER_THREAD; k++) {
    int c = t * PER_THREAD + k;
    node[k] = c < chains ? c : 0;
    acc[k] = 0.0f;
  }
  for (int h = 0; h < HOPS; h++) {
#pragma unroll
    for (int k = 0; k < PER_THREAD; k++) {
      acc[k] += val[node[k]];
      node[k] = next[node[k]];
    }
  }
#pragma unroll
  for (int k = 0; k < PER_THREAD; k++) {
    int c = t * PER_THREAD + k;
    if (c < chains) out[c] = acc[k];
  }
}

extern "C" void chain_walk(const int* next, const float* val, float* out, int nodes, int chains, cudaStream_t stream) {
  if (chains <= 0) return;
  int threads = (chains + PER_THREAD - 1) / PER_THREAD;
  walk_lockstep<<<(threads + 31) / 32, 32, 0, stream>>>(next, val, out, chains);
}
