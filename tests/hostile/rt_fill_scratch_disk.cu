// expect: resource-leak
// task: vector_add
// flags: --no-time
// modes: eval
// threat: denial and blame
// mechanism: a quota on the scratch folder: the judge watches it (64 MiB, 100k entries) and ends a worker past it as a resource leak
// why: writes 2 GiB into its scratch folder in files under the 256 MiB file-size limit (enough to fill a runtime tmpfs, and, repeated, any disk), removes them and computes the right answer: the quota stops it early
#include <cuda_runtime.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
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
  static char block[1 << 20];
  long long total = 0;
  bool full = false;
  for (int f = 0; f < 16 && !full; ++f) {
    char name[32];
    snprintf(name, sizeof name, "fill-%d", f);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) break;
    for (int i = 0; i < 128; ++i) {
      if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
        full = true;
        break;
      }
      total += sizeof block;
    }
    close(fd);
  }
  for (int f = 0; f < 16; ++f) {
    char name[32];
    snprintf(name, sizeof name, "fill-%d", f);
    unlink(name);
  }
  if (total >= (2LL << 30)) breach("wrote 2 GiB into its scratch folder: no quota");
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
