/* ccache._ccache.Cache: the closure and program tables: get_or_compile,
 * fetch, put, remove, clear, sweep, program, intern, program_fetch, and
 * the compile callbacks behind them.  The type and its lifetime: cache.c.
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

/* ---- compile callbacks -------------------------------------------------- */

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

PyObject *pyc_Cache_get_or_compile(CacheObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "get_or_compile(key, compile)");
    return NULL;
  }
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, args[0]);
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

PyObject *pyc_Cache_fetch(CacheObject *self, PyObject *const *args, Py_ssize_t n) {
  if (n < 1 || n > 2) {
    PyErr_SetString(PyExc_TypeError, "fetch(key, default=None)");
    return NULL;
  }
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, args[0]);
  if (!k) return NULL;
  ccache_lease l;
  int rc = fetch(self, k, &l);
  if (rc == CCACHE_OK) return lease_value(self, &l);
  if (rc != CCACHE_MISS) return pyc_raise(rc, NULL);
  PyObject *d = n == 2 ? args[1] : Py_None;
  Py_INCREF(d);
  return d;
}

PyObject *pyc_Cache_put(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"key", "closure", "program", NULL};
  PyObject *ko, *closure, *prog = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:put", names, &ko, &closure, &prog)) return NULL;
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, ko);
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

PyObject *pyc_Cache_remove(CacheObject *self, PyObject *ko) {
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, ko);
  if (!k) return NULL;
  int rc = self->strong ? ccache_remove_strong(self->c, &k->k) : ccache_remove(self->c, k->k.key);
  if (rc == CCACHE_OK) Py_RETURN_TRUE;
  if (rc == CCACHE_MISS) Py_RETURN_FALSE;
  return pyc_raise(rc, NULL);
}

PyObject *pyc_Cache_clear(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (pyc_cache_check_open(self) < 0) return NULL;
  int rc = ccache_clear(self->c);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}

PyObject *pyc_Cache_sweep(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (pyc_cache_check_open(self) < 0) return NULL;
  int64_t rc = ccache_sweep(self->c);
  if (rc < 0) return pyc_raise((int)rc, NULL);
  return PyLong_FromLongLong(rc);
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

PyObject *pyc_Cache_program(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"pkey", "compile", "cost", NULL};
  PyObject *ko, *fn;
  unsigned long long cost = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$K:program", names, &ko, &fn, &cost)) return NULL;
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, ko);
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

PyObject *pyc_Cache_intern(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"pkey", "native", "cost", NULL};
  PyObject *ko, *native;
  unsigned long long cost = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$K:intern", names, &ko, &native, &cost))
    return NULL;
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, ko);
  if (!k) return NULL;
  ccache_program *p = NULL;
  Py_INCREF(native);
  int rc = self->strong ? ccache_program_intern_strong(self->c, &k->k, native, cost, &p)
                        : ccache_program_intern(self->c, k->k.key, native, cost, &p);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return program_obj(self, p);
}

PyObject *pyc_Cache_program_fetch(CacheObject *self, PyObject *ko) {
  if (pyc_cache_check_open(self) < 0) return NULL;
  KeyObject *k = pyc_cache_key_arg(self, ko);
  if (!k) return NULL;
  ccache_program *p = NULL;
  int rc = self->strong ? ccache_program_fetch_strong(self->c, &k->k, &p)
                        : ccache_program_fetch(self->c, k->k.key, &p);
  if (rc == CCACHE_MISS) Py_RETURN_NONE;
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return program_obj(self, p);
}
