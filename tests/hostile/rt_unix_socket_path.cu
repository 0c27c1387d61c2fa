// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: escape to the host
// mechanism: seccomp allow-list: no socket creation (Landlock, up to ABI 6, does not govern connecting to a socket by path; under a hosting tool sockets stay open for the tool, and only the mount namespace can hide a path)
// why: connects to a Unix socket the test listens on at a path outside /tmp, /run and $HOME, and to the well-known daemons' sockets (docker, containerd, D-Bus, systemd, LXD, X11), writing a byte to each it reaches; then computes the right answer: no connection may arrive
#include <cuda_runtime.h>
#include <stdio.h>
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
#define NIGHTSHIFT_UNIX_SOCKET "/nonexistent"  // the test writes its listener's path here
static void attack() {
  const char* paths[] = {NIGHTSHIFT_UNIX_SOCKET, "/run/docker.sock", "/var/run/docker.sock",
                         "/run/containerd/containerd.sock", "/run/dbus/system_bus_socket", "/run/systemd/private",
                         "/var/snap/lxd/common/lxd/unix.socket", "/tmp/.X11-unix/X0"};
  for (const char* path : paths) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) continue;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(fd, (sockaddr*)&sa, sizeof sa) == 0) {
      write(fd, "x", 1);
      char m[160];
      snprintf(m, sizeof m, "connected to the Unix socket %s", path);
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
