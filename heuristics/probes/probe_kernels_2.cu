// Probe kernels, second set (issue 12): each plants one bottleneck the first set's tools
// misjudged. Captured with scripts/capture-probes.sh on an H100; the expected top
// diagnosis per kernel is in tests/fixtures/h100/probes2/README.md. The prescribed fix
// of each is in probe_fixes_2.cu, timed against it by the same script.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1);} } while(0)

struct Record { float field; float rest[15]; };  // 64 bytes, one 4-byte field used

// 1. One 4-byte field of each 64-byte record: DRAM busy, 7/8 of every sector wasted.
extern "C" __global__ void field_of_record(const Record* __restrict__ r, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = r[i].field * 2.f;
}

// 2. A byte-wise copy: 8-bit loads and stores.
extern "C" __global__ void copy_bytes(const unsigned char* __restrict__ x, unsigned char* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i];
}

// 3. Shared-memory traffic between barriers: the LSU pipe is the busiest.
extern "C" __global__ void smem_stencil_rounds(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float s[2][256 + 2];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[0][t + 1] = i < n ? x[i] : 0.f;
  if (t == 0) { s[0][0] = 0.f; s[0][257] = 0.f; s[1][0] = 0.f; s[1][257] = 0.f; }
  __syncthreads();
  int cur = 0;
  for (int r = 0; r < 64; ++r) {
    s[cur ^ 1][t + 1] = 0.25f * s[cur][t] + 0.5f * s[cur][t + 1] + 0.25f * s[cur][t + 2];
    __syncthreads();
    cur ^= 1;
  }
  if (i < n) y[i] = s[cur][t + 1];
}

// 4. Accurate math: expf/logf/powf compile to FMA-pipe range reduction and polynomials.
extern "C" __global__ void accurate_math(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i] + 1.f;
    for (int k = 0; k < 16; ++k) v = powf(logf(v + 1.5f), 1.25f) + expf(-v);
    y[i] = v;
  }
}

// 5. A weighted shared-memory histogram with every lane on a few bins: float atomics on
// shared memory serialize on the hot addresses.
extern "C" __global__ void shared_hist_hot(const float4* __restrict__ v, float* __restrict__ hist, int n4) {
  __shared__ float h[256];
  h[threadIdx.x] = 0.f;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    float4 q = v[i];
    atomicAdd(&h[(int)(q.x * 1024.f) & 3], q.x);
    atomicAdd(&h[(int)(q.y * 1024.f) & 3], q.y);
    atomicAdd(&h[(int)(q.z * 1024.f) & 3], q.z);
    atomicAdd(&h[(int)(q.w * 1024.f) & 3], q.w);
  }
  __syncthreads();
  if (h[threadIdx.x] != 0.f) atomicAdd(&hist[threadIdx.x], h[threadIdx.x]);
}

// 6. Dependent loads: each thread walks four linked lists one after the other, every
// address coming from the previous load (one load in flight per thread).
extern "C" __global__ void pointer_chase(const int* __restrict__ next, int* __restrict__ out, int lists, int steps) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * t + 3 < lists) {
    int acc = 0;
    for (int l = 0; l < 4; ++l) {
      int p = 4 * t + l;
      for (int s = 0; s < steps; ++s) p = next[p];
      acc += p;
    }
    out[t] = acc;
  }
}

// 7. A shared-memory tiled FFMA GEMM without register tiling (one output per thread).
extern "C" __global__ void gemm_tiled_1x1(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int N) {
  __shared__ float As[16][16], Bs[16][17];
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < N; k0 += 16) {
    As[threadIdx.y][threadIdx.x] = A[(size_t)row * N + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(size_t)(k0 + threadIdx.y) * N + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[(size_t)row * N + col] = acc;
}

// 8. Clean: a float4 copy near peak bandwidth (no high-severity diagnosis expected).
extern "C" __global__ void clean_copy_vec4(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n4) y[i] = x[i];
}

#ifndef PROBE_NO_MAIN
int main() {
  const int n = 1 << 24, N = 2048;
  Record* rec; float *x, *y, *A, *B, *C; unsigned char *bx, *by; int *vi, *hist, *next, *out;
  CK(cudaMalloc(&rec, (size_t)n * sizeof(Record)));
  CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, n * 4));
  CK(cudaMalloc(&bx, n)); CK(cudaMalloc(&by, n));
  CK(cudaMalloc(&vi, n * 4)); CK(cudaMalloc(&hist, 256 * 4)); CK(cudaMalloc(&next, n * 4)); CK(cudaMalloc(&out, n * 4));
  CK(cudaMalloc(&A, N * N * 4)); CK(cudaMalloc(&B, N * N * 4)); CK(cudaMalloc(&C, N * N * 4));
  std::vector<float> hx(n); for (int i = 0; i < n; ++i) hx[i] = (float)((i * 2654435761u) % 1000) / 1000.f;
  std::vector<int> hn(n); for (int i = 0; i < n; ++i) hn[i] = (int)(((long long)i * 1103515245 + 12345) % n);
  CK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(A, hx.data(), N * N * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(B, hx.data(), N * N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(vi, hn.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(next, hn.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(rec, 0x3f, (size_t)n * sizeof(Record))); CK(cudaMemset(bx, 7, n)); CK(cudaMemset(hist, 0, 1024));
  dim3 b256(256), g(n / 256);
  field_of_record<<<g, b256>>>(rec, y, n);
  copy_bytes<<<g, b256>>>(bx, by, n);
  smem_stencil_rounds<<<g, b256>>>(x, y, n);
  accurate_math<<<g, b256>>>(x, y, n);
  shared_hist_hot<<<1024, b256>>>((const float4*)x, (float*)hist, n / 4);
  pointer_chase<<<264, 64>>>(next, out, 264 * 64 * 4, 256);
  gemm_tiled_1x1<<<dim3(N / 16, N / 16), dim3(16, 16)>>>(A, B, C, N);
  clean_copy_vec4<<<n / 4 / 256, b256>>>((float4*)x, (float4*)y, n / 4);
  CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  printf("probe kernels (set 2) ran\n");
  return 0;
}
#endif
