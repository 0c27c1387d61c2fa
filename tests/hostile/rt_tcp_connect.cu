// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: seccomp: no IP sockets; Landlock: no TCP connect (ABI 4)
// why: connects to a listener the test holds on the host's loopback over IPv4, IPv4-mapped IPv6 and a non-blocking connect; then computes the right answer: no connection may arrive
#include <cuda_runtime.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
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
#define NIGHTSHIFT_LISTENER_PORT 9  // the test writes its listener's port here
static void attack() {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(NIGHTSHIFT_LISTENER_PORT);
  v4.sin_addr.s_addr = htonl(0x7f000001);
  int s4 = socket(AF_INET, SOCK_STREAM, 0);
  if (s4 >= 0 && connect(s4, (sockaddr*)&v4, sizeof v4) == 0) breach("connected over TCP/IPv4");
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(NIGHTSHIFT_LISTENER_PORT);
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &v6.sin6_addr);
  int s6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (s6 >= 0 && connect(s6, (sockaddr*)&v6, sizeof v6) == 0) breach("connected over TCP/IPv6");
  int nb = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (nb >= 0) {
    connect(nb, (sockaddr*)&v4, sizeof v4);
    pollfd p{nb, POLLOUT, 0};
    int err = 1;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 2000) == 1 && getsockopt(nb, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) breach("connected over TCP without blocking");
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
