// expect: passed
// max-speedup: 1.04
// task: vector_add
// threat: memoization and replay
// mechanism: every timed call runs on an input set generated just for it from a seed the judge keeps: a cache keyed by content never hits while the clock runs
// why: hashes the first KiB of each input (read back to the host) with the size and replays a kept output on a hit; it hits on the check's repeated calls (where replaying is right) and never on a timed call, so it passes at its honest speed (slower than the baseline, for the read-back): a cache that paid would claim up to 1.5x
#include <cuda_runtime.h>
#include <map>
#include <stdint.h>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static std::map<uint64_t, float*> cache;
static size_t kept_bytes = 0;

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ ((const unsigned char*)p)[i]) * 1099511628211ull;
  return h;
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n <= 0) return;
  size_t bytes = sizeof(float) * (size_t)n;
  size_t probe = n < 256 ? bytes : 1024;
  static float head[2][256];
  cudaMemcpyAsync(head[0], a, probe, cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(head[1], b, probe, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  uint64_t key = fnv(fnv(fnv(1469598103934665603ull, &n, sizeof n), head[0], probe), head[1], probe);
  auto hit = cache.find(key);
  if (hit != cache.end()) {
    cudaMemcpyAsync(c, hit->second, bytes, cudaMemcpyDeviceToDevice, s);
    return;
  }
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  float* kept = nullptr;
  if (kept_bytes + bytes <= (4ull << 30) && cudaMalloc(&kept, bytes) == cudaSuccess) {
    cudaMemcpyAsync(kept, c, bytes, cudaMemcpyDeviceToDevice, s);
    cache[key] = kept;
    kept_bytes += bytes;
  }
}
