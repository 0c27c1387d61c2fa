// expect: build-error
// task: vector_add
// flags: --no-time
// modes: eval
// threat: secrets through the build
// mechanism: the confined build: nvcc and the host compiler read only the toolkit, the task's folders and their own build folder
// why: embeds /etc/shadow in its library with the assembler's .incbin (run as root, the build can read it) and prints it at run time: the build must fail
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#ifndef __CUDA_ARCH__
asm(".section .rodata\n.global rt_shadow\nrt_shadow:\n.incbin \"/etc/shadow\"\n.byte 0\n.previous");
#endif
extern "C" const char rt_shadow[];
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
  const char* got = rt_shadow;
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
