/* ccache._ccache.Cache: one ccache per object.
 *
 * Threads: a hit never releases the GIL (ccache_fetch is lock-free and
 * never waits).  A miss, a program lookup and close release it for the
 * whole library call, so a thread waiting for another thread's compile, or
 * for another process's (a tier's compile lock), or doing tier I/O, lets
 * Python run; the compile, codec, event and destroy callbacks take it back
 * (PyGILState_Ensure), so a compile runs with the GIL held.
 *
 * Failures: a compile that raises records the exception under a number
 * and returns ccache_compile_fail() with "python#N type: message" as the
 * detail, which the library hands to every waiter of the key; the owner
 * re-raises its exception, each waiter a new one of the same type and
 * arguments (the original as __cause__), or CompileError with the
 * message when that type cannot be rebuilt. */
#include <stdio.h>
#include <string.h>

#include "pyccache.h"

#define FAILURES_KEPT 64

typedef struct {
  CacheObject *self;
  PyObject *fn;
  PyObject *exc; /* the owner's exception, if its compile raised */
  const ccache_strong_key *skey;
  uint64_t cost;
} compile_ud;

static int check_open(CacheObject *self) {
  if (self->c) return 0;
  PyErr_SetString(pyc_ClosedError, "the Cache is closed");
  return -1;
}

static KeyObject *key_arg(CacheObject *self, PyObject *o) {
  if (!PyObject_TypeCheck(o, &pyc_KeyType)) {
    PyErr_Format(PyExc_TypeError, "a ccache.Key is needed, not %.100s", Py_TYPE(o)->tp_name);
    return NULL;
  }
  KeyObject *k = (KeyObject *)o;
  if (k->strong != self->strong) {
    PyErr_SetString(PyExc_ValueError, self->strong ? "this strong cache takes strong keys"
                                                   : "this fast cache takes fast keys");
    return NULL;
  }
  return k;
}

/* ---- callbacks ---------------------------------------------------------- */

static void destroy_obj(void *obj, void *ctx) {
  (void)ctx;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return;
  Py_DECREF((PyObject *)obj);
  PyGILState_Release(g);
}

static const char *const event_kinds[] = {
    NULL,         "compile_start", "compile_end",  "tier_hit",      "tier_miss",
    "tier_write", "tier_error",    "tier_corrupt", "tier_rejected", "evict"};
static const char *const causes[] = {NULL,      "capacity", "ttl",      "cost",
                                     "removed", "cleared",  "replaced", "closed"};

static PyObject *str_or_none(const char *s) {
  if (s) return PyUnicode_FromString(s);
  Py_RETURN_NONE;
}

static void on_event(void *ctx, const ccache_event *ev) {
  CacheObject *self = ctx;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return;
  PyObject *e = PyStructSequence_New(pyc_EventType);
  if (e) {
    int kind = ev->kind >= 1 && ev->kind <= 9 ? ev->kind : 0;
    PyObject *items[11] = {str_or_none(event_kinds[kind]),
                           str_or_none(ev->level == CCACHE_LEVEL_CLOSURE   ? "closure"
                                       : ev->level == CCACHE_LEVEL_PROGRAM ? "program"
                                                                           : NULL),
                           pyc_key_new(ev->key, NULL),
                           PyLong_FromLong(ev->status),
                           PyLong_FromLong(ev->err),
                           str_or_none(ev->cause >= 1 && ev->cause <= 7 ? causes[ev->cause] : NULL),
                           PyLong_FromUnsignedLong(ev->tier),
                           str_or_none(ev->tier_name),
                           str_or_none(ev->op),
                           str_or_none(ev->reason),
                           PyLong_FromUnsignedLongLong(ev->duration_ns)};
    int ok = 1;
    for (int i = 0; i < 11; i++) {
      if (!items[i]) ok = 0;
      PyStructSequence_SET_ITEM(e, i, items[i] ? items[i] : (Py_INCREF(Py_None), Py_None));
    }
    PyObject *r = ok ? PyObject_CallOneArg(self->on_event, e) : NULL;
    Py_XDECREF(r);
    Py_DECREF(e);
  }
  if (PyErr_Occurred()) PyErr_WriteUnraisable(self->on_event);
  PyGILState_Release(g);
}

