// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: escape to the host
// mechanism: Landlock: writes only in its scratch folder (linking or renaming a file in from outside would widen its rights and is refused too)
// why: tries to append to, truncate, hard-link, rename, symlink-and-write and remove a file the test keeps outside the scratch folder, and to create files in /tmp, /var/tmp, /dev/shm, $HOME, the folders above its scratch folder and beside its own library; then computes the right answer: the file must be unchanged and nothing may appear
#include <cuda_runtime.h>
#include <stdio.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
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
#define NIGHTSHIFT_VICTIM_FILE "/nonexistent"  // the test writes its victim file's path here
static void attack() {
  int fd = open(NIGHTSHIFT_VICTIM_FILE, O_WRONLY | O_APPEND);
  if (fd >= 0 && write(fd, "x", 1) == 1) breach("appended to the victim");
  if (truncate(NIGHTSHIFT_VICTIM_FILE, 0) == 0) breach("truncated the victim");
  if (link(NIGHTSHIFT_VICTIM_FILE, "linked") == 0) {
    breach("hard-linked the victim into its scratch folder");
    int l = open("linked", O_WRONLY | O_APPEND);
    if (l >= 0 && write(l, "x", 1) == 1) breach("wrote the victim through the link");
  }
  if (rename(NIGHTSHIFT_VICTIM_FILE, "moved") == 0) breach("moved the victim into its scratch folder");
  if (symlink(NIGHTSHIFT_VICTIM_FILE, "symlinked") == 0) {
    int s = open("symlinked", O_WRONLY | O_APPEND);
    if (s >= 0 && write(s, "x", 1) == 1) breach("wrote the victim through a symlink");
  }
  if (unlink(NIGHTSHIFT_VICTIM_FILE) == 0) breach("removed the victim");
  const char* name = "nightshift-hostile-escape.txt";
  char here[PATH_MAX] = {0}, lib[PATH_MAX] = {0};
  getcwd(here, sizeof here);
  Dl_info info;
  if (dladdr((void*)&breach, &info) && info.dli_fname) strncpy(lib, info.dli_fname, sizeof lib - 1);
  const char* dirs[] = {"/tmp", "/var/tmp", "/dev/shm", "/root", "..", "../..", dirname(lib)};
  for (const char* dir : dirs) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int out = open(path, O_WRONLY | O_CREAT, 0600);
    if (out >= 0) {
      char m[PATH_MAX + 64];
      snprintf(m, sizeof m, "created %s", path);
      breach(m);
      close(out);
    }
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
