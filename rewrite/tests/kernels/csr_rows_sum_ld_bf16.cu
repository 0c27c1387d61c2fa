// entry: csr_rows_sum
// arg: values in __nv_bfloat16 n_rows*ld
// arg: row_ptr in int segments+1
// arg: out out __nv_bfloat16 segments*dim
// arg: segments int 8192
// arg: dim int 128
// arg: ld int 136
// arg: n_rows int 65536
// tolerance: 2e-2 1e-2
// expect: declines vectorize: `csr_rows_sum_kernel`: each element runs a loop while `r < end`, a trip count known only at run time; coarsening would run V such loops one after another in a thread (V times fewer threads, each V times longer) while what the loop reads still moves one element at a time
// expect: applies read-only
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

// Segment sums over rows of a padded matrix (leading dimension ld >= dim, as a strided
// view hands it over): out[s, c] = sum of values[r, c] for r in row_ptr[s] .. row_ptr[s+1].
// Rows are ld apart, and nothing says ld is a multiple of a vector's width.
__global__ void csr_rows_sum_kernel(const __nv_bfloat16* values, const int* row_ptr, __nv_bfloat16* out,
                                    int segments, int dim, int ld) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (int64_t)segments * dim) return;
  const int s = (int)(idx / dim);
  const int c = (int)(idx % dim);
  const int begin = row_ptr[s];
  const int end = row_ptr[s + 1];
  float acc = 0.f;
  for (int r = begin; r < end; ++r) acc += __bfloat162float(values[(int64_t)r * ld + c]);
  out[idx] = __float2bfloat16(acc);
}

extern "C" void csr_rows_sum(const __nv_bfloat16* values, const int* row_ptr, __nv_bfloat16* out, int segments,
                             int dim, int ld, int n_rows, cudaStream_t stream) {
  (void)n_rows;
  const int64_t total = (int64_t)segments * dim;
  if (total <= 0) return;
  csr_rows_sum_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(values, row_ptr, out, segments, dim, ld);
}
