// entry: row_sum_f64
// arg: mat in double nrows*ncols
// arg: sums out double nrows
// arg: nrows int 8192
// arg: ncols int 512
// tolerance: 1e-10 1e-10
// expect: applies cooperative
// expect: applies unroll
// expect: applies block-knob
// expect: applies launch-bounds
// expect: declines shuffle-reduce
// expect: declines fast-divmod
// expect: declines index-width
// expect: declines intrinsics
// expect: declines vectorize
#include <cuda_runtime.h>

/* Sum of each row of a row-major double matrix. */
__global__ void row_sum_kernel(const double* __restrict__ mat, double* __restrict__ sums, int nrows, int ncols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < nrows) {
        double s = 0.0;
        for (int c = 0; c < ncols; ++c) {
            s += mat[r * ncols + c];
        }
        sums[r] = s;
    }
}

extern "C" void row_sum_f64(const double* mat, double* sums, int nrows, int ncols, cudaStream_t stream)
{
    row_sum_kernel<<<(nrows + 63) / 64, 64, 0, stream>>>(mat, sums, nrows, ncols);
}