/* Keep the compile's exception; return the status for the library. */
static int record_failure(compile_ud *ud) {
  CacheObject *self = ud->self;
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (tb && v) PyException_SetTraceback(v, tb);
  Py_XDECREF(t);
  Py_XDECREF(tb);
  unsigned long long id = ++self->next_failure;
  PyObject *k = PyLong_FromUnsignedLongLong(id);
  if (k && v) PyDict_SetItem(self->failures, k, v);
  Py_XDECREF(k);
  if (id > FAILURES_KEPT) {
    PyObject *old = PyLong_FromUnsignedLongLong(id - FAILURES_KEPT);
    if (old && PyDict_DelItem(self->failures, old) < 0) PyErr_Clear();
    Py_XDECREF(old);
  }
  PyObject *msg = v ? PyObject_Str(v) : NULL;
  const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
  if (!m) {
    PyErr_Clear();
    m = "?";
  }
  int rc = ccache_compile_fail(CCACHE_ECOMPILE, "python#%llu %s: %s", id,
                               v ? Py_TYPE(v)->tp_name : "?", m);
  Py_XDECREF(msg);
  Py_XSETREF(ud->exc, v);
  return rc;
}

static int closure_compile(void *udp, ccache *c, ccache_key key, void **closure_out,
                           ccache_program **program_out) {
  compile_ud *ud = udp;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return CCACHE_ECOMPILE;
  int rc = 0;
  PyObject *r = PyObject_CallNoArgs(ud->fn);
  if (!r) {
    rc = record_failure(ud);
    PyGILState_Release(g);
    return rc;
  }
  PyObject *closure = r;
  ccache_program *p = NULL;
  if (PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 2 &&
      Py_IS_TYPE(PyTuple_GET_ITEM(r, 1), &pyc_ProgramType)) {
    ProgramObject *po = (ProgramObject *)PyTuple_GET_ITEM(r, 1);
    if (!po->p || po->cache != ud->self) {
      PyErr_SetString(PyExc_ValueError,
                      "compile returned a program handle that is released or of another cache");
      Py_DECREF(r);
      rc = record_failure(ud);
      PyGILState_Release(g);
      return rc;
    }
    closure = PyTuple_GET_ITEM(r, 0);
    p = po->p;
    po->p = NULL; /* handed to the cache */
  } else {
    /* The closure is its own program, interned under the same key. */
    Py_INCREF(r);
    rc = ud->skey ? ccache_program_intern_strong(c, ud->skey, r, 0, &p)
                  : ccache_program_intern(c, key, r, 0, &p);
    if (rc != CCACHE_OK) {
      Py_DECREF(r);
      PyGILState_Release(g);
      return ccache_compile_fail(rc, "interning the compiled object failed");
    }
  }
  Py_INCREF(closure);
  Py_DECREF(r);
  *closure_out = closure;
  *program_out = p;
  PyGILState_Release(g);
  return 0;
}

static int program_compile(void *udp, ccache *c, ccache_key pkey, void **native_out,
                           uint64_t *cost_out) {
  (void)c, (void)pkey;
  compile_ud *ud = udp;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return CCACHE_ECOMPILE;
  int rc = 0;
  PyObject *r = PyObject_CallNoArgs(ud->fn);
  if (!r) {
    rc = record_failure(ud);
  } else {
    *native_out = r;
    *cost_out = ud->cost;
  }
  PyGILState_Release(g);
  return rc;
}

