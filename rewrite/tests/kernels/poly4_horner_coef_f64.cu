// entry: poly4
// arg: x in double n
// arg: coef in double 5
// arg: y out double n
// arg: n long 8388608
// tolerance: 1e-12 1e-12
// expect: applies register-table: `poly4_kernel`: `coef` elements 0..5 in registers for 5 read(s)
// expect: declines cooperative
#include <cuda_runtime.h>

// A quartic by Horner's rule, its five coefficients read at constant indices for every
// element of a grid-stride loop: each trip loads all five again.
__global__ void poly4_kernel(const double* x, const double* coef, double* y, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    const double v = x[i];
    y[i] = (((coef[4] * v + coef[3]) * v + coef[2]) * v + coef[1]) * v + coef[0];
  }
}

extern "C" void poly4(const double* x, const double* coef, double* y, long n, cudaStream_t stream) {
  poly4_kernel<<<528, 256, 0, stream>>>(x, coef, y, n);
}
