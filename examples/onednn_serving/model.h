/* model.h: SmolLM2-135M's decoder shapes and (random) weights.
 *
 * The architecture numbers come from smollm2-135m-config.json (the model's
 * published config).  The weights are random with a fixed seed: the example
 * measures primitive creation and caching, which depend on shapes only, so
 * no checkpoint is shipped or downloaded. */
#ifndef ONEDNN_SERVING_MODEL_H
#define ONEDNN_SERVING_MODEL_H

#include <stddef.h>
#include <stdint.h>

/** The architecture, as read from the config file. */
typedef struct model_config {
  int hidden;       /**< hidden_size (576) */
  int intermediate; /**< intermediate_size (1536) */
  int layers;       /**< num_hidden_layers (30) */
  int heads;        /**< num_attention_heads (9) */
  int kv_heads;     /**< num_key_value_heads (3) */
  int head_dim;     /**< head_dim (64) */
  int vocab;        /**< vocab_size (49152) */
  double rms_eps;   /**< rms_norm_eps */
  double rope_theta;
} model_config;

/** One decoder layer.  Projection matrices are stored [in][out] (row-major
 *  K x N), the layout the matmul primitives take as "weights". */
typedef struct layer_weights {
  float *attn_norm; /**< [hidden] */
  float *wq;        /**< [hidden][heads * head_dim] */
  float *wk;        /**< [hidden][kv_heads * head_dim] */
  float *wv;        /**< [hidden][kv_heads * head_dim] */
  float *wo;        /**< [heads * head_dim][hidden] */
  float *mlp_norm;  /**< [hidden] */
  float *wgate;     /**< [hidden][intermediate] */
  float *wup;       /**< [hidden][intermediate] */
  float *wdown;     /**< [intermediate][hidden] */
} layer_weights;

typedef struct model {
  model_config cfg;      /**< cfg.layers may be below the file's value (--layers) */
  layer_weights *layers; /**< cfg.layers entries */
  float *embed;          /**< [vocab][hidden]; tied: also the LM head */
  float *final_norm;     /**< [hidden] */
} model;

/**
 * Read the architecture from a config.json.  Only the flat numeric keys the
 * model needs are parsed; a missing or non-positive one is an error.
 * @return 0, or -1 with a message in @p err.
 */
int model_config_load(const char *path, model_config *cfg, char *err, size_t errlen);

/**
 * Allocate and fill the weights of the first @p layers layers from @p seed.
 * @return 0, or -1 (out of memory; nothing to free).
 */
int model_init(model *m, const model_config *cfg, int layers, uint64_t seed);

/** Free what model_init() allocated (safe on a zeroed model). */
void model_free(model *m);

/** The splitmix64 step used for all pseudo-random numbers in the example. */
uint64_t model_rand_next(uint64_t *state);

#endif
