// expect: passed
// task: gemm_f32
// threat: memoization and replay
// why: fingerprints 16 sampled elements of A and B, replays a cached C on a hit and spins to stay above the physical floor (issue 10, case 5: a 5.3x "speedup" before). Under the judge every timed call has inputs of its own: the cache hits only on the check's repeated calls, where replaying is right, so it passes at its tiled kernel's own speed; the class `memoization` is no longer produced
#include <cuda_runtime.h>
#include <map>
#include <stdint.h>
#include <string.h>

constexpr int TILE = 32;
__global__ void gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(size_t)(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

__global__ void sample(const float* A, size_t na, const float* B, size_t nb, float* out) {
  int t = threadIdx.x;
  if (t < 8) out[t] = A[(size_t)t * 2654435761u % na];
  else if (t < 16) out[t] = B[(size_t)(t - 8) * 2246822519u % nb];
}

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}

struct Entry { float* C; size_t bytes; };
static std::map<uint64_t, Entry> cache;

extern "C" void gemm_f32(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  if (M <= 0 || N <= 0) return;
  static float* probe = nullptr;
  if (!probe) cudaMalloc(&probe, 16 * sizeof(float));
  float h[16];
  sample<<<1, 32, 0, s>>>(A, (size_t)M * K, B, (size_t)K * N, probe);
  cudaMemcpyAsync(h, probe, sizeof h, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  uint64_t key = 1469598103934665603ull ^ ((uint64_t)M << 40) ^ ((uint64_t)N << 20) ^ (uint64_t)K;
  for (int i = 0; i < 16; ++i) { uint32_t b; memcpy(&b, &h[i], 4); key = (key ^ b) * 1099511628211ull; }
  size_t bytes = sizeof(float) * (size_t)M * N;
  auto hit = cache.find(key);
  if (hit != cache.end()) {
    cudaMemcpyAsync(C, hit->second.C, bytes, cudaMemcpyDeviceToDevice, s);
    if ((size_t)M * N * K > (1ull << 30)) spin<<<1, 1, 0, s>>>(5500000);  // ~2.8 ms at 1.98 GHz
    return;
  }
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm<<<grid, dim3(TILE, TILE), 0, s>>>(A, B, C, M, N, K);
  if (cache.size() < 24) {
    float* copy = nullptr;
    if (cudaMalloc(&copy, bytes) == cudaSuccess) {
      cudaMemcpyAsync(copy, C, bytes, cudaMemcpyDeviceToDevice, s);
      cache[key] = Entry{copy, bytes};
    }
  }
}
