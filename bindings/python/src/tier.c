/* ccache._ccache: the directory and Redis tiers, program handles, and the
 * codec glue (a Python object with encode(obj) -> bytes and
 * decode(bytes) -> obj behind the library's ccache_codec). */
#include <stddef.h>
#include <string.h>

#include "pyccache.h"
#include <structmember.h>

/* ---- tiers -------------------------------------------------------------- */

static void Tier_dealloc(TierObject *t) {
  if (t->tier) ccache_tier_free(t->tier); /* never given to a cache */
  Py_XDECREF(t->where);
  Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *Tier_repr(TierObject *t) {
  return PyUnicode_FromFormat("%s(%R%s)", Py_TYPE(t)->tp_name, t->where,
                              t->tier ? "" : ", taken by a Cache");
}

/* An optional millisecond/byte option: None keeps the default. */
static int opt_u64(PyObject *v, uint64_t *out, int unbounded_ok) {
  if (!v || v == Py_None) return 0;
  if (unbounded_ok && PyFloat_Check(v) && Py_IS_INFINITY(PyFloat_AS_DOUBLE(v))) {
    *out = CCACHE_UNBOUNDED;
    return 0;
  }
  unsigned long long x = PyLong_AsUnsignedLongLong(v);
  if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = x;
  return 0;
}

static PyObject *DirTier_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *names[] = {"path",         "max_bytes",         "fsync",
                          "lock_wait_ms", "lock_poll_ms",      "lock_poll_max_ms",
                          "io_lock_ms",   "touch_interval_ms", NULL};
  PyObject *path, *max_bytes = NULL, *wait = NULL, *poll = NULL, *pollmax = NULL, *io = NULL,
                  *touch = NULL;
  int fsync = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$OpOOOOO:DirectoryTier", names,
                                   PyUnicode_FSConverter, &path, &max_bytes, &fsync, &wait, &poll,
                                   &pollmax, &io, &touch))
    return NULL;
  ccache_disk_options o;
  ccache_disk_options_init(&o);
  o.dir = PyBytes_AS_STRING(path);
  o.fsync = fsync;
  if (opt_u64(max_bytes, &o.max_bytes, 1) < 0 || opt_u64(wait, &o.lock_wait_ms, 0) < 0 ||
      opt_u64(poll, &o.lock_poll_ms, 0) < 0 || opt_u64(pollmax, &o.lock_poll_max_ms, 0) < 0 ||
      opt_u64(io, &o.io_lock_ms, 0) < 0 || opt_u64(touch, &o.touch_interval_ms, 0) < 0) {
    Py_DECREF(path);
    return NULL;
  }
  ccache_tier *tier = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = ccache_tier_disk(&o, &tier);
  Py_END_ALLOW_THREADS if (rc != CCACHE_OK) {
    PyObject *r = pyc_raise(rc, NULL);
    Py_DECREF(path);
    return r;
  }
  TierObject *t = (TierObject *)type->tp_alloc(type, 0);
  if (!t) {
    ccache_tier_free(tier);
    Py_DECREF(path);
    return NULL;
  }
  t->tier = tier;
  t->shared = 0;
  t->where = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path));
  Py_DECREF(path);
  if (!t->where) {
    Py_DECREF(t);
    return NULL;
  }
  return (PyObject *)t;
}

