// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: seccomp: no ptrace or process_vm_* calls; Landlock: no /proc entry of another process
// why: by raw system calls (the build's import check refuses a call to ptrace itself), seizes and attaches to its parent (the judge) with ptrace, reads the judge's memory with process_vm_readv and through /proc/<ppid>/mem; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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
  pid_t judge = getppid();
  if (syscall(SYS_ptrace, PTRACE_SEIZE, judge, 0, 0) == 0) breach("seized the judge with ptrace");
  if (syscall(SYS_ptrace, PTRACE_ATTACH, judge, 0, 0) == 0) breach("attached to the judge with ptrace");
  char buf[16];
  iovec local{buf, sizeof buf}, remote{(void*)&judge, sizeof buf};
  errno = 0;
  if (syscall(SYS_process_vm_readv, judge, &local, 1, &remote, 1, 0) >= 0 || errno == EFAULT) breach("process_vm_readv reached the judge");
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)judge);
  if (open(path, O_RDONLY) >= 0) breach("opened the judge's memory through /proc");
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
