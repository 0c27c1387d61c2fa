#include <cuda_runtime.h>

#define HOPS 256
#define PER_THREAD 8

__global__ void walk_kernel(const int* next, const float* val, float* out, int chains) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < PER_THREAD; k++) {
    int c = t * PER_THREAD + k;
    if (c >= chains) return;
    int node = c;
    float acc = 0.0f;
    for (int h = 0; h < HOPS; h++) {
      acc += val[node];
      node = next[node];
    }
    out[c] = acc;
  }
}

extern "C" void chain_walk(const int* next, const float* val, float* out, int nodes, int chains, cudaStream_t stream) {
  if (chains <= 0) return;
  int threads = (chains + PER_THREAD - 1) / PER_THREAD;
  walk_kernel<<<(threads + 31) / 32, 32, 0, stream>>>(next, val, out, chains);
}
