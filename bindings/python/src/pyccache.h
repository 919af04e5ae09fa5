/* The CPython extension ccache._ccache: shared declarations.
 *
 * Ownership rule of the whole binding: every closure and native program the
 * library holds is a PyObject with one strong reference owned by the
 * library; its destroy callback drops it (taking the GIL).  Every callback
 * (compile, codec, event, destroy) takes the GIL with PyGILState_Ensure, so
 * it works both from a call that released the GIL and from one that kept
 * it. */
#ifndef PYCCACHE_H
#define PYCCACHE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ccache.h>

/* A fast (128-bit) or strong (256-bit) key.  Immutable. */
typedef struct {
  PyObject_HEAD ccache_strong_key k; /* fast keys use k.key; k.check is zero */
  int strong;
} KeyObject;

/* A persistent tier before a cache owns it (DirectoryTier, RedisTier). */
typedef struct {
  PyObject_HEAD ccache_tier *tier; /* NULL once a cache took it */
  int shared;                      /* others can write to it (Redis) */
  PyObject *where;                 /* str: the directory or the server list */
} TierObject;

typedef struct CacheObject CacheObject;

/* A program handle (+1 on the library's program), released once. */
typedef struct {
  PyObject_HEAD CacheObject *cache; /* strong reference */
  ccache_program *p;                /* NULL once released or handed over */
} ProgramObject;

struct CacheObject {
  PyObject_HEAD ccache *c; /* NULL once closed */
  int strong;
  PyObject *codec;            /* the codec object, or NULL */
  PyObject *on_event;         /* callable, or NULL */
  PyObject *failures;         /* dict: failure id -> exception (last 64) */
  PyObject *last_codec_error; /* the last exception a codec call raised, or NULL */
  unsigned long long next_failure;
  long active; /* calls inside the library without the GIL */
  ccache_codec ccodec;
  PyObject *weakreflist;
};

extern PyTypeObject pyc_KeyType, pyc_FingerprintType, pyc_CacheType, pyc_ProgramType,
    pyc_DirectoryTierType, pyc_RedisTierType;
extern PyObject *pyc_Error, *pyc_CompileError, *pyc_ForkedError, *pyc_BusyError, *pyc_DeadlockError,
    *pyc_CorruptEntry, *pyc_ClosedError;
extern PyTypeObject *pyc_StatsType, *pyc_EventType;

/* A new Key object (check NULL: a fast key). */
PyObject *pyc_key_new(ccache_key key, const ccache_key *check);
/* Raise the exception for a ccache status (with this thread's detail when
 * @p detail is NULL); returns NULL. */
PyObject *pyc_raise(int status, const char *detail);
/* Types of module.c's struct sequences; 0 or -1. */
int pyc_init_structs(PyObject *m);
/* Fill a Stats struct sequence from a snapshot. */
PyObject *pyc_stats_new(const ccache_stats *s);
/* Take the GIL from any thread; 0 (nothing taken) during finalization. */
int pyc_gil_ensure(PyGILState_STATE *g);

/* Attach a Python codec to a cache being opened; 0 or -1. */
int pyc_codec_setup(CacheObject *self, PyObject *codec);

/* The Cache type in three files.  cache.c: the type, open and close; 0, or
 * -1 with ClosedError / the argument's error set. */
int pyc_cache_check_open(CacheObject *self);
KeyObject *pyc_cache_key_arg(CacheObject *self, PyObject *o);
/* cache_lookup.c: the closure and program tables (Cache's methods). */
PyObject *pyc_Cache_get_or_compile(CacheObject *self, PyObject *const *args, Py_ssize_t n);
PyObject *pyc_Cache_fetch(CacheObject *self, PyObject *const *args, Py_ssize_t n);
PyObject *pyc_Cache_put(CacheObject *self, PyObject *args, PyObject *kw);
PyObject *pyc_Cache_remove(CacheObject *self, PyObject *ko);
PyObject *pyc_Cache_clear(CacheObject *self, PyObject *unused);
PyObject *pyc_Cache_sweep(CacheObject *self, PyObject *unused);
PyObject *pyc_Cache_program(CacheObject *self, PyObject *args, PyObject *kw);
PyObject *pyc_Cache_intern(CacheObject *self, PyObject *args, PyObject *kw);
PyObject *pyc_Cache_program_fetch(CacheObject *self, PyObject *ko);
/* cache_stats.c: stats, limits and the event hook. */
PyObject *pyc_Cache_stats(CacheObject *self, PyObject *unused);
PyObject *pyc_Cache_limits(CacheObject *self, void *c);
PyObject *pyc_Cache_set_limits(CacheObject *self, PyObject *args, PyObject *kw);
/* A bound argument: None is CCACHE_UNBOUNDED, else an int >= 1; 0 or -1. */
int pyc_bound_arg(PyObject *v, uint64_t *out);
/* The library's on_event callback; ctx is the CacheObject. */
void pyc_cache_on_event(void *ctx, const ccache_event *ev);

#endif