/* Raise what a failed get-or-compile gets (GIL held). */
static PyObject *raise_failure(CacheObject *self, compile_ud *ud, int rc, const char *detail) {
  if (ud->exc) { /* the owner: its own exception, traceback included */
    PyObject *e = ud->exc;
    ud->exc = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
    return NULL;
  }
  unsigned long long id;
  if (rc == CCACHE_ECOMPILE && sscanf(detail, "python#%llu ", &id) == 1) {
    PyObject *k = PyLong_FromUnsignedLongLong(id);
    PyObject *orig = k ? PyDict_GetItemWithError(self->failures, k) : NULL;
    Py_XDECREF(k);
    if (orig) {
      PyObject *args = PyObject_GetAttrString(orig, "args");
      PyObject *n = args ? PyObject_Call((PyObject *)Py_TYPE(orig), args, NULL) : NULL;
      Py_XDECREF(args);
      if (!n || !PyExceptionInstance_Check(n)) {
        PyErr_Clear();
        Py_XDECREF(n);
        const char *m = strchr(detail, ' ');
        n = PyObject_CallFunction(pyc_CompileError, "s", m ? m + 1 : detail);
        if (!n) return NULL;
      }
      Py_INCREF(orig);
      PyException_SetCause(n, orig);
      PyErr_SetObject((PyObject *)Py_TYPE(n), n);
      Py_DECREF(n);
      return NULL;
    }
    PyErr_Clear();
  }
  return pyc_raise(rc, detail);
}

/* ---- closure table ------------------------------------------------------ */

static PyObject *lease_value(CacheObject *self, ccache_lease *l) {
  PyObject *r = l->closure;
  Py_INCREF(r);
  ccache_lease_release(self->c, l);
  return r;
}

static int fetch(CacheObject *self, KeyObject *k, ccache_lease *l) {
  return self->strong ? ccache_fetch_strong(self->c, &k->k, l) : ccache_fetch(self->c, k->k.key, l);
}

static PyObject *Cache_get_or_compile(CacheObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "get_or_compile(key, compile)");
    return NULL;
  }
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, args[0]);
  if (!k) return NULL;
  ccache_lease l;
  /* The hit: lock-free, GIL kept.  A miss here is counted once: the
   * library's get-or-compile right after a fetch miss of the same key on
   * the same thread does not count it again (src/core/closure.c). */
  int rc = fetch(self, k, &l);
  if (rc == CCACHE_OK) return lease_value(self, &l);
  if (rc != CCACHE_MISS) return pyc_raise(rc, NULL);
  compile_ud ud = {self, args[1], NULL, self->strong ? &k->k : NULL, 0};
  char detail[512] = "";
  Py_INCREF(self); /* a close from another thread is refused while we wait */
  self->active++;
  Py_BEGIN_ALLOW_THREADS rc =
      self->strong ? ccache_get_or_compile_strong(self->c, &k->k, closure_compile, &ud, &l)
                   : ccache_get_or_compile(self->c, k->k.key, closure_compile, &ud, &l);
  if (rc != CCACHE_OK) snprintf(detail, sizeof detail, "%s", ccache_error_detail());
  Py_END_ALLOW_THREADS self->active--;
  PyObject *r = rc == CCACHE_OK ? lease_value(self, &l) : raise_failure(self, &ud, rc, detail);
  Py_XDECREF(ud.exc);
  Py_DECREF(self);
  return r;
}

static PyObject *Cache_fetch(CacheObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n < 1 || n > 2) {
    PyErr_SetString(PyExc_TypeError, "fetch(key, default=None)");
    return NULL;
  }
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, args[0]);
  if (!k) return NULL;
  ccache_lease l;
  int rc = fetch(self, k, &l);
  if (rc == CCACHE_OK) return lease_value(self, &l);
  if (rc != CCACHE_MISS) return pyc_raise(rc, NULL);
  PyObject *d = n == 2 ? args[1] : Py_None;
  Py_INCREF(d);
  return d;
}

