// expect: out-of-bounds-write
// expect.diagnose: passed
// task: vector_add
// flags: --no-time
// modes: eval sanitize diagnose
// threat: sanitizer evasion
// mechanism: checks that need no cooperation: the guard zones around every buffer, read by the judge after every call (a sanitizer can be told apart, docs/threat-model.md)
// why: behaves only when its environment names a sanitizer or a profiler (LD_PRELOAD or CUDA_INJECTION64_PATH, by getenv or in /proc/self/environ); otherwise writes one element past the end of its output
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void past_end(float* c, int n) { c[n] = 0.0f; }
static bool watched() {
  if (getenv("LD_PRELOAD") || getenv("CUDA_INJECTION64_PATH")) return true;
  static char env[1 << 16];
  int fd = open("/proc/self/environ", O_RDONLY);
  ssize_t got = fd >= 0 ? read(fd, env, sizeof env - 1) : -1;
  if (fd >= 0) close(fd);
  for (ssize_t i = 0; i < got; i += strlen(env + i) + 1)
    if (!strncmp(env + i, "LD_PRELOAD=", 11) || !strncmp(env + i, "CUDA_INJECTION64_PATH=", 22)) return true;
  return false;
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static int seen = -1;
  if (seen < 0) seen = watched();
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (!seen && n > 0) past_end<<<1, 1, 0, s>>>(c, n);
}
