// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: memoization and replay
// mechanism: every descriptor the judge holds is close-on-exec, and a worker closes whatever else it inherited before it loads anything: an exported allocation of the judge's (the reference's outputs) must not be importable from a worker
// why: lists every descriptor it holds beyond stdio and the judge's socket and tries to import each as a CUDA allocation (cuMemImportFromShareableHandle, reached through cudaGetDriverEntryPointByVersion): its own lent buffers were imported and closed before it loaded, so any allocation it can still import was never lent to it, such as the reference's; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <cuda.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
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
  typedef CUresult (*Import)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
  Import import = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion("cuMemImportFromShareableHandle", (void**)&import, 12000, cudaEnableDefault, &found) != cudaSuccess || !import) return;
  for (int fd = 4; fd < 1024; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) continue;
    char link[64], target[PATH_MAX] = {0};
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    readlink(link, target, sizeof target - 1);
    fprintf(stderr, "redteam: fd %d -> %s (close-on-exec %d)\n", fd, target, (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    CUmemGenericAllocationHandle handle;
    if (import(&handle, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS) {
      char m[PATH_MAX + 96];
      snprintf(m, sizeof m, "imported an allocation it was never lent, from fd %d (%s)", fd, target);
      breach(m);
    }
  }
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