static PyObject *Cache_put(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"key", "closure", "program", NULL};
  PyObject *ko, *closure, *prog = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:put", names, &ko, &closure, &prog)) return NULL;
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, ko);
  if (!k) return NULL;
  ccache_program *p = NULL, *own = NULL;
  int rc;
  if (prog != Py_None) {
    if (!Py_IS_TYPE(prog, &pyc_ProgramType) || !((ProgramObject *)prog)->p ||
        ((ProgramObject *)prog)->cache != self) {
      PyErr_SetString(PyExc_ValueError, "put: program must be a live handle of this cache");
      return NULL;
    }
    p = ((ProgramObject *)prog)->p;
  } else {
    Py_INCREF(closure);
    rc = self->strong ? ccache_program_intern_strong(self->c, &k->k, closure, 0, &own)
                      : ccache_program_intern(self->c, k->k.key, closure, 0, &own);
    if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
    p = own;
  }
  Py_INCREF(closure);
  rc = self->strong ? ccache_put_strong(self->c, &k->k, closure, p)
                    : ccache_put(self->c, k->k.key, closure, p);
  if (own) ccache_program_release(self->c, own);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}

static PyObject *Cache_remove(CacheObject *self, PyObject *ko) {
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, ko);
  if (!k) return NULL;
  int rc = self->strong ? ccache_remove_strong(self->c, &k->k) : ccache_remove(self->c, k->k.key);
  if (rc == CCACHE_OK) Py_RETURN_TRUE;
  if (rc == CCACHE_MISS) Py_RETURN_FALSE;
  return pyc_raise(rc, NULL);
}

static PyObject *Cache_clear(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) < 0) return NULL;
  int rc = ccache_clear(self->c);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}

static PyObject *Cache_sweep(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) < 0) return NULL;
  int64_t rc = ccache_sweep(self->c);
  if (rc < 0) return pyc_raise((int)rc, NULL);
  return PyLong_FromLongLong(rc);
}

/* ---- bounds ------------------------------------------------------------- */

static int bound_arg(PyObject *v, uint64_t *out) {
  if (v == Py_None) {
    *out = CCACHE_UNBOUNDED;
    return 0;
  }
  long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) return -1;
  if (x < 1) {
    PyErr_SetString(PyExc_ValueError, "a bound is None (unbounded) or >= 1");
    return -1;
  }
  *out = (uint64_t)x;
  return 0;
}

static PyObject *bound_obj(uint64_t v) {
  if (v == CCACHE_UNBOUNDED) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(v);
}

static PyObject *Cache_limits(CacheObject *self, void *c) {
  (void)c;
  if (check_open(self) < 0) return NULL;
  uint64_t a, b, d;
  int rc = ccache_get_limits(self->c, &a, &b, &d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return Py_BuildValue("{sNsNsN}", "max_items", bound_obj(a), "ttl_ms", bound_obj(b),
                       "max_cost_bytes", bound_obj(d));
}

static PyObject *Cache_set_limits(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"max_items", "ttl_ms", "max_cost_bytes", NULL};
  PyObject *oa = NULL, *ob = NULL, *od = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOO:set_limits", names, &oa, &ob, &od)) return NULL;
  if (check_open(self) < 0) return NULL;
  uint64_t a, b, d;
  int rc = ccache_get_limits(self->c, &a, &b, &d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  if ((oa && bound_arg(oa, &a) < 0) || (ob && bound_arg(ob, &b) < 0) ||
      (od && bound_arg(od, &d) < 0))
    return NULL;
  rc = ccache_set_limits(self->c, a, b, d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}

/* ---- program table ------------------------------------------------------ */

static PyObject *program_obj(CacheObject *self, ccache_program *p) {
  ProgramObject *o = PyObject_New(ProgramObject, &pyc_ProgramType);
  if (!o) {
    ccache_program_release(self->c, p);
    return NULL;
  }
  Py_INCREF(self);
  o->cache = self;
  o->p = p;
  return (PyObject *)o;
}

static PyObject *Cache_program(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"pkey", "compile", "cost", NULL};
  PyObject *ko, *fn;
  unsigned long long cost = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$K:program", names, &ko, &fn, &cost)) return NULL;
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, ko);
  if (!k) return NULL;
  compile_ud ud = {self, fn, NULL, NULL, cost};
  ccache_program *p = NULL;
  char detail[512] = "";
  int rc;
  Py_INCREF(self);
  self->active++;
  Py_BEGIN_ALLOW_THREADS rc =
      self->strong ? ccache_program_get_or_compile_strong(self->c, &k->k, program_compile, &ud, &p)
                   : ccache_program_get_or_compile(self->c, k->k.key, program_compile, &ud, &p);
  if (rc != CCACHE_OK) snprintf(detail, sizeof detail, "%s", ccache_error_detail());
  Py_END_ALLOW_THREADS self->active--;
  PyObject *r = rc == CCACHE_OK ? program_obj(self, p) : raise_failure(self, &ud, rc, detail);
  Py_XDECREF(ud.exc);
  Py_DECREF(self);
  return r;
}

