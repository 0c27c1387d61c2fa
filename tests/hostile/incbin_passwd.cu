// expect: build-error
// task: vector_add
// why: embeds /etc/passwd in its library with .incbin (asm) and prints it from the launcher; the confined build reads no /etc file but the loader's cache, so the assembler is refused
#include <stdio.h>
#include <cuda_runtime.h>
asm(".section .rodata\n.global nightshift_stolen\nnightshift_stolen:\n.incbin \"/etc/passwd\"\n.byte 0\n.text");
extern "C" const char nightshift_stolen[];
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static int printed = 0;
  if (!printed++) fprintf(stderr, "stolen: %.200s\n", nightshift_stolen);
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
