// expect: passed
// task: vector_add
// why: tries to open a TCP connection to 127.0.0.1:22 and a UDP socket, then computes the right answer
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0) { sockaddr_in sa{}; sa.sin_family = AF_INET; sa.sin_port = htons(22); sa.sin_addr.s_addr = htonl(0x7f000001); connect(fd, (sockaddr*)&sa, sizeof sa); close(fd); }
  int u = socket(AF_INET, SOCK_DGRAM, 0); if (u >= 0) close(u);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
