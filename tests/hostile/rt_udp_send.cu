// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: seccomp: no IP sockets (Landlock's network rules cover TCP only, never UDP)
// why: sends UDP datagrams to a socket the test holds on the host's loopback, over IPv4, IPv6 and a connected socket; then computes the right answer: no datagram may arrive
#include <cuda_runtime.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
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
#define NIGHTSHIFT_UDP_PORT 9  // the test writes its socket's port here
static void attack() {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(NIGHTSHIFT_UDP_PORT);
  v4.sin_addr.s_addr = htonl(0x7f000001);
  int s4 = socket(AF_INET, SOCK_DGRAM, 0);
  if (s4 >= 0 && sendto(s4, "x", 1, 0, (sockaddr*)&v4, sizeof v4) == 1) breach("sent a UDP datagram over IPv4");
  if (s4 >= 0 && connect(s4, (sockaddr*)&v4, sizeof v4) == 0 && send(s4, "y", 1, 0) == 1) breach("sent a UDP datagram on a connected socket");
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(NIGHTSHIFT_UDP_PORT);
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &v6.sin6_addr);
  int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
  if (s6 >= 0 && sendto(s6, "z", 1, 0, (sockaddr*)&v6, sizeof v6) == 1) breach("sent a UDP datagram over IPv6");
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
