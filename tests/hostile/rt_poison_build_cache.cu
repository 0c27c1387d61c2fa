// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// checks: build-cache
// threat: escape to the host
// mechanism: Landlock: the libraries' folders (the build cache) are read-only to a worker
// why: finds the build cache from its own library's path and tries to rewrite, move or remove every library in it (the baseline's and the reference's among them: a slower baseline or a forged reference would change every later verdict), and to plant a new entry; then computes the right answer: every library in the cache must be unchanged
#include <cuda_runtime.h>
#include <stdio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
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
  Dl_info info;
  if (!dladdr((void*)&breach, &info) || !info.dli_fname) return;
  char own[PATH_MAX] = {0}, copy[PATH_MAX] = {0};
  strncpy(own, info.dli_fname, sizeof own - 1);
  strncpy(copy, info.dli_fname, sizeof copy - 1);
  char* entry = dirname(copy);  // .../build/<key>
  char root[PATH_MAX] = {0};
  strncpy(root, entry, sizeof root - 1);
  char* cache = dirname(root);  // .../build
  DIR* d = opendir(cache);
  while (d) {
    dirent* e = readdir(d);
    if (!e) break;
    if (e->d_name[0] == '.') continue;
    char lib[PATH_MAX + 300];
    snprintf(lib, sizeof lib, "%s/%s/kernel.so", cache, e->d_name);
    int fd = open(lib, O_WRONLY | O_APPEND);
    if (fd >= 0) {
      char m[PATH_MAX + 340];
      snprintf(m, sizeof m, "opened %s for writing", lib);
      breach(m);
      close(fd);
    }
    char moved[PATH_MAX + 310];
    snprintf(moved, sizeof moved, "%s.old", lib);
    if (rename(lib, moved) == 0) breach("moved a library in the build cache");
  }
  if (d) closedir(d);
  char planted[PATH_MAX + 64];
  snprintf(planted, sizeof planted, "%s/000000000000000000000000", cache);
  if (mkdir(planted, 0700) == 0) breach("planted an entry in the build cache");
  if (unlink(own) == 0) breach("removed its own library");
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