static PyObject *Cache_intern(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"pkey", "native", "cost", NULL};
  PyObject *ko, *native;
  unsigned long long cost = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$K:intern", names, &ko, &native, &cost))
    return NULL;
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, ko);
  if (!k) return NULL;
  ccache_program *p = NULL;
  Py_INCREF(native);
  int rc = self->strong ? ccache_program_intern_strong(self->c, &k->k, native, cost, &p)
                        : ccache_program_intern(self->c, k->k.key, native, cost, &p);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return program_obj(self, p);
}

static PyObject *Cache_program_fetch(CacheObject *self, PyObject *ko) {
  if (check_open(self) < 0) return NULL;
  KeyObject *k = key_arg(self, ko);
  if (!k) return NULL;
  ccache_program *p = NULL;
  int rc = self->strong ? ccache_program_fetch_strong(self->c, &k->k, &p)
                        : ccache_program_fetch(self->c, k->k.key, &p);
  if (rc == CCACHE_MISS) Py_RETURN_NONE;
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return program_obj(self, p);
}

/* ---- stats, close ------------------------------------------------------- */

static PyObject *Cache_stats(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (check_open(self) < 0) return NULL;
  ccache_stats s;
  ccache_stats_init(&s);
  int rc = ccache_stats_get(self->c, &s);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return pyc_stats_new(&s);
}

static int do_close(CacheObject *self, unsigned flags) {
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = ccache_close_ex(self->c, flags);
  Py_END_ALLOW_THREADS return rc;
}

static PyObject *close_cache(CacheObject *self, int abandon) {
  if (!self->c) Py_RETURN_NONE;
  if (self->active > 0) { /* a call released the GIL inside the library */
    PyErr_SetString(pyc_BusyError,
                    "close: a get_or_compile or program call is in flight "
                    "(on another thread, or this close comes from its compile)");
    return NULL;
  }
  int rc = do_close(self, abandon ? CCACHE_CLOSE_ABANDON : 0);
  if (rc == CCACHE_EFORKED) { /* the parent's cache: nothing of it is ours here */
    self->c = NULL;
    Py_RETURN_NONE;
  }
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  self->c = NULL;
  Py_RETURN_NONE;
}

static PyObject *Cache_close(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"abandon", NULL};
  int abandon = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:close", names, &abandon)) return NULL;
  return close_cache(self, abandon);
}

static PyObject *Cache_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  Py_INCREF(self);
  return self;
}

static PyObject *Cache_exit(CacheObject *self, PyObject *args) {
  (void)args;
  return close_cache(self, 0);
}

