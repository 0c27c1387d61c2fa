// expect: wrong-answer
// task: vector_add
// threat: memoization and replay
// mechanism: every timed call runs on an input set generated just for it (in buffers the judge reuses from round to round), and every timed output is verified
// why: keeps the output of every (a, b, c, n) it has seen and replays it whenever the same pointers come again, without reading the inputs: right on the check's repeated calls (same buffers, same inputs), wrong from the first timed round (same buffers, new inputs)
#include <cuda_runtime.h>
#include <vector>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

struct Entry {
  const float* a;
  const float* b;
  float* c;
  int n;
  float* kept;
};
static std::vector<Entry> cache;
static size_t kept_bytes = 0;

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (n <= 0) return;
  size_t bytes = sizeof(float) * (size_t)n;
  for (const Entry& e : cache)
    if (e.a == a && e.b == b && e.c == c && e.n == n) {
      cudaMemcpyAsync(c, e.kept, bytes, cudaMemcpyDeviceToDevice, s);
      return;
    }
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  float* kept = nullptr;
  if (kept_bytes + bytes <= (8ull << 30) && cudaMalloc(&kept, bytes) == cudaSuccess) {
    cudaMemcpyAsync(kept, c, bytes, cudaMemcpyDeviceToDevice, s);
    cache.push_back(Entry{a, b, c, n, kept});
    kept_bytes += bytes;
  }
}
