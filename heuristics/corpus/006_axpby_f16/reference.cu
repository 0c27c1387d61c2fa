#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void axpby_reference(const __half* x, const __half* y, __half* z, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    z[i] = __double2half(2.0 * (double)__half2float(x[i]) + 0.5 * (double)__half2float(y[i]));
}

extern "C" void axpby_f16(const __half* x, const __half* y, __half* z, int n, cudaStream_t stream) {
  if (n <= 0) return;
  axpby_reference<<<1024, 256, 0, stream>>>(x, y, z, n);
}
