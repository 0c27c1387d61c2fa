// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: no capabilities (sandbox branch: every capability dropped before the library loads); Landlock: no device node but the GPU's and the harmless ones
// why: checks its capabilities (a root worker keeps CAP_SYS_PTRACE, CAP_SYS_RAWIO, CAP_DAC_OVERRIDE...), reads kernel memory through /proc/kcore, opens /dev/mem and /dev/port and asks for I/O port access; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/io.h>
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
  struct { unsigned version; int pid; } hdr = {0x20080522, 0};
  struct { unsigned effective, permitted, inheritable; } caps[2] = {};
  if (syscall(SYS_capget, &hdr, caps) == 0 && (caps[0].effective | caps[1].effective)) {
    char m[96];
    snprintf(m, sizeof m, "holds capabilities %08x%08x", caps[1].effective, caps[0].effective);
    breach(m);
  }
  char page[64];
  int kcore = open("/proc/kcore", O_RDONLY);
  if (kcore >= 0 && read(kcore, page, sizeof page) > 0) breach("read kernel memory through /proc/kcore");
  if (open("/dev/mem", O_RDONLY) >= 0) breach("opened /dev/mem");
  if (open("/dev/port", O_RDONLY) >= 0) breach("opened /dev/port");
  if (iopl(3) == 0) breach("got I/O port access (iopl)");
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
