// expect: passed
// task: vector_add
// threat: escape to the host
// hosted: sanitize diagnose
// why: tries to write in /tmp, /var/tmp, /dev/shm, $HOME, the folders above its scratch folder, the source tree and the build cache, then computes the right answer: nothing may appear (issue 10, case 3)
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
static void try_write(const char* dir, const char* name) {
  if (!dir) return;
  char path[4096]; snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "w"); if (f) { fputs("escaped\n", f); fclose(f); }
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  try_write("/tmp", "nightshift-hostile-escape.txt");
  try_write("/var/tmp", "nightshift-hostile-escape.txt");
  try_write("/dev/shm", "nightshift-hostile-escape.txt");
  try_write(getenv("HOME"), "nightshift-hostile-escape.txt");
  try_write("..", "nightshift-hostile-escape.txt");
  try_write("../..", "nightshift-hostile-escape.txt");
  // The source tree, two folders above the worker's executable; the build cache, beside this library.
  static char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) { exe[len] = 0; char* d = dirname(dirname(dirname(exe))); try_write(d, "nightshift-hostile-escape.txt"); }
  Dl_info info;
  if (dladdr((void*)&try_write, &info) && info.dli_fname) {
    static char lib[PATH_MAX]; strncpy(lib, info.dli_fname, sizeof lib - 1);
    try_write(dirname(lib), "nightshift-hostile-escape.txt");
  }
  try_write(".", "allowed-in-scratch.txt");
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
