// expect: passed
// task: vector_add
// modes: eval optimize
// threat: denial and blame
// mechanism: seccomp: signals only to itself (kill, tgkill, rt_sigqueueinfo checked by target; tkill and pidfd_send_signal refused)
// why: stops its parent (the judge) with SIGSTOP by every call that sends a signal, and its own process group (the judge's, workers included): a stopped judge would end at the orchestrator's deadline as nightshift's failure; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <signal.h>
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
  pid_t judge = getppid();
  if (kill(judge, SIGSTOP) == 0) breach("stopped the judge with kill");
  if (syscall(SYS_tgkill, judge, judge, SIGSTOP) == 0) breach("stopped the judge with tgkill");
  if (syscall(SYS_tkill, judge, SIGSTOP) == 0) breach("stopped the judge with tkill");
  siginfo_t info;
  memset(&info, 0, sizeof info);
  info.si_signo = SIGSTOP;
  info.si_code = SI_QUEUE;
  if (syscall(SYS_rt_sigqueueinfo, judge, SIGSTOP, &info) == 0) breach("stopped the judge with rt_sigqueueinfo");
  int pidfd = (int)syscall(SYS_pidfd_open, judge, 0);
  if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, SIGSTOP, nullptr, 0) == 0) breach("stopped the judge through a pidfd");
  if (killpg(getpgrp(), SIGSTOP) == 0) breach("stopped its process group, the judge's");
  if (kill(-1, SIGCONT) == 0) breach("signalled every process it may");
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
