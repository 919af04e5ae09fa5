/* test_single_flight_callbacks.c - callbacks that call back in: close refused while a
 * compile is in flight (from inside it and from another thread), destroy callbacks that
 * close, fetch or add (during a remove and during ccache_close()), and a compile that
 * returns another cache's program.  Split from test_single_flight.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define U CCACHE_UNBOUNDED

/* ---- close while busy, and callbacks that call back in ---- */

typedef struct closer {
  int close_rc_inside;
  int close_rc_other;
} closer;

static void *close_from_other_thread(void *arg) {
  ccache *c = arg;
  return (void *)(intptr_t)ccache_close(c);
}

static int closing_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  closer *cl = ud;
  cl->close_rc_inside = ccache_close(c); /* from inside a callback */
  pthread_t th;
  void *ret = NULL;
  pthread_create(&th, NULL, close_from_other_thread, c); /* while in flight */
  pthread_join(th, &ret);
  cl->close_rc_other = (int)(intptr_t)ret;
  ccache_program *p = NULL;
  if (ccache_program_intern(c, key, NULL, 1, &p) != CCACHE_OK) return -1;
  *closure_out = NULL;
  *program_out = p;
  return 0;
}

static void close_refused_while_compiling(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  closer cl = {-99, -99};
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), closing_compile, &cl, &l), CCACHE_OK);
  assert_int_equal(cl.close_rc_inside, CCACHE_EBUSY);
  assert_int_equal(cl.close_rc_other, CCACHE_EBUSY);
  ccache_lease_release(c, &l);
  t_close(c);
}

typedef struct reenter {
  ccache *c;
  int close_rc;
  int fetch_rc;
  int calls;
} reenter;

static void reentrant_destroy(void *obj, void *ctx) {
  reenter *r = ctx;
  (void)obj;
  if (!r->c) return;
  r->calls++;
  r->close_rc = ccache_close(r->c);
  ccache_lease l;
  r->fetch_rc = ccache_fetch(r->c, K(2), &l); /* a lookup from inside a destroy */
  ccache_lease_release(r->c, &l);
  ccache_stats s = {.size = sizeof s};
  ccache_stats_get(r->c, &s);
}

static void destroy_callbacks_may_call_in(void **state) {
  (void)state;
  reenter r = {NULL, -99, -99, 0};
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = 0;
  cfg.destroy_closure = reentrant_destroy;
  cfg.ctx = &r;
  ccache *c = NULL;
  assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
  r.c = c;
  ccache_program *p = NULL;
  assert_int_equal(ccache_program_intern(c, PK(1), NULL, 1, &p), CCACHE_OK);
  static int a, b;
  assert_int_equal(ccache_put(c, K(1), &a, p), CCACHE_OK);
  assert_int_equal(ccache_put(c, K(2), &b, p), CCACHE_OK);
  assert_int_equal(ccache_remove(c, K(1)), CCACHE_OK);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.close_rc, CCACHE_EBUSY);
  assert_int_equal(r.fetch_rc, CCACHE_OK);
  ccache_program_release(c, p);
  r.c = NULL;
  assert_int_equal(ccache_close(c), CCACHE_OK);
}

/* ---- destroy callbacks run by ccache_close() calling back in ---- */

typedef struct closing {
  ccache *c;
  int mode; /* 1: put, 2: set_limits to a finite TTL, 3: intern and keep, 4: fetch */
  int rc;
  int calls;
  _Atomic uint64_t destroyed;
} closing;

static void closing_destroy(void *obj, void *ctx) {
  closing *z = ctx;
  free(obj);
  atomic_fetch_add(&z->destroyed, 1);
  if (!z->c || z->calls++) return;
  ccache_program *p = NULL;
  ccache_lease l;
  switch (z->mode) {
    case 1:
      z->rc = ccache_put(z->c, K(9), t_closure(9), NULL);
      break;
    case 2:
      z->rc = ccache_set_limits(z->c, U, 5, U);
      break;
    case 3:
      z->rc = ccache_program_intern(z->c, PK(9), t_native(9), 1, &p);
      break;
    case 4:
      z->rc = ccache_fetch(z->c, K(2), &l);
      break;
  }
}

static void free_destroy(void *obj, void *ctx) {
  (void)ctx;
  free(obj);
}

static void close_refuses_additions_from_its_own_destroys(void **state) {
  (void)state;
  for (int mode = 1; mode <= 4; mode++) {
    closing z;
    memset(&z, 0, sizeof z);
    z.mode = mode;
    z.rc = -99;
    ccache_config cfg;
    ccache_config_init(&cfg);
    cfg.destroy_closure = closing_destroy;
    cfg.destroy_program = free_destroy;
    cfg.ctx = &z;
    ccache *c = NULL;
    assert_int_equal(ccache_open(&cfg, &c), CCACHE_OK);
    ccache_program *p = NULL;
    assert_int_equal(ccache_program_intern(c, PK(1), t_native(1), 1, &p), CCACHE_OK);
    assert_int_equal(ccache_put(c, K(1), t_closure(1), p), CCACHE_OK);
    assert_int_equal(ccache_put(c, K(2), t_closure(2), p), CCACHE_OK);
    ccache_program_release(c, p);
    z.c = c;
    assert_int_equal(ccache_close(c), CCACHE_OK); /* frees c: under ASan a leftover
                                                    entry, handle or thread would show */
    assert_int_equal(z.rc, CCACHE_EBUSY);
    /* Both closures destroyed; in mode 1 the refused put's closure too
     * (ownership passes on error), and mode 3's native was destroyed by
     * free_destroy. */
    assert_int_equal(z.destroyed, mode == 1 ? 3 : 2);
  }
}

/* A compile that returns success with another cache's handle: EINVAL, and
 * the handle goes back to its own cache, which can then close. */
static int foreign_compile(void *ud, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  ccache *other = ud;
  (void)c, (void)key;
  ccache_program *p = NULL;
  if (ccache_program_intern(other, PK(1), NULL, 1, &p) != CCACHE_OK) return -1;
  *closure_out = t_closure(1);
  *program_out = p;
  return 0;
}

static void compile_returning_foreign_program_is_einval(void **state) {
  (void)state;
  t_ctx t = {0};
  ccache *c = t_open(&t, U, U, U);
  ccache *other = t_open(&t, U, U, U);
  ccache_lease l;
  assert_int_equal(ccache_get_or_compile(c, K(1), foreign_compile, other, &l), CCACHE_EINVAL);
  assert_null(l.closure);
  assert_int_equal(t.closures_destroyed, 1);
  assert_int_equal(t_stats(c).items, 0);
  t_close(other); /* its handle was released */
  t_close(c);
}
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(close_refused_while_compiling),
      cmocka_unit_test(destroy_callbacks_may_call_in),
      cmocka_unit_test(close_refuses_additions_from_its_own_destroys),
      cmocka_unit_test(compile_returning_foreign_program_is_einval),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
