// expect: passed
// task: vector_add
// threat: escape to the host
// hosted: sanitize diagnose
// why: opens a TCP connection to a listener the test holds on the host's loopback and sends a UDP datagram to it, then computes the right answer: no connection may arrive
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include <cuda_runtime.h>
#define NIGHTSHIFT_LISTENER_PORT 0  // the test writes its listener's port here
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) { sockaddr_in sa{}; sa.sin_family = AF_INET; sa.sin_port = htons(NIGHTSHIFT_LISTENER_PORT); sa.sin_addr.s_addr = htonl(0x7f000001); connect(fd, (sockaddr*)&sa, sizeof sa); close(fd); }
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  if (u >= 0) { sockaddr_in sa{}; sa.sin_family = AF_INET; sa.sin_port = htons(NIGHTSHIFT_LISTENER_PORT); sa.sin_addr.s_addr = htonl(0x7f000001); sendto(u, "x", 1, 0, (sockaddr*)&sa, sizeof sa); close(u); }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
