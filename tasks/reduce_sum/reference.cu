// Trusted reference: per-block double partial sums, then one block sums the partials in
// double; deterministic, and rounded to float once.
#include <cuda_runtime.h>

__global__ void partial_sums(const float* x, double* partial, int n) {
  __shared__ double s[256];
  double acc = 0.0;
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) acc += x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void final_sum(const double* partial, int count, float* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    double acc = 0.0;
    for (int i = 0; i < count; ++i) acc += partial[i];
    *out = (float)acc;
  }
}

extern "C" void reduce_sum(const float* x, float* out, int n, cudaStream_t stream) {
  static double* partial = nullptr;
  const int blocks = 512;
  if (!partial) cudaMalloc(&partial, blocks * sizeof(double));
  partial_sums<<<blocks, 256, 0, stream>>>(x, partial, n);
  final_sum<<<1, 32, 0, stream>>>(partial, blocks, out);
}
