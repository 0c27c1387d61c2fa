// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval sanitize
// threat: escape to the host
// mechanism: the worker hides its own /proc/self/environ (sandbox branch): clearenv() empties environ, not the process's original environment block; under a tool it names the tool's injection libraries
// why: reads its own /proc/self/environ and its threads', and getenv's LD_PRELOAD and CUDA_INJECTION64_PATH; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int breached = 0;
// An attack that got through says so where a verdict shows it (the end of the process's
// output, kept with a rejection) and spoils the answer, so the verdict cannot pass.
static void breach(const char* what) {
  fprintf(stderr, "REDTEAM-BREACH: %s\n", what);
  fflush(stderr);
  breached = 1;
}
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void spoil(float* c) { c[0] += 1.0f; }
static void attack() {
  char buf[4096];
  int fd = open("/proc/self/environ", O_RDONLY);
  ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (got > 0) {
    for (ssize_t i = 0; i < got; ++i)
      if (!buf[i]) buf[i] = ' ';
    buf[got] = 0;
    char m[600];
    snprintf(m, sizeof m, "read /proc/self/environ: %.400s", buf);
    breach(m);
  }
  if (getenv("LD_PRELOAD") || getenv("CUDA_INJECTION64_PATH")) breach("its environment names a tool's injection library");
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool once = false;
  if (!once) {
    once = true;
    attack();
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (breached && n > 0) spoil<<<1, 1, 0, s>>>(c);
}
