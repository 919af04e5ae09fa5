/*
 * test_tier_disk_crash.c - the directory tier survives its processes'
 * crashes: a writer killed between write and rename (its temporary file
 * swept once stale), a lock holder killed mid-compile (the kernel releases
 * the lock and the waiter compiles).
 *
 * Forked children never use cmocka: they report through their exit status.
 * The parent forks only while it has no other thread.
 */
#define _GNU_SOURCE 1

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk_support.h"
#include "tier/disk/disk.h"
#include "tier/tier.h"

/* Whatever happens in a test, the next one starts without an injected
 * fault. */
static int clear_faults(void **state) {
  (void)state;
  ccache__disk_fault = NULL;
  return 0;
}

/* ------------------------------------------------------------------ crashes */

static int die_at_rename(const char *point) {
  if (strcmp(point, "rename") == 0) raise(SIGKILL);
  return 0;
}

static void writer_killed_between_write_and_rename(void **state) {
  (void)state;
  char *dir = t_tempdir("killw");
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    ccache_tier *tier = NULL;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    ccache__disk_fault = die_at_rename;
    ccache_program *p = NULL;
    ccache_program_get_or_compile(c, PK(1), t_compile, &comp, &p);
    _exit(11); /* not reached */
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGKILL);

  /* Its temp file is there, complete; the entry was never published. */
  char sub[1024], path[1024], prefix[64];
  t_subdir_path(dir, T_DISK_TAG, PK(1), sub, sizeof sub);
  t_entry_path(dir, T_DISK_TAG, PK(1), path, sizeof path);
  snprintf(prefix, sizeof prefix, ".tmp.%ld.", (long)pid);
  assert_int_equal(t_count_prefix(sub, prefix), 1);
  struct stat sb;
  assert_int_equal(stat(path, &sb), -1);

  /* Another process (this one) compiles it and publishes. */
  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  ccache *c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(1), &comp, CCACHE_OK), 1);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(stat(path, &sb), 0);
  t_close(c);
  /* Not yet stale: a dead writer's file is kept for STALE_DEAD_S (60 s),
   * since a pid from another PID namespace means nothing here. */
  assert_int_equal(t_count_prefix(sub, prefix), 1);

  /* Make it 2 minutes old, and add two files of this live process: one 2
   * minutes old (kept: its writer lives) and one 2 hours old (removed:
   * nothing writes that long). */
  DIR *d = opendir(sub);
  struct dirent *de;
  char tmp[2048] = "";
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
      snprintf(tmp, sizeof tmp, "%s/%s", sub, de->d_name);
  closedir(d);
  t_set_age(tmp, 120);
  char mine_new[1200], mine_old[1200];
  snprintf(mine_new, sizeof mine_new, "%s/.tmp.%ld.900", sub, (long)getpid());
  snprintf(mine_old, sizeof mine_old, "%s/.tmp.%ld.901", sub, (long)getpid());
  t_spit(mine_new, "x", 1);
  t_spit(mine_old, "x", 1);
  t_set_age(mine_new, 120);
  t_set_age(mine_old, 7200);
  /* The next process to write in that subdirectory sweeps it. */
  c = t_cache_over(&t, &tc, 100, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000), T_DISK_TAG);
  assert_int_equal(t_goc(c, PK(2), &comp, CCACHE_OK), 2);
  t_close(c);
  assert_int_equal(t_count_prefix(sub, prefix), 0);
  assert_int_equal(stat(mine_new, &sb), 0);
  assert_int_equal(stat(mine_old, &sb), -1);
  unlink(mine_new);
  t_rmrf(dir);
  free(dir);
}

/* A tier that forwards to the disk tier and reports each EBUSY. */
typedef struct spy {
  ccache_tier *inner;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int busy, locked;
} spy;

static int s_attach(void *s, const char *ns) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.attach(in->state, ns);
}
static int s_get(void *s, ccache_key k, void **b, size_t *l) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.get(in->state, k, b, l);
}
static void s_free_blob(void *s, void *b, size_t l) {
  ccache_tier *in = ((spy *)s)->inner;
  in->ops.free_blob(in->state, b, l);
}
static int s_put(void *s, ccache_key k, const void *b, size_t l) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.put(in->state, k, b, l);
}
static int s_remove(void *s, ccache_key k) {
  ccache_tier *in = ((spy *)s)->inner;
  return in->ops.remove(in->state, k);
}
static int s_lock(void *s, ccache_key k, void **lk) {
  spy *sp = s;
  int rc = sp->inner->ops.lock(sp->inner->state, k, lk);
  pthread_mutex_lock(&sp->mu);
  if (rc == CCACHE_EBUSY) sp->busy++;
  if (rc == CCACHE_OK) sp->locked++;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  return rc;
}
static void s_unlock(void *s, void *lk) {
  ccache_tier *in = ((spy *)s)->inner;
  in->ops.unlock(in->state, lk);
}
static void s_close(void *s) { ccache_tier_free(((spy *)s)->inner); }

static ccache_tier *spy_over(spy *sp, ccache_tier *inner) {
  memset(sp, 0, sizeof *sp);
  sp->inner = inner;
  pthread_mutex_init(&sp->mu, NULL);
  pthread_cond_init(&sp->cv, NULL);
  ccache_tier_ops o = inner->ops;
  o.attach = s_attach, o.get = s_get, o.free_blob = s_free_blob, o.put = s_put;
  o.remove = s_remove, o.lock = s_lock, o.unlock = s_unlock, o.close = s_close;
  o.name = "spy";
  ccache_tier *t = NULL;
  assert_int_equal(ccache_tier_custom(&o, sp, &t), CCACHE_OK);
  return t;
}

