/* ccache._ccache.Cache: what a cache reports and how it is bounded:
 * stats(), the limits attribute and set_limits(), and the on_event hook
 * (each library event as a ccache.Event, on the thread it happens on, with
 * the GIL taken).  The type and its lifetime: cache.c. */
#include "pyccache.h"

/* ---- events ------------------------------------------------------------- */

static const char *const event_kinds[] = {
    NULL,         "compile_start", "compile_end",  "tier_hit",      "tier_miss",
    "tier_write", "tier_error",    "tier_corrupt", "tier_rejected", "evict"};
static const char *const causes[] = {NULL,      "capacity", "ttl",      "cost",
                                     "removed", "cleared",  "replaced", "closed"};

static PyObject *str_or_none(const char *s) {
  if (s) return PyUnicode_FromString(s);
  Py_RETURN_NONE;
}

void pyc_cache_on_event(void *ctx, const ccache_event *ev) {
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

/* ---- stats -------------------------------------------------------------- */

PyObject *pyc_Cache_stats(CacheObject *self, PyObject *unused) {
  (void)unused;
  if (pyc_cache_check_open(self) < 0) return NULL;
  ccache_stats s;
  ccache_stats_init(&s);
  int rc = ccache_stats_get(self->c, &s);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return pyc_stats_new(&s);
}

/* ---- bounds ------------------------------------------------------------- */

int pyc_bound_arg(PyObject *v, uint64_t *out) {
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

PyObject *pyc_Cache_limits(CacheObject *self, void *c) {
  (void)c;
  if (pyc_cache_check_open(self) < 0) return NULL;
  uint64_t a, b, d;
  int rc = ccache_get_limits(self->c, &a, &b, &d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  return Py_BuildValue("{sNsNsN}", "max_items", bound_obj(a), "ttl_ms", bound_obj(b),
                       "max_cost_bytes", bound_obj(d));
}

PyObject *pyc_Cache_set_limits(CacheObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"max_items", "ttl_ms", "max_cost_bytes", NULL};
  PyObject *oa = NULL, *ob = NULL, *od = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOO:set_limits", names, &oa, &ob, &od)) return NULL;
  if (pyc_cache_check_open(self) < 0) return NULL;
  uint64_t a, b, d;
  int rc = ccache_get_limits(self->c, &a, &b, &d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  if ((oa && pyc_bound_arg(oa, &a) < 0) || (ob && pyc_bound_arg(ob, &b) < 0) ||
      (od && pyc_bound_arg(od, &d) < 0))
    return NULL;
  rc = ccache_set_limits(self->c, a, b, d);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}
