/* model.c: config parsing and random weight initialisation. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t model_rand_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1) from the top 24 bits, so every value is an exact float
 * and the weights are the same on every platform. */
static float rand_unit(uint64_t *state) {
  return (float)((int32_t)(model_rand_next(state) >> 40) - (1 << 23)) / (float)(1 << 23);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        buf[n] = '\0';
      }
    }
  }
  fclose(f);
  return buf;
}

/* The number after "key": in a flat JSON object.  Good enough for the
 * config file, whose numeric keys are unique and not nested. */
static int json_number(const char *json, const char *key, double *out) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\"", key);
  const char *p = strstr(json, pattern);
  if (!p) return -1;
  p += strlen(pattern);
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  if (*p++ != ':') return -1;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return -1;
  *out = v;
  return 0;
}

int model_config_load(const char *path, model_config *cfg, char *err, size_t errlen) {
  char *json = read_file(path);
  if (!json) {
    snprintf(err, errlen, "cannot read model config %s", path);
    return -1;
  }
  struct {
    const char *key;
    int *dst;
  } ints[] = {
      {"hidden_size", &cfg->hidden},
      {"intermediate_size", &cfg->intermediate},
      {"num_hidden_layers", &cfg->layers},
      {"num_attention_heads", &cfg->heads},
      {"num_key_value_heads", &cfg->kv_heads},
      {"head_dim", &cfg->head_dim},
      {"vocab_size", &cfg->vocab},
  };
  int rc = 0;
  for (size_t i = 0; i < sizeof ints / sizeof ints[0] && rc == 0; i++) {
    double v;
    if (json_number(json, ints[i].key, &v) != 0 || v < 1 || v > 1e7 || v != floor(v)) {
      snprintf(err, errlen, "%s: missing or invalid \"%s\"", path, ints[i].key);
      rc = -1;
    } else {
      *ints[i].dst = (int)v;
    }
  }
  if (rc == 0 && (json_number(json, "rms_norm_eps", &cfg->rms_eps) != 0 || cfg->rms_eps <= 0 ||
                  json_number(json, "rope_theta", &cfg->rope_theta) != 0 || cfg->rope_theta <= 0)) {
    snprintf(err, errlen, "%s: missing or invalid rms_norm_eps / rope_theta", path);
    rc = -1;
  }
  /* Grouped-query attention needs whole groups; the attention primitives
   * rely on it (see forward.c). */
  if (rc == 0 && (cfg->heads % cfg->kv_heads != 0 || cfg->head_dim % 2 != 0)) {
    snprintf(err, errlen, "%s: heads must be a multiple of kv heads, head_dim even", path);
    rc = -1;
  }
  free(json);
  return rc;
}

/* Fill n floats uniform in [-scale, scale). */
static float *random_matrix(size_t n, float scale, uint64_t *state) {
  float *w = malloc(n * sizeof *w);
  if (!w) return NULL;
  for (size_t i = 0; i < n; i++) w[i] = scale * rand_unit(state);
  return w;
}

/* Norm gains near 1 so the residual stream stays well scaled over 30 layers. */
static float *random_gain(size_t n, uint64_t *state) {
  float *w = malloc(n * sizeof *w);
  if (!w) return NULL;
  for (size_t i = 0; i < n; i++) w[i] = 1.0f + 0.1f * rand_unit(state);
  return w;
}

static int layer_init(layer_weights *lw, const model_config *c, uint64_t *st) {
  size_t h = (size_t)c->hidden, im = (size_t)c->intermediate;
  size_t q = (size_t)c->heads * (size_t)c->head_dim, kv = (size_t)c->kv_heads * (size_t)c->head_dim;
  /* Scale 1/sqrt(fan_in) keeps activations O(1), as usual initialisations do. */
  float sh = 1.0f / sqrtf((float)h), si = 1.0f / sqrtf((float)im), sq = 1.0f / sqrtf((float)q);
  lw->attn_norm = random_gain(h, st);
  lw->wq = random_matrix(h * q, sh, st);
  lw->wk = random_matrix(h * kv, sh, st);
  lw->wv = random_matrix(h * kv, sh, st);
  lw->wo = random_matrix(q * h, sq, st);
  lw->mlp_norm = random_gain(h, st);
  lw->wgate = random_matrix(h * im, sh, st);
  lw->wup = random_matrix(h * im, sh, st);
  lw->wdown = random_matrix(im * h, si, st);
  return (lw->attn_norm && lw->wq && lw->wk && lw->wv && lw->wo && lw->mlp_norm && lw->wgate &&
          lw->wup && lw->wdown)
             ? 0
             : -1;
}

static void layer_free(layer_weights *lw) {
  free(lw->attn_norm);
  free(lw->wq);
  free(lw->wk);
  free(lw->wv);
  free(lw->wo);
  free(lw->mlp_norm);
  free(lw->wgate);
  free(lw->wup);
  free(lw->wdown);
}

int model_init(model *m, const model_config *cfg, int layers, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->cfg.layers = layers;
  uint64_t st = seed;
  m->layers = calloc((size_t)layers, sizeof *m->layers);
  m->embed = random_matrix((size_t)cfg->vocab * (size_t)cfg->hidden, 0.05f, &st);
  m->final_norm = random_gain((size_t)cfg->hidden, &st);
  int rc = (m->layers && m->embed && m->final_norm) ? 0 : -1;
  for (int l = 0; rc == 0 && l < layers; l++) rc = layer_init(&m->layers[l], cfg, &st);
  if (rc != 0) model_free(m);
  return rc;
}

void model_free(model *m) {
  if (m->layers)
    for (int l = 0; l < m->cfg.layers; l++) layer_free(&m->layers[l]);
  free(m->layers);
  free(m->embed);
  free(m->final_norm);
  memset(m, 0, sizeof *m);
}