static void Cache_dealloc(CacheObject *self) {
  if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
  if (self->c) {
    /* No handle can be out (each holds a reference to this object). */
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    (void)do_close(self, CCACHE_CLOSE_ABANDON);
    PyErr_Restore(t, v, tb);
    self->c = NULL;
  }
  Py_XDECREF(self->codec);
  Py_XDECREF(self->on_event);
  Py_XDECREF(self->failures);
  Py_XDECREF(self->last_codec_error);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- open --------------------------------------------------------------- */

static int build_trust(PyObject *signing, PyObject *keys, PyObject *key_files, ccache_trust **out) {
  *out = NULL;
  Py_ssize_t nk = keys ? PySequence_Size(keys) : 0, nf = key_files ? PySequence_Size(key_files) : 0;
  if (nk < 0 || nf < 0) return -1;
  if ((!signing || signing == Py_None) && nk == 0 && nf == 0) return 0;
  ccache_trust *t = NULL;
  int rc = ccache_trust_new(&t);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL), -1;
  if (signing && signing != Py_None) {
    PyObject *p = NULL;
    if (!PyUnicode_FSConverter(signing, &p)) goto fail;
    rc = ccache_trust_set_signing_key_file(t, PyBytes_AS_STRING(p));
    Py_DECREF(p);
    if (rc != CCACHE_OK) {
      pyc_raise(rc, NULL);
      goto fail;
    }
  }
  for (Py_ssize_t i = 0; i < nk + nf; i++) {
    PyObject *item = i < nk ? PySequence_GetItem(keys, i) : PySequence_GetItem(key_files, i - nk);
    PyObject *p = NULL;
    if (!item || !PyUnicode_FSConverter(item, &p)) {
      Py_XDECREF(item);
      goto fail;
    }
    Py_DECREF(item);
    rc = i < nk ? ccache_trust_add_key(t, PyBytes_AS_STRING(p))
                : ccache_trust_add_key_file(t, PyBytes_AS_STRING(p));
    Py_DECREF(p);
    if (rc != CCACHE_OK) {
      pyc_raise(rc, NULL);
      goto fail;
    }
  }
  *out = t;
  return 0;
fail:
  ccache_trust_free(t);
  return -1;
}

