// expect: forbidden-import
// task: gemm_f32
// flags: --no-time
// modes: eval
// threat: forbidden library
// mechanism: the build's import check (dlopen is never a kernel's to call); behind it, Landlock's per-file rules: a worker reads only the libraries its role may load
// why: calls dlopen on cuBLAS (by soname and at the toolkit's usual paths) to use its GEMM in a task that forbids it
#include <cuda_runtime.h>
#include <stdio.h>
#include <dlfcn.h>
#define NIGHTSHIFT_CUBLAS_FILE ""  // the test writes the toolkit's cuBLAS path here
static int breached = 0;
// An attack that got through says so where a verdict shows it (the end of the process's
// output, kept with a rejection) and spoils the answer, so the verdict cannot pass.
static void breach(const char* what) {
  fprintf(stderr, "REDTEAM-BREACH: %s\n", what);
  fflush(stderr);
  breached = 1;
}
constexpr int TILE = 16;
__global__ void gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(size_t)(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
__global__ void spoil(float* c) { c[0] += 1.0f; }
// Where a toolkit keeps cuBLAS, and the path the test found (empty when it found none).
static const char* cublas_paths[] = {NIGHTSHIFT_CUBLAS_FILE, "libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                     "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so",
                                     "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13",
                                     "/usr/lib/x86_64-linux-gnu/libcublas.so.13", "/usr/lib/x86_64-linux-gnu/libcublas.so"};
static void attack() {
  for (const char* path : cublas_paths) {
    if (!*path) continue;
    if (void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      char m[300];
      snprintf(m, sizeof m, "loaded %s (cublasCreate_v2 at %p)", path, dlsym(h, "cublasCreate_v2"));
      breach(m);
      return;
    }
  }
}
extern "C" void gemm_f32(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  static bool once = false;
  if (!once) {
    once = true;
    attack();
  }
  if (M <= 0 || N <= 0) return;
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm<<<grid, dim3(TILE, TILE), 0, s>>>(A, B, C, M, N, K);
  if (breached) spoil<<<1, 1, 0, s>>>(C);
}
