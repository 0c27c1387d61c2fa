#include <cuda_runtime.h>

__global__ void complex_orbit_reference(const float* c, float* z, int n, int iters) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    float cr = 0.35f * c[2 * k], ci = 0.35f * c[2 * k + 1];
    float re = 0.0f, im = 0.0f;
    for (int t = 0; t < iters; t++) {
      float nr = fmaf(re, 0.5f * re, fmaf(im, -0.5f * im, cr));
      im = fmaf(re, im, ci);
      re = nr;
    }
    z[2 * k] = re;
    z[2 * k + 1] = im;
  }
}

extern "C" void complex_orbit(const float* c, float* z, int n, int iters, cudaStream_t stream) {
  if (n <= 0) return;
  complex_orbit_reference<<<1024, 128, 0, stream>>>(c, z, n, iters);
}
