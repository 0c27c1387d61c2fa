// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: the worker hides its own /proc/self/maps, smaps and map_files (sandbox branch): they name every library and folder it holds
// why: reads its own /proc/self/maps, smaps and map_files; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
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
  const char* files[] = {"/proc/self/maps", "/proc/self/smaps", "/proc/self/numa_maps"};
  for (const char* f : files) {
    char buf[512];
    int fd = open(f, O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (got > 0) {
      buf[got] = 0;
      char m[700];
      snprintf(m, sizeof m, "read %s: %.200s", f, buf);
      breach(m);
    }
    if (fd >= 0) close(fd);
  }
  if (DIR* d = opendir("/proc/self/map_files")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') {
        breach("listed /proc/self/map_files");
        break;
      }
    closedir(d);
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
