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
 * A streaming builder over XXH3-128: every field is framed with a type tag
 * (and a length), integers little-endian, so keys are the same everywhere
 * (streams: docs/design.md, "Fingerprint encoding").  The fast mode is not
 * cryptographic: use it only for graphs from trusted parties, else the
 * strong mode with a CCACHE_KEYS_STRONG cache ("Strong keys").
 *
 * Errors: a failed append (NULL data with a length, a bad shape) *poisons*
 * the builder: later appends and the final return CCACHE_EINVAL until
 * ccache_fp_init(), so a sequence is checked once, at the final.  A builder
 * never initialised is refused (EINVAL).  The builder allocates nothing and
 * is not thread-safe (one per thread; finals may share one that none
 * appends to); it may be copied by value to fork a prefix.
 * @{ */

/** Version of the key encoding, mixed into every key. */
#define CCACHE_FP_FORMAT_VERSION 1u
/** Largest rank accepted by ccache_fp_shape() and the graph helper. */
#define CCACHE_FP_MAX_RANK       16u

/** Builder state (opaque; caller-owned, stack is fine, no cleanup). */
typedef struct ccache_fp {
#if defined(__cplusplus)
  alignas(64) unsigned char opaque_[1024]; /**< private; do not touch */
#else
  _Alignas(64) unsigned char opaque_[1024]; /**< private; do not touch */
#endif
} ccache_fp;

/** @brief Start (or restart) a fingerprint: clears any poisoning.
 *  @param fp caller-owned builder. */
CCACHE_API void ccache_fp_init(ccache_fp *fp);
/** @brief Append an unsigned 64-bit integer (tag + 8 bytes LE).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (see "Errors" above). */
CCACHE_API int ccache_fp_u64(ccache_fp *fp, uint64_t v);
/** @brief Append a signed 64-bit integer (own tag + 8 bytes LE, two's complement).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (see "Errors" above). */
CCACHE_API int ccache_fp_i64(ccache_fp *fp, int64_t v);
/** @brief Append a double by its IEEE-754 bit pattern (so -0.0 != 0.0 and
 *  NaN payloads differ).
 *  @param fp an initialised builder (caller-owned).
 *  @param v the value.
 *  @return CCACHE_OK; CCACHE_EINVAL (see "Errors" above). */
CCACHE_API int ccache_fp_f64(ccache_fp *fp, double v);
/** @brief Append @p len bytes (tag + 64-bit length + contents).
 *  @param fp an initialised builder (caller-owned).
 *  @param data the bytes; NULL only when @p len is 0.
 *  @param len their length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL data with len > 0 poisons). */
CCACHE_API int ccache_fp_bytes(ccache_fp *fp, const void *data, size_t len);
/** @brief Append a string of @p len bytes: as ccache_fp_bytes() but tag 0x05
 *  (the string "ab" and the bytes "ab" differ); NULs count, none is read.
 *  @param fp an initialised builder (caller-owned).
 *  @param s the characters; NULL only when @p len is 0.
 *  @param len the string's length in bytes.
 *  @return CCACHE_OK; CCACHE_EINVAL (NULL s with len > 0 poisons). */
CCACHE_API int ccache_fp_str(ccache_fp *fp, const char *s, size_t len);
/** @brief Append a tensor type: dtype, rank, then each dim (LE 64-bit).
 *  @param fp an initialised builder (caller-owned).
 *  @param dtype the runtime's dtype code (any int32).
 *  @param rank number of dims, 0..CCACHE_FP_MAX_RANK.
 *  @param dims @p rank dims (element counts); NULL only when rank is 0.
 *  @return CCACHE_OK; CCACHE_EINVAL (a bad rank or dims poisons). */
CCACHE_API int ccache_fp_shape(ccache_fp *fp, int32_t dtype, uint32_t rank, const int64_t *dims);
/** @brief Append a key (tag 0x07, u64 key.lo, u64 key.hi), e.g. the
 *  program key a closure key must include (see ccache_key's key rule).
 *  @param fp an initialised builder (caller-owned).
 *  @param key the key.
 *  @return CCACHE_OK; CCACHE_EINVAL (see "Errors" above).  Since 0.2. */
CCACHE_API int ccache_fp_key(ccache_fp *fp, ccache_key key);
/** @brief Finish: the key of everything appended so far; the builder is
 *  unchanged and may go on.
 *  @param fp the builder (read only).
 *  @param out receives the key; untouched on error.
 *  @return CCACHE_OK; CCACHE_EINVAL (also a poisoned or strong builder). */
CCACHE_API int ccache_fp_final(const ccache_fp *fp, ccache_key *out);

/**
 * @brief Start (or restart) a *strong* fingerprint: the same fields and
 * encoding, hashed with BLAKE2b-256 (libsodium, no key); the same appends,
 * finished with ccache_fp_final_strong() only (docs/design.md, "Strong keys").
 * @param fp caller-owned builder (copyable by value).
 * @return CCACHE_OK; CCACHE_EINVAL; CCACHE_ENOTSUP (no libsodium: the builder
 *         refuses every later call).  The first one runs sodium_init().
 */
CCACHE_API int ccache_fp_init_strong(ccache_fp *fp);

/**
 * @brief Finish a strong builder, as ccache_fp_final(): the 256-bit key.
 * @param fp a builder from ccache_fp_init_strong() (read only).
 * @param out receives the key; untouched on error.
 * @return CCACHE_OK; CCACHE_EINVAL (also a poisoned or fast builder).
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
 * One node of a graph, for ccache_fp_graph().  Its op, attributes, output
 * types, operands' digests in order, constant and parameter position enter
 * its digest; its index, addresses and build order never do (in full:
 * @ref fingerprint_builder).
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
 * @brief Structural (Merkle) fingerprint of a graph: what the outputs depend
 * on, every parameter node, and the device (rules: @ref fingerprint_builder).
 * Nodes are topologically ordered.
 * @param nodes @p n_nodes nodes; NULL only when n_nodes is 0.
 * @param n_nodes number of nodes (items).
 * @param outputs @p n_outputs graph outputs in order.
 * @param n_outputs number of outputs (items, >= 1).
 * @param device target/device string.
 * @param scratch workspace of @p n_nodes keys (each node's digest).
 * @param out receives the key.
 * @return CCACHE_OK; CCACHE_EINVAL (a bad reference, rank, length or
 *         param_index): all is validated first, nothing written on error.
 *         Reentrant.
 */
CCACHE_API int ccache_fp_graph(const ccache_fp_node *nodes, size_t n_nodes,
                               const ccache_fp_ref *outputs, size_t n_outputs, const char *device,
                               ccache_key *scratch, ccache_key *out);

/**
 * @brief ccache_fp_graph() with BLAKE2b-256 and 256-bit digests throughout,
 * for a CCACHE_KEYS_STRONG cache: same nodes, rules and invariances.
 * @param nodes @p n_nodes nodes, as ccache_fp_graph().
 * @param n_nodes number of nodes (items).
 * @param outputs @p n_outputs graph outputs in order.
 * @param n_outputs number of outputs (items, >= 1).
 * @param device target/device string.
 * @param scratch workspace of @p n_nodes strong keys (contents unspecified).
 * @param out receives the key.
 * @return CCACHE_OK; CCACHE_EINVAL (as ccache_fp_graph()); CCACHE_ENOTSUP
 *         (no libsodium); nothing written on error.  Reentrant.
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
