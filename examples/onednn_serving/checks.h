/* checks.h: --check, the cache accounting (checks.c). */
#ifndef ONEDNN_SERVING_CHECKS_H
#define ONEDNN_SERVING_CHECKS_H

#include <stdint.h>

#include "report.h"
#include "serve.h"

/* What the program and closure callbacks counted, read after the mode ends
 * (the cache closed, every worker's table destroyed). */
typedef struct accounting {
  uint64_t created, destroyed, bad, closures_created, closures_destroyed;
} accounting;

/* Print one line per check on stderr.  @p r and @p accs are indexed by
 * mode - 1; @p agree: the modes' final logits agree.  @return the number of
 * checks that failed. */
int run_checks(const app *a, const mode_result *r, const accounting *accs, int agree);

#endif
