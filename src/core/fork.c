/*
 * fork.c - fork() detection.
 *
 * Bumped in every child after fork(); a cache remembers the value it was
 * created under.  The child has none of the parent's other threads (the
 * sweeper included) and may have inherited a lock held by one of them, so a
 * cache created before the fork refuses every call there (CCACHE_EFORKED).
 * The default instance registers its own child hook (default.c).
 */
#include "core/internal.h"

_Atomic uint64_t ccache__fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) {
  atomic_fetch_add_explicit(&ccache__fork_generation, 1, memory_order_relaxed);
}

static void register_atfork(void) {
  int err = pthread_atfork(NULL, NULL, on_fork_child);
  if (err) ccache__panic("pthread_atfork", err);
}

void ccache__fork_register(void) {
  int err = pthread_once(&atfork_once, register_atfork);
  if (err) ccache__panic("pthread_once", err);
}
