/**
 * @file ccache/fp.h
 * @brief Structural fingerprints: the key builder and the graph helper, in
 * the fast (XXH3-128) and the strong (BLAKE2b-256) mode.
 *
 * Part of the public API: `#include <ccache.h>` includes it with the rest;
 * it may also be included alone.
 */
#ifndef CCACHE_CCACHE_FP_H
#define CCACHE_CCACHE_FP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/** @name Structural fingerprints (XXH3-128; strong mode BLAKE2b-256)
 *
 * A streaming builder over xxHash's XXH3-128.  Every field is framed with a
 * type tag and (for variable-length fields) a 64-bit length, so no two
 * different sequences of fields hash the same bytes ("ab"+"c" differs from
 * "a"+"bc"); integers are little-endian at fixed width, so a key is the same
 * on every machine and in every process.  The exact byte streams (pinned by
 * CCACHE_FP_FORMAT_VERSION, mixed in first): docs/design.md, "Fingerprint
 * encoding".
 *
 * The fast mode is *non-cryptographic*: accidental collisions between
 * honest graphs are negligible (~2^-64 at 2^32 keys), but whoever chooses
 * graph bytes can construct a collision with no search (docs/design.md,
 * "Strong keys").  Use it only when every graph, and every byte in it, comes
 * from a trusted party; anywhere else use the strong mode
 * (ccache_fp_init_strong(), ccache_fp_graph_strong()) with a
 * CCACHE_KEYS_STRONG cache.
 *
 * Errors: an append that fails on an initialised builder (NULL data with a
 * non-zero length, a bad shape) *poisons* it: later appends do nothing and
 * return CCACHE_EINVAL, and ccache_fp_final() returns CCACHE_EINVAL, until
 * ccache_fp_init() starts over.  So a sequence of appends may be checked once,
 * at ccache_fp_final().  A builder that never saw ccache_fp_init() is refused
 * (EINVAL) by every call rather than hashed.
 *
 * The builder allocates nothing and is not thread-safe (one builder per
 * thread); all functions are reentrant.  A builder may be copied by value
 * (e.g. to fork a common prefix): the copy continues independently.
 * @{ */

/** Version of the key encoding, mixed into every key. */
#define CCACHE_FP_FORMAT_VERSION 1u
/** Largest rank accepted by ccache_fp_shape() and the graph helper. */
#define CCACHE_FP_MAX_RANK       16u

/**
 * Builder state.  Opaque: holds the XXH3 streaming state and a small buffer
 * that batches small fields.  Caller-owned (stack is fine), no cleanup.
 */
typedef struct ccache_fp {
#if defined(__cplusplus)
  alignas(64) unsigned char opaque_[1024]; /**< private; do not touch */
#else
  _Alignas(64) unsigned char opaque_[1024]; /**< private; do not touch */
#endif
} ccache_fp;

/** @brief Start (or restart) a fingerprint: clears any poisoning.
 *  @param fp caller-owned builder; NULL is a no-op.
 *  Allocates nothing; not to be called concurrently with another call on
 *  the same builder. */
CCACHE_API void ccache_fp_init(ccache_fp *fp);
/** @brief Append an unsigned 64-bit integer (tag + 8 bytes LE).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_u64(ccache_fp *fp, uint64_t v);
/** @brief Append a signed 64-bit integer (own tag + 8 bytes LE, two's complement).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_i64(ccache_fp *fp, int64_t v);
/** @brief Append a double by its IEEE-754 bit pattern (so -0.0 != 0.0 and
 *  NaN payloads differ).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread. */
CCACHE_API int ccache_fp_f64(ccache_fp *fp, double v);
/** @brief Append @p len bytes (tag + 64-bit length + bytes).  The contents are
 *  hashed, never the address.
 *  @param fp an initialised builder (caller-owned).
 *  @param data the bytes, read during the call only (not retained); may be
 *         NULL only when @p len is 0 (the same as any empty buffer).
 *  @param len their length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp, or
 *          NULL data with len > 0: the builder is then poisoned and
 *          ccache_fp_final() returns EINVAL).  One builder per thread. */
CCACHE_API int ccache_fp_bytes(ccache_fp *fp, const void *data, size_t len);
/** @brief Append a string of @p len bytes.  It is encoded exactly as
 *  ccache_fp_bytes() encodes a buffer except for the tag (0x05 instead of
 *  0x04), so the string "ab" and the bytes "ab" give different keys.  No
 *  terminator is read or hashed: embedded NULs count as bytes.
 *  @param fp an initialised builder (caller-owned).
 *  @param s the characters, read during the call only (not retained); may be
 *         NULL only when @p len is 0.
 *  @param len the string's length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp, or
 *          NULL s with len > 0: the builder is then poisoned and
 *          ccache_fp_final() returns EINVAL).  One builder per thread. */
CCACHE_API int ccache_fp_str(ccache_fp *fp, const char *s, size_t len);
/** @brief Append a tensor type: dtype, rank, then each dim (LE 64-bit).
 *  @param fp an initialised builder (caller-owned).
 *  @param dtype the runtime's dtype code (any int32).
 *  @param rank number of dims, 0..CCACHE_FP_MAX_RANK.
 *  @param dims @p rank dims (element counts; read during the call only);
 *         may be NULL only when rank is 0.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp:
 *          nothing appended; rank too large or NULL dims with rank > 0: the
 *          builder is poisoned).  One builder per thread. */
CCACHE_API int ccache_fp_shape(ccache_fp *fp, int32_t dtype, uint32_t rank, const int64_t *dims);
/** @brief Append a key (tag 0x07, u64 key.lo, u64 key.hi), e.g. the
 *  program key a closure key must include (see ccache_key's key rule).
 *  @param fp an initialised builder (caller-owned).
 *  @param key the key (by value).
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL, uninitialised or poisoned fp;
 *          nothing appended).  One builder per thread.  Since 0.2. */
CCACHE_API int ccache_fp_key(ccache_fp *fp, ccache_key key);
/** @brief Finish: the key of everything appended so far.  The builder is
 *  unchanged and may take more fields (appending after a final continues
 *  the same stream).
 *  @param fp the builder (read only).
 *  @param out receives the key; untouched on error.  Caller-owned.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL fp or out, an uninitialised
 *          builder, or an earlier append failed: no key).  Does not write
 *          the builder, so several threads may finish one builder at once
 *          while none appends to it. */
CCACHE_API int ccache_fp_final(const ccache_fp *fp, ccache_key *out);

/**
 * @brief Start (or restart) a *strong* fingerprint: the same fields and
 * encoding as the fast builder, hashed with BLAKE2b-256 (libsodium's
 * crypto_generichash, 32-byte output, no key) into a ccache_strong_key.
 *
 * Finding two field sequences with one strong key takes about 2^128 work.
 * The append calls are the same, with the same poisoning rules; finish with
 * ccache_fp_final_strong().  ccache_fp_final() refuses a strong builder
 * (CCACHE_EINVAL) and ccache_fp_final_strong() a fast one, so a strong key
 * is never truncated to 128 bits by mistake.  Its stream and the choice of
 * BLAKE2b: docs/design.md, "Fingerprint encoding" and "Strong keys".
 * @param fp caller-owned builder (it may be copied by value, as a fast one).
 * @return CCACHE_OK; CCACHE_EINVAL (NULL fp); CCACHE_ENOTSUP (a build
 *         without libsodium: the builder is left unusable, every append
 *         and final on it returns CCACHE_EINVAL).  Thread-safe; the
 *         builder allocates nothing (the process's first strong call runs
 *         libsodium's sodium_init() once, whatever that needs).
 */
CCACHE_API int ccache_fp_init_strong(ccache_fp *fp);

/**
 * @brief Finish a strong builder: the 256-bit key of everything appended.
 * As ccache_fp_final(): the builder is unchanged and may go on.
 * @param fp a builder started by ccache_fp_init_strong() (read only).
 * @param out receives the key; untouched on error.  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL fp or out, an uninitialised, fast
 *         or poisoned builder).  Several threads may finish one builder at
 *         once while none appends to it.
 */
CCACHE_API int ccache_fp_final_strong(const ccache_fp *fp, ccache_strong_key *out);

/** An operand or output reference: output slot @c slot of node @c node. */
typedef struct ccache_fp_ref {
  uint32_t node; /**< index into the node array */
  uint32_t slot; /**< output slot of that node */
} ccache_fp_ref;

/** One output slot's tensor type. */
typedef struct ccache_fp_tensor {
  int32_t dtype;       /**< the runtime's dtype code */
  uint32_t rank;       /**< 0..CCACHE_FP_MAX_RANK */
  const int64_t *dims; /**< @c rank dims (NULL only when rank is 0) */
} ccache_fp_tensor;

/**
 * One node of a graph, for ccache_fp_graph().  What enters its digest: the op
 * (op_name bytes if non-NULL, else op_id, under different tags so the name
 * "3" and the id 3 differ), the attribute bytes, each output slot's dtype and
 * shape, each operand's digest *in operand order* with its slot, whether
 * there is a constant (non-NULL @c constant) and its bytes, and whether the
 * node is a parameter and its position.  What never does: the node's index
 * in the array, any address, and the order in which independent nodes were
 * built.  NULL attrs with length 0 equals empty attrs; a NULL constant
 * ("no constant") differs from a non-NULL empty one.
 */
typedef struct ccache_fp_node {
  const char *op_name;             /**< op name (NUL-terminated), or NULL to use op_id */
  uint64_t op_id;                  /**< numeric op id, used when op_name is NULL */
  const void *attrs;               /**< attribute bytes (serialised by the runtime) */
  size_t attrs_len;                /**< bytes at attrs (NULL attrs needs 0) */
  const ccache_fp_tensor *outputs; /**< output slots (NULL only when n_outputs is 0) */
  uint32_t n_outputs;              /**< number of output slots */
  uint32_t n_operands;             /**< number of operands */
  const ccache_fp_ref *operands;   /**< operands; each must name an earlier node
                                      (NULL only when n_operands is 0) */
  const void *constant;            /**< constant bytes (weights baked in), or NULL */
  size_t constant_len;             /**< bytes at constant (NULL constant needs 0) */
  int64_t param_index;             /**< >= 0: graph input number param_index; -1: not
                                  an input; below -1 is EINVAL */
} ccache_fp_node;

/**
 * @brief Structural (Merkle) fingerprint of a graph.
 *
 * Each node's digest hashes its own fields and its operands' digests in
 * operand order; a graph input is identified by its parameter position; the
 * key hashes the device string, a summary of all parameter nodes and the
 * outputs' digests (with their slots) in output order.  Nodes must be
 * topologically ordered (operands point to earlier nodes).
 *
 * Only what an output depends on enters the key, plus every parameter node:
 * an op node no output reaches is ignored, but an unused parameter is not
 * (f(x, y) = x and f(x) = x are called differently).  Parameter nodes may
 * sit anywhere in the array (their summary is order-independent); distinct
 * positions are expected but not checked.  The exact streams:
 * docs/design.md, "Fingerprint encoding".
 *
 * @param nodes @p n_nodes nodes (read only, not retained; NULL only when
 *        n_nodes is 0).
 * @param n_nodes number of nodes (items).
 * @param outputs @p n_outputs graph outputs in order (read only, not
 *        retained).
 * @param n_outputs number of outputs (items, >= 1).
 * @param device target/device string (NUL-terminated, read only; NULL is
 *        EINVAL).
 * @param scratch caller-provided workspace of @p n_nodes keys, never NULL
 *        (receives each node's digest; the call allocates nothing).
 * @param out receives the key.  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (NULL arguments, an operand pointing
 *         forward, to itself or out of range, or to a slot its node lacks, an
 *         output out of range or to a slot its node lacks, a rank over
 *         CCACHE_FP_MAX_RANK, NULL data with a non-zero length or count, a
 *         param_index below -1): everything is validated first, and on error
 *         neither @p out nor @p scratch is written.  Thread-safe, reentrant.
 */
CCACHE_API int ccache_fp_graph(const ccache_fp_node *nodes, size_t n_nodes,
                               const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                               ccache_key *scratch, ccache_key *out);

/**
 * @brief Strong (BLAKE2b-256) structural fingerprint of a graph: what
 * ccache_fp_graph() computes, with a cryptographic hash and 256-bit digests
 * throughout, for a CCACHE_KEYS_STRONG cache.
 *
 * Same nodes, same rules (what enters, what never does, the same
 * validation), same invariances (node numbering, independent build order,
 * where parameter nodes sit).  Finding two graphs with one key takes about
 * 2^128 work.  The exact streams: docs/design.md, "Fingerprint encoding".
 *
 * @param nodes @p n_nodes nodes, as ccache_fp_graph() (read only, not
 *        retained).
 * @param n_nodes number of nodes (items).
 * @param outputs @p n_outputs graph outputs in order (read only).
 * @param n_outputs number of outputs (items, >= 1).
 * @param device target/device string (NUL-terminated; NULL is EINVAL).
 * @param scratch caller-provided workspace of @p n_nodes strong keys, never
 *        NULL (the call allocates nothing); its contents after the call are
 *        unspecified (the parameter digests are sorted in it).
 * @param out receives the key.  Caller-owned.
 * @return CCACHE_OK; CCACHE_EINVAL (as ccache_fp_graph(); nothing written);
 *         CCACHE_ENOTSUP (a build without libsodium; nothing written).
 *         Thread-safe, reentrant.
 */
CCACHE_API int ccache_fp_graph_strong(const ccache_fp_node *nodes, size_t n_nodes,
                                      const ccache_fp_ref *outputs, size_t n_outputs,
                                      const char *device, ccache_strong_key *scratch,
                                      ccache_strong_key *out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CCACHE_CCACHE_FP_H */
