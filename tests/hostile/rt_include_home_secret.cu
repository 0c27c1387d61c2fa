// expect: build-error
// task: vector_add
// flags: --no-time
// modes: eval
// threat: secrets through the build
// mechanism: the confined build: nvcc and the host compiler read only the toolkit, the task's folders and their own build folder
// why: includes a header from the user's home folder (the test puts one there holding a canary, as a user's ~/.config or ~/.aws holds keys) and prints it at run time: the build must fail, and the canary must not reach the verdict
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#define NIGHTSHIFT_SECRET_FILE "/nonexistent/secret.h"  // the test writes its secret header's path here
#include NIGHTSHIFT_SECRET_FILE
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
  // Built: whatever the build read is in this library. Say it where a verdict shows it.
  const char* got = RT_SECRET;
  char m[600];
  snprintf(m, sizeof m, "the build read a file outside the task's folders: %.500s", got);
  for (char* p = m; *p; ++p)
    if (*p == '\n' || *p == 0) *p = ' ';
  breach(m);
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
