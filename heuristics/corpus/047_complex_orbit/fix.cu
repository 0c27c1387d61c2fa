#include <cuda_runtime.h>

// c and z hold n complex numbers, interleaved (re, im). Each point's orbit starts at 0 and
// follows z <- 0.5 z^2 + c with c scaled by 0.35 (|c| < 0.5), so |z| stays below 1.
__global__ void complex_orbit_points(const float* __restrict__ c, float* __restrict__ z, int n, int iters) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  int i = 2 * k;

  float cr = 0.35f * c[i], ci = 0.35f * c[i + 1];
  float re = 0.0f, im = 0.0f;
  for (int t = 0; t < iters; t++) {
    float nr = fmaf(re, 0.5f * re, fmaf(im, -0.5f * im, cr));
    im = fmaf(re, im, ci);
    re = nr;
  }
  z[i] = re;
  z[i + 1] = im;
}

extern "C" void complex_orbit(const float* c, float* z, int n, int iters, cudaStream_t stream) {
  if (n <= 0) return;
  complex_orbit_points<<<(n + 255) / 256, 256, 0, stream>>>(c, z, n, iters);
}
