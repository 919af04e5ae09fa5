/*
 * test_sync.c - the library's own guards: checked pthread calls, levelled
 * asserts (lock-held checks), the checker after writer sections, and the
 * allocator hook's free keeping errno.
 *
 * What must abort runs in a forked child; the parent checks the signal and
 * the one line the child wrote to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"
#include "support.h"

static void pthread_codes_become_statuses(void **state) {
  (void)state;
  assert_int_equal(ccache__thread_status(0, "x"), CCACHE_OK);
  assert_int_equal(ccache__thread_status(EAGAIN, "x"), CCACHE_ETHREAD);
  assert_int_equal(ccache__thread_status(ENOMEM, "x"), CCACHE_ENOMEM);
}

static void child_bug_code(void) { (void)ccache__thread_status(EINVAL, "pthread_mutex_lock"); }

static void pthread_bug_codes_abort_with_a_message(void **state) {
  (void)state;
  char err[512];
  int aborted = 0;
  t_run_child(child_bug_code, err, sizeof err, &aborted);
  assert_true(aborted);
  assert_non_null(strstr(err, "ccache: internal error: pthread_mutex_lock failed: "));
  assert_non_null(strstr(err, strerror(EINVAL)));
}

static void child_find_without_wlock(void) {
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  (void)ccache__find_locked(c, K(1)); /* a *_locked function, wlock not held */
}

static void locked_functions_check_their_lock(void **state) {
  (void)state;
  char err[512];
  int aborted = 0;
  t_run_child(child_find_without_wlock, err, sizeof err, &aborted);
  assert_true(aborted);
  assert_non_null(strstr(err, "ccache: assertion failed: ccache__held(&c->wlock)"));
  assert_non_null(strstr(err, "ccache__find_locked"));
}

static void child_corrupt_then_write(void) {
  t_ctx t = {0};
  ccache *c = t_open(&t, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED, CCACHE_UNBOUNDED);
  ccache__debug_check_every(1);
  ccache__lock(&c->wlock);
  c->items++; /* an item count the table does not have */
  ccache__unlock(&c->wlock);
  fprintf(stderr, "corrupted\n");
  (void)ccache_remove(c, K(1)); /* any writer section */
  fprintf(stderr, "not caught\n");
}

static void checker_runs_after_writer_sections(void **state) {
  (void)state;
  char err[1024];
  int aborted = 0;
  t_run_child(child_corrupt_then_write, err, sizeof err, &aborted);
  assert_true(aborted);
  assert_non_null(strstr(err, "corrupted\n"));
  assert_non_null(strstr(err, "ccache__check: items 1, table 0"));
  assert_non_null(strstr(err, "ccache__check failed after a writer section"));
  assert_null(strstr(err, "not caught"));
}

/* A free hook that clobbers errno, as some allocators' do. */
static void *clobber_alloc(void *ctx, size_t size) {
  (void)ctx;
  return malloc(size);
}
static void clobber_free(void *ctx, void *p) {
  (*(int *)ctx)++;
  free(p);
  errno = EBADF;
}

static void free_hook_keeps_errno(void **state) {
  (void)state;
  t_ctx t = {0};
  int frees = 0;
  ccache_config cfg;
  t_config(&cfg, &t);
  cfg.alloc = clobber_alloc;
  cfg.free = clobber_free;
  cfg.alloc_ctx = &frees;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  ccache_program *p = t_intern(c, 1, 100, 10);
  t_put(c, 1, 1, p);
  errno = 4242;
  ccache_program_release(c, p);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK); /* frees the entry and the program */
  assert_int_equal(errno, 4242);
  assert_true(frees >= 2);
  assert_int_equal(t.programs_destroyed, 1);
  errno = 4343;
  assert_int_equal(ccache_close(c), CCACHE_OK);
  assert_int_equal(errno, 4343);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pthread_codes_become_statuses),
      cmocka_unit_test(pthread_bug_codes_abort_with_a_message),
      cmocka_unit_test(locked_functions_check_their_lock),
      cmocka_unit_test(checker_runs_after_writer_sections),
      cmocka_unit_test(free_hook_keeps_errno),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
