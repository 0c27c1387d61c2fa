// expect: input-mutation
// expect.diagnose: passed
// task: vector_add
// flags: --no-time
// modes: eval sanitize diagnose
// threat: sanitizer evasion
// mechanism: checks that need no cooperation: the judge reads every input back after every call
// why: behaves only when a loaded object's name says sanitizer, injection, cupti or nvperf (dl_iterate_phdr); otherwise uses its first input as scratch space and leaves it changed
#include <cuda_runtime.h>
#include <link.h>
#include <string.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void scribble(float* a) { a[0] = -a[0]; }
static int tool_object(dl_phdr_info* info, size_t, void*) {
  const char* n = info->dlpi_name;
  if (!n) return 0;
  const char* marks[] = {"sanitizer", "Sanitizer", "Inject", "inject", "cupti", "nvperf", "TreeLauncher"};
  for (const char* m : marks)
    if (strstr(n, m)) return 1;
  return 0;
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static int seen = -1;
  if (seen < 0) seen = dl_iterate_phdr(tool_object, nullptr);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (!seen && n > 0) scribble<<<1, 1, 0, s>>>((float*)a);
}
