/* ccache._ccache: Key (a fast or strong cache key, immutable, hashable,
 * picklable) and Fingerprint (the key builder over ccache_fp_*).  The
 * module that registers them: module.c. */
#include <stddef.h>
#include <string.h>

#include "pyccache.h"

/* ---- Key ---------------------------------------------------------------- */

static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

PyObject *pyc_key_new(ccache_key key, const ccache_key *check) {
  KeyObject *k = PyObject_New(KeyObject, &pyc_KeyType);
  if (!k) return NULL;
  memset(&k->k, 0, sizeof k->k);
  k->k.key = key;
  k->strong = check != NULL;
  if (check) k->k.check = *check;
  return (PyObject *)k;
}

static PyObject *Key_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *names[] = {"data", NULL};
  PyObject *data;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Key", names, &data)) return NULL;
  PyObject *raw = NULL;
  if (PyUnicode_Check(data)) {
    raw = PyObject_CallMethod((PyObject *)&PyBytes_Type, "fromhex", "O", data);
    if (!raw) return NULL;
    /* Hex is key.hi then key.lo, as ccache_key_hex() writes it. */
    if (PyBytes_GET_SIZE(raw) != 16) {
      Py_DECREF(raw);
      PyErr_SetString(PyExc_ValueError, "Key: a hex key has 32 digits");
      return NULL;
    }
    unsigned char b[16];
    const unsigned char *h = (const unsigned char *)PyBytes_AS_STRING(raw);
    for (int i = 0; i < 8; i++) {
      b[i] = h[15 - i];
      b[8 + i] = h[7 - i];
    }
    Py_DECREF(raw);
    raw = PyBytes_FromStringAndSize((const char *)b, 16);
  } else {
    raw = PyBytes_FromObject(data);
  }
  if (!raw) return NULL;
  Py_ssize_t n = PyBytes_GET_SIZE(raw);
  if (n != 16 && n != 32) {
    Py_DECREF(raw);
    PyErr_SetString(PyExc_ValueError, "Key: 16 bytes (fast) or 32 bytes (strong)");
    return NULL;
  }
  KeyObject *k = (KeyObject *)type->tp_alloc(type, 0);
  if (k) {
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    k->k.key.lo = get_le64(p);
    k->k.key.hi = get_le64(p + 8);
    k->strong = n == 32;
    if (k->strong) {
      k->k.check.lo = get_le64(p + 16);
      k->k.check.hi = get_le64(p + 24);
    }
  }
  Py_DECREF(raw);
  return (PyObject *)k;
}

static PyObject *Key_bytes(KeyObject *k, PyObject *unused) {
  (void)unused;
  unsigned char b[32];
  put_le64(b, k->k.key.lo);
  put_le64(b + 8, k->k.key.hi);
  put_le64(b + 16, k->k.check.lo);
  put_le64(b + 24, k->k.check.hi);
  return PyBytes_FromStringAndSize((const char *)b, k->strong ? 32 : 16);
}

static PyObject *Key_hex(KeyObject *k, PyObject *unused) {
  (void)unused;
  char buf[CCACHE_KEY_HEX_LEN * 2];
  ccache_key_hex(k->k.key, buf);
  if (k->strong) ccache_key_hex(k->k.check, buf + CCACHE_KEY_HEX_LEN - 1);
  return PyUnicode_FromString(buf);
}

static PyObject *Key_repr(KeyObject *k) {
  PyObject *h = Key_hex(k, NULL);
  if (!h) return NULL;
  PyObject *r = PyUnicode_FromFormat("Key(%s'%U')", k->strong ? "strong " : "", h);
  Py_DECREF(h);
  return r;
}

static Py_hash_t Key_hash(KeyObject *k) {
  Py_hash_t h = (Py_hash_t)(k->k.key.lo ^ (k->k.key.hi * 0x9E3779B97F4A7C15ull));
  return h == -1 ? -2 : h;
}

static PyObject *Key_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, &pyc_KeyType) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  KeyObject *x = (KeyObject *)a, *y = (KeyObject *)b;
  int eq = x->strong == y->strong && memcmp(&x->k, &y->k, sizeof x->k) == 0;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *Key_reduce(KeyObject *k, PyObject *unused) {
  PyObject *b = Key_bytes(k, unused);
  if (!b) return NULL;
  return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(k), b);
}