static int Cache_init(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"max_items",
                          "ttl_ms",
                          "max_cost_bytes",
                          "tiers",
                          "codec",
                          "runtime_tag",
                          "key_mode",
                          "on_event",
                          "signing_key_file",
                          "trusted_keys",
                          "trusted_key_files",
                          "trust_unsigned",
                          "tier_min_compile_us",
                          "tier_max_entry_bytes",
                          "sweeper_thread",
                          NULL};
  PyObject *mi = Py_None, *ttl = Py_None, *mc = Py_None, *tiers = NULL, *codec = Py_None,
           *event = Py_None, *signing = Py_None, *keys = NULL, *key_files = NULL, *min_us = Py_None,
           *max_entry = Py_None;
  const char *tag = NULL, *mode = "fast";
  int unsigned_ok = 0, sweeper = 1;
  if (self->c) {
    PyErr_SetString(PyExc_RuntimeError, "Cache.__init__ called twice");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOOOzsOOOOpOOp:Cache", names, &mi, &ttl, &mc,
                                   &tiers, &codec, &tag, &mode, &event, &signing, &keys, &key_files,
                                   &unsigned_ok, &min_us, &max_entry, &sweeper))
    return -1;
  ccache_config cfg;
  ccache_config_init(&cfg);
  cfg.sweeper_thread = sweeper;
  if (bound_arg(mi, &cfg.max_items) < 0 || bound_arg(ttl, &cfg.ttl_ms) < 0 ||
      bound_arg(mc, &cfg.max_cost_bytes) < 0)
    return -1;
  if (min_us != Py_None) {
    cfg.tier_min_compile_us = PyLong_AsUnsignedLongLong(min_us);
    if (PyErr_Occurred()) return -1;
  }
  if (max_entry != Py_None && bound_arg(max_entry, &cfg.tier_max_entry_bytes) < 0) return -1;
  if (strcmp(mode, "fast") == 0) {
    cfg.key_mode = CCACHE_KEYS_FAST;
  } else if (strcmp(mode, "strong") == 0) {
    cfg.key_mode = CCACHE_KEYS_STRONG;
  } else {
    PyErr_SetString(PyExc_ValueError, "key_mode: 'fast' or 'strong'");
    return -1;
  }
  self->strong = cfg.key_mode == CCACHE_KEYS_STRONG;
  cfg.runtime_tag = tag;
  cfg.destroy_closure = destroy_obj;
  cfg.destroy_program = destroy_obj;
  cfg.ctx = self;
  if (event != Py_None) {
    if (!PyCallable_Check(event)) {
      PyErr_SetString(PyExc_TypeError, "on_event: a callable taking one ccache.Event");
      return -1;
    }
    Py_INCREF(event);
    Py_XSETREF(self->on_event, event);
    cfg.on_event = on_event;
    cfg.event_ctx = self;
  }
  self->failures = PyDict_New();
  if (!self->failures) return -1;

  ccache_tier *tv[CCACHE_MAX_TIERS];
  TierObject *to[CCACHE_MAX_TIERS];
  Py_ssize_t nt = 0;
  int shared = 0;
  PyObject *seq = NULL;
  if (tiers && tiers != Py_None) {
    seq = PySequence_Fast(tiers, "tiers: a sequence of DirectoryTier / RedisTier");
    if (!seq) return -1;
    nt = PySequence_Fast_GET_SIZE(seq);
    if (nt > (Py_ssize_t)CCACHE_MAX_TIERS) {
      PyErr_SetString(PyExc_ValueError, "tiers: at most 8");
      goto fail_seq;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
      PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
      if (!Py_IS_TYPE(o, &pyc_DirectoryTierType) && !Py_IS_TYPE(o, &pyc_RedisTierType)) {
        PyErr_SetString(PyExc_TypeError, "tiers: DirectoryTier or RedisTier objects");
        goto fail_seq;
      }
      to[i] = (TierObject *)o;
      if (!to[i]->tier) {
        PyErr_SetString(PyExc_ValueError, "tiers: this tier belongs to another Cache already");
        goto fail_seq;
      }
      tv[i] = to[i]->tier;
      shared |= to[i]->shared;
    }
    if (nt > 0 && codec == Py_None) {
      PyErr_SetString(PyExc_ValueError, "tiers need a codec (encode(obj) -> bytes, decode(bytes))");
      goto fail_seq;
    }
  }
  if (codec != Py_None) {
    if (pyc_codec_setup(self, codec) < 0) goto fail_seq;
    cfg.codec = &self->ccodec;
  }
  cfg.tiers = nt ? tv : NULL;
  cfg.n_tiers = (uint32_t)nt;
  ccache_trust *trust = NULL;
  if (build_trust(signing, keys, key_files, &trust) < 0) goto fail_seq;
  /* Safe by default: a tier others can write to hands every process a
   * program to run, so it needs keys, or the explicit opt-out. */
  if (shared && !trust && !unsigned_ok) {
    PyErr_SetString(PyExc_ValueError,
                    "a Redis tier is shared (others can write to it): give trusted_keys / "
                    "trusted_key_files (and signing_key_file on writers), or pass "
                    "trust_unsigned=True to accept unsigned entries");
    goto fail_seq;
  }
  cfg.trust = trust;
  cfg.trust_flags = unsigned_ok ? CCACHE_TRUST_UNSIGNED : 0;
  ccache *c = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = ccache_open(&cfg, &c);
  Py_END_ALLOW_THREADS ccache_trust_free(trust);
  if (rc != CCACHE_OK) {
    pyc_raise(rc, NULL);
    goto fail_seq;
  }
  for (Py_ssize_t i = 0; i < nt; i++) to[i]->tier = NULL; /* the cache's now */
  Py_XDECREF(seq);
  self->c = c;
  return 0;
