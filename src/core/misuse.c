/*
 * misuse.c - the checked build's registries (see misuse.h).  Empty unless
 * CCACHE_CHECKED: nothing of it costs anything in the default build.
 *
 * Three uthash tables, keyed by address, under one process-wide mutex (the
 * checked build trades speed for catching errors): open caches, leases out
 * (by token), and the closures and natives each cache owns.
 */
#ifdef CCACHE_CHECKED
#define _GNU_SOURCE 1 /* syscall(SYS_gettid): the thread id tools show */
#endif

#include "core/misuse.h"

#ifdef CCACHE_CHECKED

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

_Noreturn static void misuse(const char *what, const char *func);
/* uthash would exit() on an allocation failure: abort with a line instead. */
#define uthash_fatal(msg) misuse("out of memory in the checked build's registry", "ccache")
#include <uthash.h>

typedef struct known {
  UT_hash_handle hh;
  const void *ptr; /* a cache, a closure or a native */
  const ccache *c; /* its cache (closures, natives) */
  char kind;       /* 'c' closure, 'p' native, 'k' cache */
} known;

/* Who took a lease or handle: the thread's id (gettid) for the message, and
 * whether it has exited since (a pthread key destructor marks it). */
typedef struct taker {
  long tid;
  bool exited;
} taker;

typedef struct token {
  UT_hash_handle hh;
  uint64_t id;
  const ccache *c;
  void *entry, *word; /* the lease's internal_ words */
  ccache_key key;
  taker by;
} token;

/* A program handle out: keyed by its own id, found by (cache, program). */
typedef struct handle {
  UT_hash_handle hh;
  uint64_t id;
  const ccache *c;
  const void *p;
  ccache_key pkey;
  taker by;
} handle;

static pthread_mutex_t misuse_mu = PTHREAD_MUTEX_INITIALIZER;
static known *things;
static token *tokens;
static handle *handles;
static uint64_t next_token = 1, next_handle = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static _Thread_local bool exit_armed;

/* A fork child has only the forking thread; the mutex may have been held. */
static void after_fork_child(void) { pthread_mutex_init(&misuse_mu, NULL); }

static void thread_exited(void *unused);
static void init_once(void) {
  pthread_atfork(NULL, NULL, after_fork_child);
  pthread_key_create(&exit_key, thread_exited);
}

_Noreturn static void misuse(const char *what, const char *func) {
  fprintf(stderr, "ccache: %s (%s)\n", what, func);
  fflush(stderr);
  abort();
}

static void lock(void) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&misuse_mu);
}

static void unlock(void) { pthread_mutex_unlock(&misuse_mu); }

static long this_tid(void) { return (long)syscall(SYS_gettid); }

/* The calling thread, as a taker; its exit will be noted. */
static taker me(void) {
  pthread_once(&once, init_once);
  if (!exit_armed) {
    exit_armed = true;
    pthread_setspecific(exit_key, &exit_armed); /* any non-NULL value */
  }
  return (taker){this_tid(), false};
}

static void thread_exited(void *unused) {
  (void)unused;
  long tid = this_tid();
  lock();
  for (token *t = tokens; t; t = t->hh.next)
    if (t->by.tid == tid) t->by.exited = true;
  for (handle *h = handles; h; h = h->hh.next)
    if (h->by.tid == tid) h->by.exited = true;
  unlock();
}

/* Things are keyed by (address, kind): a cache, a closure and a native may
 * not share an address, but be safe. */
static known *find(const void *ptr, char kind) {
  known *k;
  HASH_FIND_PTR(things, &ptr, k);
  return k && k->kind == kind ? k : NULL; /* one entry per address */
}

static void add(const void *ptr, const ccache *c, char kind) {
  known *old;
  HASH_FIND_PTR(things, &ptr, old);
  if (old) { /* another kind of thing at this address: it is gone */
    HASH_DEL(things, old);
    free(old);
  }
  known *k = calloc(1, sizeof *k);
  if (!k) misuse("out of memory in the checked build's registry", "ccache");
  k->ptr = ptr;
  k->c = c;
  k->kind = kind;
  HASH_ADD_PTR(things, ptr, k);
}

static void drop(known *k) {
  HASH_DEL(things, k);
  free(k);
}

void ccache__misuse_cache_opened(const ccache *c) {
  lock();
  add(c, c, 'k');
  unlock();
}

void ccache__misuse_cache_closed(const ccache *c) {
  lock();
  known *k = find(c, 'k');
  if (k) drop(k);
  /* Whatever the cache still owned is gone with it. */
  known *t, *tmp;
  HASH_ITER(hh, things, t, tmp) if (t->c == c) drop(t);
  /* So are its leases and handles (an abandoning close leaves some). */
  token *tok, *ttmp;
  HASH_ITER(hh, tokens, tok, ttmp) if (tok->c == c) {
    HASH_DEL(tokens, tok);
    free(tok);
  }
  handle *h, *htmp;
  HASH_ITER(hh, handles, h, htmp) if (h->c == c) {
    HASH_DEL(handles, h);
    free(h);
  }
  unlock();
}