static PyObject *Key_get_lo(KeyObject *k, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(k->k.key.lo);
}
static PyObject *Key_get_hi(KeyObject *k, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(k->k.key.hi);
}
static PyObject *Key_get_strong(KeyObject *k, void *c) {
  (void)c;
  return PyBool_FromLong(k->strong);
}

static PyMethodDef Key_methods[] = {
    {"hex", (PyCFunction)Key_hex, METH_NOARGS,
     "32 hex digits (key.hi then key.lo, as tier file names show it); 64 for a strong key."},
    {"__bytes__", (PyCFunction)Key_bytes, METH_NOARGS, "16 or 32 bytes, little-endian halves."},
    {"__reduce__", (PyCFunction)Key_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Key_getset[] = {
    {"lo", (getter)Key_get_lo, NULL, "low 64 bits of the table key", NULL},
    {"hi", (getter)Key_get_hi, NULL, "high 64 bits of the table key", NULL},
    {"strong", (getter)Key_get_strong, NULL, "True for a 256-bit key", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyc_KeyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache.Key",
    .tp_basicsize = sizeof(KeyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Key(data): a cache key from 16 bytes (fast), 32 bytes (strong) or 32 hex digits.",
    .tp_new = Key_new,
    .tp_repr = (reprfunc)Key_repr,
    .tp_hash = (hashfunc)Key_hash,
    .tp_richcompare = Key_richcompare,
    .tp_methods = Key_methods,
    .tp_getset = Key_getset,
};

/* ---- Fingerprint -------------------------------------------------------- */

typedef struct {
  PyObject_HEAD unsigned char buf[sizeof(ccache_fp) + 64];
  int strong;
} FpObject;

static ccache_fp *fp_of(FpObject *f) {
  uintptr_t p = (uintptr_t)f->buf;
  return (ccache_fp *)((p + 63) & ~(uintptr_t)63);
}

static int Fp_init(FpObject *f, PyObject *args, PyObject *kw) {
  static char *names[] = {"strong", NULL};
  int strong = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:Fingerprint", names, &strong)) return -1;
  f->strong = strong;
  if (!strong) {
    ccache_fp_init(fp_of(f));
    return 0;
  }
  int rc = ccache_fp_init_strong(fp_of(f));
  if (rc != CCACHE_OK) {
    pyc_raise(rc, "strong fingerprints need libsodium");
    return -1;
  }
  return 0;
}

static PyObject *fp_ret(FpObject *f, int rc) {
  if (rc != CCACHE_OK) return pyc_raise(rc, "fingerprint append refused");
  Py_INCREF(f);
  return (PyObject *)f;
}

static PyObject *Fp_u64(FpObject *f, PyObject *v) {
  unsigned long long x = PyLong_AsUnsignedLongLong(v);
  if (x == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  return fp_ret(f, ccache_fp_u64(fp_of(f), x));
}

static PyObject *Fp_i64(FpObject *f, PyObject *v) {
  long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) return NULL;
  return fp_ret(f, ccache_fp_i64(fp_of(f), x));
}

static PyObject *Fp_f64(FpObject *f, PyObject *v) {
  double x = PyFloat_AsDouble(v);
  if (x == -1.0 && PyErr_Occurred()) return NULL;
  return fp_ret(f, ccache_fp_f64(fp_of(f), x));
}

static PyObject *Fp_bytes(FpObject *f, PyObject *v) {
  Py_buffer b;
  if (PyObject_GetBuffer(v, &b, PyBUF_SIMPLE) < 0) return NULL;
  int rc = ccache_fp_bytes(fp_of(f), b.buf, (size_t)b.len);
  PyBuffer_Release(&b);
  return fp_ret(f, rc);
}

static PyObject *Fp_str(FpObject *f, PyObject *v) {
  Py_ssize_t n;
  const char *s = PyUnicode_AsUTF8AndSize(v, &n);
  if (!s) return NULL;
  return fp_ret(f, ccache_fp_str(fp_of(f), s, (size_t)n));
}

static PyObject *Fp_shape(FpObject *f, PyObject *args) {
  int dtype;
  PyObject *dims;
  if (!PyArg_ParseTuple(args, "iO:shape", &dtype, &dims)) return NULL;
  PyObject *seq = PySequence_Fast(dims, "shape: dims must be a sequence of ints");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > (Py_ssize_t)CCACHE_FP_MAX_RANK) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "shape: rank above CCACHE_FP_MAX_RANK (16)");
    return NULL;
  }
  int64_t d[CCACHE_FP_MAX_RANK];
  for (Py_ssize_t i = 0; i < n; i++) {
    d[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (d[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return NULL;
    }
  }
  Py_DECREF(seq);
  return fp_ret(f, ccache_fp_shape(fp_of(f), dtype, (uint32_t)n, n ? d : NULL));
}

static PyObject *Fp_key(FpObject *f, PyObject *v) {
  if (!PyObject_TypeCheck(v, &pyc_KeyType)) {
    PyErr_SetString(PyExc_TypeError, "key: a ccache.Key");
    return NULL;
  }
  KeyObject *k = (KeyObject *)v;
  int rc = ccache_fp_key(fp_of(f), k->k.key);
  if (rc == CCACHE_OK && k->strong) rc = ccache_fp_key(fp_of(f), k->k.check);
  return fp_ret(f, rc);
}

static PyObject *Fp_final(FpObject *f, PyObject *unused) {
  (void)unused;
  if (f->strong) {
    ccache_strong_key k;
    int rc = ccache_fp_final_strong(fp_of(f), &k);
    if (rc != CCACHE_OK) return pyc_raise(rc, "fingerprint poisoned by a refused append");
    return pyc_key_new(k.key, &k.check);
  }
  ccache_key k;
  int rc = ccache_fp_final(fp_of(f), &k);
  if (rc != CCACHE_OK) return pyc_raise(rc, "fingerprint poisoned by a refused append");
  return pyc_key_new(k, NULL);
}

static PyObject *Fp_copy(FpObject *f, PyObject *unused) {
  (void)unused;
  FpObject *g = (FpObject *)Py_TYPE(f)->tp_alloc(Py_TYPE(f), 0);
  if (!g) return NULL;
  memcpy(fp_of(g), fp_of(f), sizeof(ccache_fp));
  g->strong = f->strong;
  return (PyObject *)g;
}

static PyObject *Fp_get_strong(FpObject *f, void *c) {
  (void)c;
  return PyBool_FromLong(f->strong);
}

static PyMethodDef Fp_methods[] = {
    {"u64", (PyCFunction)Fp_u64, METH_O, "Append an unsigned 64-bit integer; returns self."},
    {"i64", (PyCFunction)Fp_i64, METH_O, "Append a signed 64-bit integer; returns self."},
    {"f64", (PyCFunction)Fp_f64, METH_O, "Append a float by its bit pattern; returns self."},
    {"bytes", (PyCFunction)Fp_bytes, METH_O, "Append bytes (any buffer); returns self."},
    {"str", (PyCFunction)Fp_str, METH_O, "Append a string (UTF-8); returns self."},
    {"shape", (PyCFunction)Fp_shape, METH_VARARGS,
     "shape(dtype, dims): append a tensor type; returns self."},
    {"key", (PyCFunction)Fp_key, METH_O, "Append a Key (e.g. the program key); returns self."},
    {"final", (PyCFunction)Fp_final, METH_NOARGS,
     "The Key of everything appended so far (the builder may go on)."},
    {"copy", (PyCFunction)Fp_copy, METH_NOARGS, "A copy (to fork a common prefix)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Fp_getset[] = {
    {"strong", (getter)Fp_get_strong, NULL, "True: BLAKE2b-256 (strong) mode", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyc_FingerprintType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccache._ccache.Fingerprint",
    .tp_basicsize = sizeof(FpObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Fingerprint(*, strong=False): the key builder (XXH3-128; strong: BLAKE2b-256).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fp_init,
    .tp_methods = Fp_methods,
    .tp_getset = Fp_getset,
};