static PyObject *RedisTier_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *names[] = {"servers",
                          "prefix",
                          "user",
                          "password",
                          "connect_timeout_ms",
                          "command_timeout_ms",
                          "entry_ttl_ms",
                          "lease_ms",
                          "poll_ms",
                          "poll_max_ms",
                          "wait_ms",
                          NULL};
  const char *servers, *prefix = NULL, *user = NULL, *password = NULL;
  PyObject *ct = NULL, *cmd = NULL, *ttl = NULL, *lease = NULL, *poll = NULL, *pollmax = NULL,
           *wait = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$zzzOOOOOOO:RedisTier", names, &servers, &prefix,
                                   &user, &password, &ct, &cmd, &ttl, &lease, &poll, &pollmax,
                                   &wait))
    return NULL;
  ccache_redis_options o;
  ccache_redis_options_init(&o);
  o.servers = servers;
  o.prefix = prefix;
  o.user = user;
  o.password = password;
  if (opt_u64(ct, &o.connect_timeout_ms, 0) < 0 || opt_u64(cmd, &o.command_timeout_ms, 0) < 0 ||
      opt_u64(ttl, &o.entry_ttl_ms, 1) < 0 || opt_u64(lease, &o.lease_ms, 0) < 0 ||
      opt_u64(poll, &o.poll_ms, 0) < 0 || opt_u64(pollmax, &o.poll_max_ms, 0) < 0 ||
      opt_u64(wait, &o.wait_ms, 0) < 0)
    return NULL;
  ccache_tier *tier = NULL;
  int rc = ccache_tier_redis(&o, &tier);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  TierObject *t = (TierObject *)type->tp_alloc(type, 0);
  if (!t) {
    ccache_tier_free(tier);
    return NULL;
  }
  t->tier = tier;
  t->shared = 1;
  t->where = PyUnicode_FromString(servers);
  if (!t->where) {
    Py_DECREF(t);
    return NULL;
  }
  return (PyObject *)t;
}

static PyObject *Tier_get_shared(TierObject *t, void *c) {
  (void)c;
  return PyBool_FromLong(t->shared);
}

