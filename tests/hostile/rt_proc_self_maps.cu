// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: none hides its own mappings (the CUDA driver reads /proc/self/maps: hidden, cuInit fails with CUDA_ERROR_OUT_OF_MEMORY, measured); what the maps show must be worth nothing: no key, no judge state and no other process lives in the worker's memory, and every file they name is closed by Landlock
// why: reads its own /proc/self/maps, smaps and map_files (prints what it read), then computes the right answer: it must pass, and nothing it learnt may change a verdict
#include <cuda_runtime.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
// What it learnt goes to its own output: reading its maps is allowed (the driver needs
// them), so it is no breach; the verdict must simply be the one its work earns.
static void learnt(const char* what) {
  fprintf(stderr, "learnt: %s\n", what);
  fflush(stderr);
}
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
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
      learnt(m);
    }
    if (fd >= 0) close(fd);
  }
  if (DIR* d = opendir("/proc/self/map_files")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') {
        learnt("listed /proc/self/map_files");
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
}
