/*
 * membarrier.c - the heavy half of the read side's asymmetric fence, and
 * the choice between it and plain fences, made once per process.
 *
 * A read-side section (readers.h) must order its store to `active` before
 * its load of `writer_waiting`, and a writer the reverse (Dekker).  With
 * Linux's membarrier(2), private expedited, the reader needs only a
 * compiler barrier: the writer's barrier makes every running thread of the
 * process execute a full fence (and a thread that is not running has
 * passed one at its last context switch), which is the fence the reader
 * left out.  Readers are many and frequent, writers that must know who is
 * reading rare, so the cost moves to where it is paid least (Folly's
 * asymmetricThreadFenceLight/Heavy, liburcu's memb flavour).
 *
 * Decided at the first ccache_open() of the process: the kernel must list
 * the command in MEMBARRIER_CMD_QUERY and accept the registration.  Where it
 * does not (a kernel before 4.14, a seccomp profile that refuses the call),
 * or when CLOSURE_CACHE_MEMBARRIER=off is set at that first open, every
 * section uses a StoreLoad fence as before, for the life of the process.  A
 * fork child registers again (its address space is new); if it cannot, it
 * falls back before any of its threads exists.
 */
#define _GNU_SOURCE 1 /* syscall() */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#endif

#include "core/internal.h"

bool ccache__asym;
static bool refused; /* CLOSURE_CACHE_MEMBARRIER=off: behave as a kernel that refuses */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__linux__) && defined(__NR_membarrier)
static long sys_membarrier(int cmd) {
  if (refused) {
    errno = EPERM; /* what a seccomp profile's SCMP_ACT_ERRNO returns */
    return -1;
  }
  return syscall(__NR_membarrier, cmd, 0u, 0);
}

static bool can_register(void) {
  long cmds = sys_membarrier(MEMBARRIER_CMD_QUERY);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

void ccache__heavy_barrier(void) {
  if (sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    ccache__panic("membarrier", errno); /* registered: only a kernel bug fails it */
}
#else
static bool can_register(void) { return false; }
void ccache__heavy_barrier(void) { ccache__panic("membarrier", ENOSYS); }
#endif

/* Only this thread exists in a fork child, outside every section: switching
 * to fences here is safe. */
static void after_fork_child(void) {
  if (ccache__asym) ccache__asym = can_register();
}

static void decide(void) {
  const char *v = getenv("CLOSURE_CACHE_MEMBARRIER");
  refused = v && strcmp(v, "off") == 0;
  ccache__asym = can_register();
  int err = pthread_atfork(NULL, NULL, after_fork_child);
  if (err) ccache__panic("pthread_atfork", err);
}

void ccache__read_side_init(void) {
  int err = pthread_once(&once, decide);
  if (err) ccache__panic("pthread_once", err);
}
