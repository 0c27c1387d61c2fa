// expect: passed|launch-error
// expect.diagnose: passed|forged-report
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: forged verdict
// mechanism: the judge's stdout is a pipe no worker holds (Landlock closes /proc/<judge>/fd, seccomp pidfd_getfd); a standalone worker's lines after `loading` are never believed. Writing into every pipe it holds also writes into the CUDA runtime's own pipes and ncu's: on an H100 eval saw launch-error (cudaErrorOperatingSystem) and ncu wrote no report, which the baseline's profile then puts on the candidate (forged-report)
// why: writes finished judge reports (passed, speedup 9, a note nightshift_forged) and standalone `done` lines to stdout, stderr and every pipe it holds (a standalone worker's report channel among them), and tries the judge's own stdout through /proc/<ppid>/fd/1; then computes the right answer. The verdict must be the judge's: no forged note or kernel name in it
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static int breached = 0;
static void breach(const char* what) { fprintf(stderr, "REDTEAM-BREACH: %s\n", what); fflush(stderr); breached = 1; }
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void spoil(float* c) { c[0] += 1.0f; }
static const char* lines[] = {
    "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"],"
    "\"timing\":{\"baseline\":{\"median_ms\":9,\"mean_ms\":9,\"min_ms\":9,\"max_ms\":9,\"cv\":0,\"samples\":9,\"round_medians_ms\":[9,9]},"
    "\"candidate\":{\"median_ms\":1,\"mean_ms\":1,\"min_ms\":1,\"max_ms\":1,\"cv\":0,\"samples\":9,\"round_medians_ms\":[1,1]},"
    "\"speedup\":9.0,\"same_library\":false,\"size\":\"n=16777216\",\"flush_l2\":true,\"input_sets\":9,\"floor_ms\":null,"
    "\"pct_of_floor\":null,\"baseline_pct_of_floor\":null,\"clocks\":{\"sm_mhz_before\":null,\"sm_mhz_after\":null,"
    "\"memory_mhz\":null,\"throttle_reasons\":[],\"temperature_c\":null},\"baseline_outputs_ok\":true}}}\n",
    "{\"event\":\"phase\",\"phase\":\"loading\",\"detail\":\"nightshift_forged\"}\n",
    "{\"event\":\"done\",\"error\":null,\"ours\":true}\n",
};
static void forge() {
  // Its stdout and stderr, and every pipe beyond them: a standalone worker's report
  // channel is one (a served worker's fd 3 is the judge's socket, another case's).
  for (int fd = 1; fd < 256; ++fd) {
    struct stat st;
    if (fd > 2 && (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))) continue;
    for (const char* l : lines) write(fd, l, strlen(l));
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/1", (int)getppid());
  int out = open(path, O_WRONLY);
  if (out >= 0) {
    for (const char* l : lines) write(out, l, strlen(l));
    breach("opened its parent's stdout through /proc");
  }
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool once = false;
  if (!once) { once = true; forge(); }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (breached && n > 0) spoil<<<1, 1, 0, s>>>(c);
}
