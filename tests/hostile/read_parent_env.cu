// expect: crash
// task: vector_add
// threat: escape to the host
// why: reads the orchestrator's environment through /proc/<ppid>/environ, prints the lines with KEY and aborts: no key may reach the verdict (issue 10, case 4)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
  FILE* f = fopen(path, "r");
  if (!f) { fprintf(stderr, "hostile: cannot open %s\n", path); abort(); }
  static char buf[1 << 20]; size_t len = fread(buf, 1, sizeof buf - 1, f); fclose(f);
  for (size_t i = 0; i < len;) { const char* e = buf + i; if (strstr(e, "KEY")) fprintf(stderr, "hostile: %s\n", e); i += strlen(e) + 1; }
  abort();
}
