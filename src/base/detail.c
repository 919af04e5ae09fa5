/*
 * detail.c - one line of thread-local detail about the last failed call
 * that records one (ccache_error_detail()).  A status code says what kind
 * of failure; the detail names the path or value, as strerror() cannot.
 */
#include <stdarg.h>
#include <stdio.h>

#include "ccache.h"
#include "base/detail.h"

#define CCACHE__DETAIL_MAX 512

static _Thread_local char detail[CCACHE__DETAIL_MAX];

void ccache__detail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  /* vsnprintf truncates and terminates: a long path shortens the line. */
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
}

const char *ccache_error_detail(void) { return detail; }
