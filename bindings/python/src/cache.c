/* ccache._ccache.Cache: one ccache per object.  This file: the type and
 * its lifetime: open (the arguments made into a ccache_config: bounds,
 * tiers and codec, trust), close, deallocation, the attributes and the
 * method table.  The lookups and compiles: cache_lookup.c; stats, limits
 * and the event hook: cache_stats.c.
 *
 * Threads: open and close release the GIL for the library call; close is
 * refused while another call is inside the library without it (the count
 * cache_lookup.c keeps in self->active). */
#include <string.h>

#include "pyccache.h"

int pyc_cache_check_open(CacheObject *self) {
  if (self->c) return 0;
  PyErr_SetString(pyc_ClosedError, "the Cache is closed");
  return -1;
}

KeyObject *pyc_cache_key_arg(CacheObject *self, PyObject *o) {
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

/* ---- close -------------------------------------------------------------- */

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
  if (pyc_bound_arg(mi, &cfg.max_items) < 0 || pyc_bound_arg(ttl, &cfg.ttl_ms) < 0 ||
      pyc_bound_arg(mc, &cfg.max_cost_bytes) < 0)
    return -1;
  if (min_us != Py_None) {
    cfg.tier_min_compile_us = PyLong_AsUnsignedLongLong(min_us);
    if (PyErr_Occurred()) return -1;
  }
  if (max_entry != Py_None && pyc_bound_arg(max_entry, &cfg.tier_max_entry_bytes) < 0) return -1;
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
    cfg.on_event = pyc_cache_on_event;
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
    {"get_or_compile", (PyCFunction)(void (*)(void))pyc_Cache_get_or_compile, METH_FASTCALL,
     "get_or_compile(key, compile): the closure under key, or compile() once whatever the "
     "number of concurrent callers."},
    {"fetch", (PyCFunction)(void (*)(void))pyc_Cache_fetch, METH_FASTCALL,
     "fetch(key, default=None): the closure under key, or default."},
    {"put", (PyCFunction)(void (*)(void))pyc_Cache_put, METH_VARARGS | METH_KEYWORDS,
     "put(key, closure, program=None): store closure under key."},
    {"remove", (PyCFunction)pyc_Cache_remove, METH_O, "remove(key) -> True if it was there."},
    {"clear", (PyCFunction)pyc_Cache_clear, METH_NOARGS, "Remove every closure entry."},
    {"sweep", (PyCFunction)pyc_Cache_sweep, METH_NOARGS, "Remove expired entries; their number."},
    {"set_limits", (PyCFunction)(void (*)(void))pyc_Cache_set_limits, METH_VARARGS | METH_KEYWORDS,
     "set_limits(*, max_items=, ttl_ms=, max_cost_bytes=): change the bounds given (None: "
     "unbounded)."},
    {"program", (PyCFunction)(void (*)(void))pyc_Cache_program, METH_VARARGS | METH_KEYWORDS,
     "program(pkey, compile, *, cost=0) -> Program: the program under pkey, from the tiers "
     "or compile() once."},
    {"intern", (PyCFunction)(void (*)(void))pyc_Cache_intern, METH_VARARGS | METH_KEYWORDS,
     "intern(pkey, native, *, cost=0) -> Program."},
    {"program_fetch", (PyCFunction)pyc_Cache_program_fetch, METH_O,
     "program_fetch(pkey) -> Program or None (no tier, no compile)."},
    {"stats", (PyCFunction)pyc_Cache_stats, METH_NOARGS, "A Stats snapshot."},
    {"close", (PyCFunction)(void (*)(void))Cache_close, METH_VARARGS | METH_KEYWORDS,
     "close(*, abandon=False): destroy every entry and close the tiers."},
    {"__enter__", Cache_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Cache_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Cache_getset[] = {
    {"limits", (getter)pyc_Cache_limits, NULL, "the current bounds (None: unbounded)", NULL},
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