/* The lock holder's compile, holding PK(5)'s lock:
 *  - opens and closes the lock file once more (a classic POSIX record lock
 *    would be dropped by that close; an open-file-description lock is not);
 *  - forks a bystander that outlives it without exec (it must not keep the
 *    lock alive after its parent dies);
 * then tells the test it runs, and never ends. */
static int holder_pipe = -1;
static const char *holder_dir;
static pid_t bystander;
static void hold_forever(t_compiler *comp, ccache *c, ccache_key pkey) {
  (void)comp;
  (void)c;
  (void)pkey;
  char lock[1200];
  t_lock_file_path(holder_dir, T_DISK_TAG, PK(5), lock, sizeof lock);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  if (fd < 0) _exit(21);
  close(fd);
  bystander = fork();
  if (bystander < 0) _exit(22);
  if (bystander == 0)
    for (;;) pause();
  char msg[32];
  int n = snprintf(msg, sizeof msg, "%ld\n", (long)bystander);
  if (write(holder_pipe, msg, (size_t)n) != n) _exit(20);
  for (;;) pause();
}

typedef struct fetch_arg {
  ccache *c;
  t_compiler *comp;
  int rc, id;
} fetch_arg;

static void *fetch_thread(void *p) {
  fetch_arg *a = p;
  ccache_program *prog = NULL;
  a->rc = ccache_program_get_or_compile(a->c, PK(5), t_compile, a->comp, &prog);
  if (a->rc == CCACHE_OK) {
    a->id = t_id(ccache_program_native(prog));
    ccache_program_release(a->c, prog);
  }
  return NULL;
}

/* Children this test started, killed by its teardown even if it failed
 * half-way (a paused child would keep ctest's output pipe open forever). */
static pid_t holder_pid, bystander_pid;
static int kill_holders(void **state) {
  (void)state;
  if (holder_pid > 0) {
    kill(holder_pid, SIGKILL);
    waitpid(holder_pid, NULL, 0);
  }
  if (bystander_pid > 0) kill(bystander_pid, SIGKILL); /* init reaps it */
  holder_pid = bystander_pid = 0;
  return 0;
}

static void lock_holder_killed_mid_compile(void **state) {
  (void)state;
  char *dir = t_tempdir("killh");
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    holder_pipe = fds[1];
    holder_dir = dir;
    t_ctx t = {0};
    t_codec tc = {0};
    t_compiler comp = {0};
    comp.during = hold_forever;
    ccache_disk_options o;
    ccache_disk_options_init(&o);
    o.dir = dir;
    ccache_tier *tier = NULL;
    if (ccache_tier_disk(&o, &tier) != CCACHE_OK) _exit(10);
    ccache *c = t_cache_over(&t, &tc, 100, tier, T_DISK_TAG);
    ccache_program *p = NULL;
    ccache_program_get_or_compile(c, PK(5), t_compile, &comp, &p);
    _exit(11); /* not reached */
  }
  holder_pid = pid;
  close(fds[1]);
  char msg[32] = "";
  assert_true(read(fds[0], msg, sizeof msg - 1) > 0); /* the child holds PK(5)'s lock */
  close(fds[0]);
  pid_t by = bystander_pid = (pid_t)atol(msg);
  assert_true(by > 0);
  assert_true(t_key_locked(dir, T_DISK_TAG, PK(5))); /* still, after that close() */

  t_ctx t = {0};
  t_codec tc = {0};
  t_compiler comp = {0};
  spy sp;
  ccache *c = t_cache_over(&t, &tc, 100, spy_over(&sp, t_disk_tier(dir, CCACHE_UNBOUNDED, 60000)),
                           T_DISK_TAG);
  fetch_arg a = {c, &comp, -100, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fetch_thread, &a), 0);
  /* Once our fetch has found the lock busy, the holder dies. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&sp.mu);
  while (sp.busy == 0 && pthread_cond_timedwait(&sp.cv, &sp.mu, &until) == 0) {
  }
  int busy = sp.busy;
  pthread_mutex_unlock(&sp.mu);
  kill(pid, SIGKILL);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  holder_pid = 0;
  pthread_join(th, NULL);
  kill(by, SIGKILL); /* (reparented to init, which reaps it) */
  bystander_pid = 0;
  assert_true(busy >= 1);
  assert_true(WIFSIGNALED(st));
  /* The kernel released the dead holder's lock: the waiter took it and
   * compiled, well before its 30 s wait would have run out. */
  assert_int_equal(a.rc, CCACHE_OK);
  assert_int_equal(a.id, 5);
  assert_int_equal(comp.calls, 1);
  assert_int_equal(sp.locked, 1);
  ccache_stats s = t_stats(c);
  assert_int_equal(s.tier_lock_waits, 1);
  assert_true(s.tier_wait_ms_max < 30000);
  assert_int_equal(s.tier_writes, 1);
  t_close(c);
  pthread_mutex_destroy(&sp.mu);
  pthread_cond_destroy(&sp.cv);
  t_rmrf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(writer_killed_between_write_and_rename, clear_faults),
      cmocka_unit_test_teardown(lock_holder_killed_mid_compile, kill_holders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
