#include <cuda_runtime.h>

// One damped oscillator per element: displacement p starts at x, velocity q at 0, with the
// column's stiffness k and damping c; e and g accumulate p^2 and q^2 over the steps, and
// the output is the accumulated response energy 0.5 * (k * e + g).
// A thread advances four elements of its row together (1024 apart).
__global__ void row_damping_kernel(const float* x, const float* stiff, const float* damp, float* y, int cols, int steps) {
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  for (int j = threadIdx.x; j < cols; j += 4 * 1024) {
    float p[4], q[4], e[4], g[4], k[4], c[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      int col = j + u * 1024;
      bool ok = col < cols;
      p[u] = ok ? xr[col] : 0.0f;
      k[u] = ok ? stiff[col] : 0.0f;
      c[u] = ok ? damp[col] : 0.0f;
      q[u] = 0.0f;
      e[u] = 0.0f;
      g[u] = 0.0f;
    }
    for (int s = 0; s < steps; s++) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        q[u] = fmaf(-k[u], p[u], fmaf(-c[u], q[u], q[u]));
        p[u] = fmaf(0.1f, q[u], p[u]);
        e[u] = fmaf(p[u], p[u], e[u]);
        g[u] = fmaf(q[u], q[u], g[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      int col = j + u * 1024;
      if (col < cols) yr[col] = 0.5f * fmaf(k[u], e[u], g[u]);
    }
  }
}

extern "C" void row_damping(const float* x, const float* stiff, const float* damp, float* y, int rows, int cols, int steps,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  row_damping_kernel<<<rows, 1024, 0, stream>>>(x, stiff, damp, y, cols, steps);
}