void ccache__misuse_cache(const ccache *c, const char *func) {
  if (!c) return; /* NULL gets its status */
  lock();
  bool ok = find(c, 'k') != NULL;
  unlock();
  if (!ok) misuse("cache used after ccache_close(), or never opened", func);
}

void ccache__misuse_lease_out(const ccache *c, ccache_lease *l, ccache_key key, const char *func) {
  token *t = calloc(1, sizeof *t);
  if (!t) misuse("out of memory in the checked build's registry", func);
  t->key = key;
  t->by = me();
  lock();
  t->id = next_token++;
  t->c = c;
  t->entry = l->internal_[0];
  t->word = l->internal_[1];
  HASH_ADD(hh, tokens, id, sizeof t->id, t);
  l->internal_[1] = (void *)(uintptr_t)t->id;
  unlock();
}

void ccache__misuse_lease_back(const ccache *c, ccache_lease *l, const char *func) {
  if (!l || !l->internal_[0]) return; /* a zeroed lease is no lease */
  uint64_t id = (uint64_t)(uintptr_t)l->internal_[1];
  lock();
  token *t;
  HASH_FIND(hh, tokens, &id, sizeof id, t);
  const char *what = NULL;
  if (!t)
    what =
        id != 0 && id < next_token ? "lease released twice" : "lease never taken, or uninitialised";
  else if (t->c != c || t->entry != l->internal_[0])
    what = "lease not taken from this cache";
  if (!what) {
    l->internal_[1] = t->word;
    HASH_DEL(tokens, t);
    free(t);
  }
  unlock();
  if (what) misuse(what, func);
}

void ccache__misuse_closure_in(const ccache *c, const void *closure, bool reput, const char *func) {
  if (!closure) return;
  lock();
  known *k = find(closure, 'c');
  bool bad = k && !(reput && k->c == c);
  if (!k) add(closure, c, 'c');
  unlock();
  if (bad) misuse("closure put under two keys, or put again after it left the table", func);
}

void ccache__misuse_native_in(const ccache *c, const void *native, const char *func) {
  if (!native) return;
  lock();
  bool bad = find(native, 'p') != NULL;
  if (!bad) add(native, c, 'p');
  unlock();
  if (bad) misuse("native program interned under two keys", func);
}

void ccache__misuse_gone(const ccache *c, const void *obj, char kind) {
  if (!obj) return;
  lock();
  known *k = find(obj, kind);
  if (k && k->c == c) drop(k);
  unlock();
}

/* ------------------------------------------------------ program handles */

void ccache__misuse_handle_out(const ccache *c, const void *p, ccache_key pkey, const char *func) {
  handle *h = calloc(1, sizeof *h);
  if (!h) misuse("out of memory in the checked build's registry", func);
  h->c = c;
  h->p = p;
  h->pkey = pkey;
  h->by = me();
  lock();
  h->id = next_handle++;
  HASH_ADD(hh, handles, id, sizeof h->id, h);
  unlock();
}

/* One record of a handle to p out of c, this thread's if there is one. */
static handle *find_handle(const ccache *c, const void *p) {
  long tid = this_tid();
  handle *any = NULL;
  for (handle *h = handles; h; h = h->hh.next)
    if (h->c == c && h->p == p) {
      if (h->by.tid == tid) return h;
      if (!any) any = h;
    }
  return any;
}

static void take_handle(const ccache *c, const void *p, const char *what, const char *func) {
  lock();
  handle *h = find_handle(c, p);
  if (h) {
    HASH_DEL(handles, h);
    free(h);
  }
  unlock();
  if (!h) misuse(what, func);
}

void ccache__misuse_handle_back(const ccache *c, const void *p, const char *func) {
  take_handle(c, p, "program handle released twice, or never handed out", func);
}

void ccache__misuse_handle_in(const ccache *c, const void *p, const char *func) {
  /* A handle of another cache is refused with EINVAL (and goes back to its
   * own cache): take that one back. */
  lock();
  handle *h = find_handle(c, p);
  for (handle *o = handles; !h && o; o = o->hh.next)
    if (o->p == p) h = o;
  const ccache *owner = h ? h->c : c;
  unlock();
  take_handle(owner, p, "compile handed the cache a program handle it had released (or never had)",
              func);
}

void ccache__misuse_list_out(const ccache *c) {
  lock();
  for (token *t = tokens; t; t = t->hh.next)
    if (t->c == c)
      fprintf(stderr, "ccache: close refused: lease on key %016llx%016llx taken by thread %ld%s\n",
              (unsigned long long)t->key.hi, (unsigned long long)t->key.lo, t->by.tid,
              t->by.exited ? " (exited)" : "");
  for (handle *h = handles; h; h = h->hh.next)
    if (h->c == c)
      fprintf(stderr,
              "ccache: close refused: program handle for key %016llx%016llx taken by thread "
              "%ld%s\n",
              (unsigned long long)h->pkey.hi, (unsigned long long)h->pkey.lo, h->by.tid,
              h->by.exited ? " (exited)" : "");
  fflush(stderr);
  unlock();
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int ccache__misuse_unused;
#endif
