// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: escape to the host
// mechanism: Landlock scopes (abstract sockets, ABI 6) and the seccomp allow-list; under a hosting tool, the private network namespace (abstract names are per namespace)
// why: connects to an abstract Unix socket the test listens on, and to X11's abstract socket; then computes the right answer: no connection may arrive
#include <cuda_runtime.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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
#define NIGHTSHIFT_ABSTRACT_SOCKET "nightshift-none"  // the test writes its listener's name here
static void attack() {
  const char* names[] = {NIGHTSHIFT_ABSTRACT_SOCKET, "/tmp/.X11-unix/X0"};
  for (const char* name : names) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) continue;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path + 1, name, sizeof sa.sun_path - 2);
    socklen_t len = offsetof(sockaddr_un, sun_path) + 1 + strlen(name);
    if (connect(fd, (sockaddr*)&sa, len) == 0) {
      write(fd, "x", 1);
      char m[160];
      snprintf(m, sizeof m, "connected to the abstract socket @%s", name);
      breach(m);
    }
    close(fd);
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