fail_seq:
  Py_XDECREF(seq);
  return -1;
}

static PyObject *Cache_get_strong(CacheObject *self, void *c) {
  (void)c;
  return PyBool_FromLong(self->strong);
}

static PyObject *Cache_get_closed(CacheObject *self, void *c) {
  (void)c;
  return PyBool_FromLong(self->c == NULL);
}

static PyObject *Cache_get_codec_error(CacheObject *self, void *c) {
  (void)c;
  PyObject *e = self->last_codec_error ? self->last_codec_error : Py_None;
  Py_INCREF(e);
  return e;
}

static PyMethodDef Cache_methods[] = {
    {"get_or_compile", (PyCFunction)(void (*)(void))Cache_get_or_compile, METH_FASTCALL,
     "get_or_compile(key, compile): the closure under key, or compile() once whatever the "
     "number of concurrent callers."},
    {"fetch", (PyCFunction)(void (*)(void))Cache_fetch, METH_FASTCALL,
     "fetch(key, default=None): the closure under key, or default."},
    {"put", (PyCFunction)(void (*)(void))Cache_put, METH_VARARGS | METH_KEYWORDS,
     "put(key, closure, program=None): store closure under key."},
    {"remove", (PyCFunction)Cache_remove, METH_O, "remove(key) -> True if it was there."},
    {"clear", (PyCFunction)Cache_clear, METH_NOARGS, "Remove every closure entry."},
    {"sweep", (PyCFunction)Cache_sweep, METH_NOARGS, "Remove expired entries; their number."},
    {"set_limits", (PyCFunction)(void (*)(void))Cache_set_limits, METH_VARARGS | METH_KEYWORDS,
     "set_limits(*, max_items=, ttl_ms=, max_cost_bytes=): change the bounds given (None: "
     "unbounded)."},
    {"program", (PyCFunction)(void (*)(void))Cache_program, METH_VARARGS | METH_KEYWORDS,
     "program(pkey, compile, *, cost=0) -> Program: the program under pkey, from the tiers "
     "or compile() once."},
    {"intern", (PyCFunction)(void (*)(void))Cache_intern, METH_VARARGS | METH_KEYWORDS,
     "intern(pkey, native, *, cost=0) -> Program."},
    {"program_fetch", (PyCFunction)Cache_program_fetch, METH_O,
     "program_fetch(pkey) -> Program or None (no tier, no compile)."},
    {"stats", (PyCFunction)Cache_stats, METH_NOARGS, "A Stats snapshot."},
    {"close", (PyCFunction)(void (*)(void))Cache_close, METH_VARARGS | METH_KEYWORDS,
     "close(*, abandon=False): destroy every entry and close the tiers."},
    {"__enter__", Cache_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Cache_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Cache_getset[] = {
    {"limits", (getter)Cache_limits, NULL, "the current bounds (None: unbounded)", NULL},
    {"strong", (getter)Cache_get_strong, NULL, "True for a key_mode='strong' cache", NULL},
    {"closed", (getter)Cache_get_closed, NULL, "True after close()", NULL},
    {"last_codec_error", (getter)Cache_get_codec_error, NULL,
     "the last exception the codec raised (counted in tier_errors or tier_corrupt)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyc_CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache._ccache.Cache",
    .tp_basicsize = sizeof(CacheObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Cache(*, max_items=None, ttl_ms=None, max_cost_bytes=None, tiers=(), codec=None, "
        "...): a compile cache.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Cache_init,
    .tp_dealloc = (destructor)Cache_dealloc,
    .tp_methods = Cache_methods,
    .tp_getset = Cache_getset,
    .tp_weaklistoffset = offsetof(CacheObject, weakreflist),
};
