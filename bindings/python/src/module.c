/* ccache._ccache: the module and what it registers: its exceptions, the
 * Stats and Event struct sequences, the module functions (generate_keys,
 * trust_available, strerror) and the types defined beside it: Key and
 * Fingerprint (key.c), Cache (cache.c, cache_lookup.c, cache_stats.c),
 * Program and the tiers (tier.c). */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "pyccache.h"

PyObject *pyc_Error, *pyc_CompileError, *pyc_ForkedError, *pyc_BusyError, *pyc_DeadlockError,
    *pyc_CorruptEntry, *pyc_ClosedError;
PyTypeObject *pyc_StatsType, *pyc_EventType;

int pyc_gil_ensure(PyGILState_STATE *g) {
  /* A library thread (the sweeper) calling back while the interpreter
   * shuts down must not touch it: the object is leaked instead. */
  if (_Py_IsFinalizing()) return 0;
  *g = PyGILState_Ensure();
  return 1;
}

PyObject *pyc_raise(int status, const char *detail) {
  if (!detail) detail = ccache_error_detail();
  const char *text = ccache_strerror(status);
  PyObject *type = pyc_Error;
  switch (status) {
    case CCACHE_ENOMEM:
      return PyErr_NoMemory();
    case CCACHE_EFORKED:
      PyErr_Format(pyc_ForkedError,
                   "this Cache was opened before fork() and cannot be used in the child "
                   "(pid %ld); open a new Cache here",
                   (long)getpid());
      return NULL;
    case CCACHE_EBUSY:
      type = pyc_BusyError;
      break;
    case CCACHE_EDEADLK:
      type = pyc_DeadlockError;
      break;
    case CCACHE_ECOMPILE:
      type = pyc_CompileError;
      break;
    default:
      break;
  }
  PyObject *msg =
      detail && *detail ? PyUnicode_FromFormat("%s: %s", text, detail) : PyUnicode_FromString(text);
  if (!msg) return NULL;
  PyObject *exc = PyObject_CallFunction(type, "O", msg);
  Py_DECREF(msg);
  if (!exc) return NULL;
  PyObject *st = PyLong_FromLong(status);
  if (st) {
    PyObject_SetAttrString(exc, "status", st);
    Py_DECREF(st);
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

/* ---- Stats and Event ---------------------------------------------------- */

/* Every ccache_stats field, from the library's own list (ccache/stats.h). */
#define PYC_STATS_FIELDS(X) CCACHE_STATS_FIELDS(X)

#define PYC_FIELD(name) {#name, NULL},
static PyStructSequence_Field stats_fields[] = {PYC_STATS_FIELDS(PYC_FIELD){NULL, NULL}};
static PyStructSequence_Desc stats_desc = {
    "ccache.Stats",
    "A statistics snapshot (ccache_stats; each field: docs/api/cache.md, Statistics).",
    stats_fields, (int)(sizeof stats_fields / sizeof stats_fields[0]) - 1};

static PyStructSequence_Field event_fields[] = {
    {"kind",
     "compile_start, compile_end, tier_hit, tier_miss, tier_write, tier_error, "
     "tier_corrupt, tier_rejected or evict"},
    {"level", "'closure' or 'program'"},
    {"key", "the closure key (closure level) or program key (first half of a strong one)"},
    {"status", "compile_end: what the call returns; tier_error: the op's status"},
    {"err", "tier_error: errno (0: none)"},
    {"cause", "evict: capacity, ttl, cost, removed, cleared, replaced or closed; else None"},
    {"tier", "tier events: index in the cache's tiers"},
    {"tier_name", "tier events: 'disk', 'redis', ...; else None"},
    {"op", "tier events: the op ('get', 'put', ...); else None"},
    {"reason", "a short text, or None"},
    {"duration_ns", "compile_end: wall time of the compile, ns"},
    {NULL, NULL}};
static PyStructSequence_Desc event_desc = {"ccache.Event", "One event of a Cache's on_event hook.",
                                           event_fields, 11};

int pyc_init_structs(PyObject *m) {
  pyc_StatsType = PyStructSequence_NewType(&stats_desc);
  pyc_EventType = PyStructSequence_NewType(&event_desc);
  if (!pyc_StatsType || !pyc_EventType) return -1;
  if (PyModule_AddObjectRef(m, "Stats", (PyObject *)pyc_StatsType) < 0) return -1;
  return PyModule_AddObjectRef(m, "Event", (PyObject *)pyc_EventType);
}

PyObject *pyc_stats_new(const ccache_stats *s) {
  PyObject *r = PyStructSequence_New(pyc_StatsType);
  if (!r) return NULL;
  Py_ssize_t i = 0;
#define PYC_SET(name)                                   \
  {                                                     \
    PyObject *o = PyLong_FromUnsignedLongLong(s->name); \
    if (!o) {                                           \
      Py_DECREF(r);                                     \
      return NULL;                                      \
    }                                                   \
    PyStructSequence_SET_ITEM(r, i++, o);               \
  }
  PYC_STATS_FIELDS(PYC_SET)
#undef PYC_SET
  return r;
}

/* ---- module ------------------------------------------------------------- */

static PyObject *mod_generate_keys(PyObject *m, PyObject *args) {
  (void)m;
  const char *name, *sec, *pub;
  if (!PyArg_ParseTuple(args, "sss:generate_keys", &name, &sec, &pub)) return NULL;
  int rc = ccache_trust_generate(name, sec, pub);
  if (rc != CCACHE_OK) return pyc_raise(rc, NULL);
  Py_RETURN_NONE;
}

static PyObject *mod_trust_available(PyObject *m, PyObject *unused) {
  (void)m, (void)unused;
  return PyBool_FromLong(ccache_trust_available());
}

static PyObject *mod_strerror(PyObject *m, PyObject *v) {
  (void)m;
  long s = PyLong_AsLong(v);
  if (s == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(ccache_strerror((int)s));
}

static PyMethodDef mod_methods[] = {
    {"generate_keys", mod_generate_keys, METH_VARARGS,
     "generate_keys(name, secret_path, public_path): write a new Ed25519 key pair."},
    {"trust_available", mod_trust_available, METH_NOARGS,
     "Whether this build can sign and verify (libsodium)."},
    {"strerror", mod_strerror, METH_O, "Text of a ccache status code."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT,
                                    "ccache._ccache",
                                    "The C extension behind the ccache package.",
                                    -1,
                                    mod_methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

static int add_exc(PyObject *m, PyObject **slot, const char *name, PyObject *base,
                   const char *doc) {
  char full[64];
  snprintf(full, sizeof full, "ccache.%s", name);
  *slot = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
  if (!*slot) return -1;
  return PyModule_AddObjectRef(m, name, *slot);
}

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0) return -1;
  return PyModule_AddObjectRef(m, name, (PyObject *)t);
}

PyMODINIT_FUNC PyInit__ccache(void) {
  PyObject *m = PyModule_Create(&moddef);
  if (!m) return NULL;
  if (add_exc(m, &pyc_Error, "Error", PyExc_Exception,
              "A ccache call failed; .status is the ccache status code.") < 0 ||
      add_exc(m, &pyc_CompileError, "CompileError", pyc_Error,
              "A compile failed and its exception could not be rebuilt here.") < 0 ||
      add_exc(m, &pyc_ForkedError, "ForkedError", pyc_Error,
              "A Cache opened before fork() was used in the child.") < 0 ||
      add_exc(m, &pyc_DeadlockError, "DeadlockError", pyc_Error,
              "A compile asked for its own key.") < 0 ||
      add_exc(m, &pyc_CorruptEntry, "CorruptEntry", PyExc_ValueError,
              "Raised by a codec's decode: these bytes are no program (the entry is removed).") <
          0 ||
      add_exc(m, &pyc_ClosedError, "ClosedError", pyc_Error, "The Cache is closed.") < 0)
    goto fail;
  if (add_exc(m, &pyc_BusyError, "BusyError", pyc_Error,
              "Busy: handles or compiles are outstanding, or a call from inside a callback.") < 0)
    goto fail;
  if (add_type(m, &pyc_KeyType, "Key") < 0 ||
      add_type(m, &pyc_FingerprintType, "Fingerprint") < 0 ||
      add_type(m, &pyc_CacheType, "Cache") < 0 || add_type(m, &pyc_ProgramType, "Program") < 0 ||
      add_type(m, &pyc_DirectoryTierType, "DirectoryTier") < 0 ||
      add_type(m, &pyc_RedisTierType, "RedisTier") < 0 || pyc_init_structs(m) < 0)
    goto fail;
  if (PyModule_AddIntConstant(m, "library_version", (long)ccache_version()) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
