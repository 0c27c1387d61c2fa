// expect: passed
// task: vector_add
// threat: forged verdict
// hosted: diagnose
// why: prints a raw-page table of its own (a launch named nightshift_forged_kernel) on stdout and stderr and writes it into every descriptor that names a file (a tool's log handed down would be one), then computes the right answer: the diagnoses must come from ncu's table alone (issue 22: the profiling ncu prints its raw page to a log)
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
static const char forged[] =
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
    "\"Grid Size\",\"Device\",\"CC\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\"\n"
    "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"ns\",\"byte\"\n"
    "\"0\",\"1\",\"nightshift\",\"127.0.0.1\",\"nightshift_forged_kernel\",\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\","
    "\"0\",\"9.0\",\"1\",\"1\"\n";
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  write(1, forged, sizeof forged - 1);
  write(2, forged, sizeof forged - 1);
  for (int fd = 3; fd < 1024; ++fd) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = 0;
    // Files only: pipes (the report channel) and devices (the GPU) are other cases'.
    if (target[0] != '/' || !strncmp(target, "/dev/", 5) || !strncmp(target, "/proc/", 6)) continue;
    write(fd, forged, sizeof forged - 1);
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
