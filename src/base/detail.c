/*
 * detail.c - one line of thread-local detail about the last failed call
 * that records one (ccache_error_detail()), and ccache_compile_fail(), with
 * which a compile callback records its own.  A status code says what kind
 * of failure; the detail names the path, value or compiler message, as
 * strerror() cannot.
 */
#include "base/detail.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ccache.h"

static _Thread_local char detail[CCACHE__DETAIL_MAX];
static _Thread_local uint64_t seq;
static _Thread_local int for_status;

static void record(int status, const char *fmt, va_list ap) {
  /* vsnprintf truncates and terminates: a long path shortens the line. */
  vsnprintf(detail, sizeof detail, fmt, ap);
  seq++;
  for_status = status;
}

void ccache__detail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(0, fmt, ap);
  va_end(ap);
}

void ccache__detail_for(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(status, fmt, ap);
  va_end(ap);
}

void ccache__detail_copy(int status, const char *text) {
  ccache__detail_for(status, "%s", text ? text : "");
}

uint64_t ccache__detail_seq(void) { return seq; }

int ccache__detail_status(void) { return for_status; }

void ccache__detail_restatus(int status) { for_status = status; }

const char *ccache_error_detail(void) { return detail; }

int ccache_compile_fail(int status, const char *fmt, ...) {
  /* A compile's failure is never success, nor CCACHE_MISS. */
  if (status >= 0) status = CCACHE_ECOMPILE;
  va_list ap;
  va_start(ap, fmt);
  if (fmt)
    record(status, fmt, ap);
  else
    ccache__detail_for(status, "%s", ccache_strerror(status));
  va_end(ap);
  return status;
}