static PyGetSetDef Tier_getset[] = {
    {"shared", (getter)Tier_get_shared, NULL,
     "True when others can write to it (needs trusted keys or trust_unsigned=True)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef Tier_members[] = {
    {"where", T_OBJECT, offsetof(TierObject, where), READONLY, "the directory or servers"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject pyc_DirectoryTierType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache.DirectoryTier",
    .tp_basicsize = sizeof(TierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "DirectoryTier(path, *, max_bytes=None, fsync=False, lock_wait_ms=None, ...): "
        "one file per program in a private directory; one compile per machine and key.",
    .tp_new = DirTier_new,
    .tp_dealloc = (destructor)Tier_dealloc,
    .tp_repr = (reprfunc)Tier_repr,
    .tp_getset = Tier_getset,
    .tp_members = Tier_members,
};

PyTypeObject pyc_RedisTierType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache.RedisTier",
    .tp_basicsize = sizeof(TierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "RedisTier(servers, *, prefix=None, user=None, password=None, ...): a fleet's "
        "shared tier; one compile per fleet and key.",
    .tp_new = RedisTier_new,
    .tp_dealloc = (destructor)Tier_dealloc,
    .tp_repr = (reprfunc)Tier_repr,
    .tp_getset = Tier_getset,
    .tp_members = Tier_members,
};

/* ---- program handles ---------------------------------------------------- */

static PyObject *Program_release(ProgramObject *p, PyObject *unused) {
  (void)unused;
  if (p->p && p->cache->c) {
    ccache_program *h = p->p;
    p->p = NULL;
    ccache_program_release(p->cache->c, h); /* may drop the native: GIL held */
  }
  p->p = NULL;
  Py_RETURN_NONE;
}

static void Program_dealloc(ProgramObject *p) {
  if (p->p && p->cache && p->cache->c) ccache_program_release(p->cache->c, p->p);
  Py_XDECREF(p->cache);
  Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *Program_native(ProgramObject *p, void *c) {
  (void)c;
  if (!p->p) {
    PyErr_SetString(PyExc_ValueError, "program handle released or handed to the cache");
    return NULL;
  }
  PyObject *n = ccache_program_native(p->p);
  Py_INCREF(n);
  return n;
}

static PyObject *Program_enter(PyObject *p, PyObject *unused) {
  (void)unused;
  Py_INCREF(p);
  return p;
}

static PyObject *Program_exit(ProgramObject *p, PyObject *args) {
  (void)args;
  return Program_release(p, NULL);
}

static PyMethodDef Program_methods[] = {
    {"release", (PyCFunction)Program_release, METH_NOARGS,
     "Give the handle back (idempotent; also on garbage collection)."},
    {"__enter__", Program_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Program_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Program_getset[] = {
    {"native", (getter)Program_native, NULL, "the native program object", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyc_ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A program handle: keeps its program alive until release(); a context manager.",
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_methods = Program_methods,
    .tp_getset = Program_getset,
};

/* ---- codec glue --------------------------------------------------------- */

static void keep_codec_error(CacheObject *self) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (tb && v) PyException_SetTraceback(v, tb);
  Py_XSETREF(self->last_codec_error, v);
  Py_XDECREF(t);
  Py_XDECREF(tb);
}

static int codec_encode(void *ctx, ccache_key pkey, void *native, void **bytes, size_t *len) {
  (void)pkey;
  CacheObject *self = ctx;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return -1;
  int rc = -1;
  PyObject *name = PyUnicode_InternFromString("encode");
  PyObject *r = name ? PyObject_CallMethodOneArg(self->codec, name, (PyObject *)native) : NULL;
  Py_XDECREF(name);
  if (r == Py_None) {
    rc = CCACHE_CODEC_SKIP;
  } else if (r) {
    PyObject *b = PyBytes_CheckExact(r) ? (Py_INCREF(r), r) : PyBytes_FromObject(r);
    if (b) {
      /* The bytes object stays alive until free_bytes, which finds it back
       * from the buffer's address. */
      *bytes = PyBytes_AS_STRING(b);
      *len = (size_t)PyBytes_GET_SIZE(b);
      rc = 0;
    }
  }
  if (rc < 0) keep_codec_error(self);
  Py_XDECREF(r);
  PyGILState_Release(g);
  return rc;
}

static void codec_free_bytes(void *ctx, void *bytes, size_t len) {
  (void)ctx, (void)len;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return;
  PyObject *b = (PyObject *)((char *)bytes - offsetof(PyBytesObject, ob_sval));
  Py_DECREF(b);
  PyGILState_Release(g);
}

static int codec_decode(void *ctx, ccache_key pkey, const void *bytes, size_t len,
                        void **native_out, uint64_t *cost_out) {
  (void)pkey;
  CacheObject *self = ctx;
  PyGILState_STATE g;
  if (!pyc_gil_ensure(&g)) return -1;
  int rc = -1;
  PyObject *b = PyBytes_FromStringAndSize(bytes, (Py_ssize_t)len);
  PyObject *name = b ? PyUnicode_InternFromString("decode") : NULL;
  PyObject *r = name ? PyObject_CallMethodOneArg(self->codec, name, b) : NULL;
  Py_XDECREF(name);
  Py_XDECREF(b);
  if (r) {
    *native_out = r; /* the cache's reference now */
    *cost_out = len;
    rc = 0;
  } else {
    /* "Corrupt" (the bytes are no program: removed) is the codec's own
     * CorruptEntry; any other exception fails here only (entry kept). */
    rc = PyErr_ExceptionMatches(pyc_CorruptEntry) ? CCACHE_CODEC_CORRUPT : -1;
    keep_codec_error(self);
  }
  PyGILState_Release(g);
  return rc;
}

int pyc_codec_setup(CacheObject *self, PyObject *codec) {
  if (!PyObject_HasAttrString(codec, "encode") || !PyObject_HasAttrString(codec, "decode")) {
    PyErr_SetString(PyExc_TypeError, "codec: an object with encode(obj) and decode(bytes)");
    return -1;
  }
  Py_INCREF(codec);
  self->codec = codec;
  self->ccodec.encode = codec_encode;
  self->ccodec.free_bytes = codec_free_bytes;
  self->ccodec.decode = codec_decode;
  self->ccodec.ctx = self;
  return 0;
}
