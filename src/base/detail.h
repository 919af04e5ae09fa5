/*
 * detail.h - the thread-local error detail (detail.c): one line of text about
 * the last failed call that records one, with the status it was recorded for
 * and a sequence number, so a compile's owner can tell whether the compile
 * (or a call nested in it) recorded something while it ran.
 */
#ifndef CCACHE_DETAIL_H
#define CCACHE_DETAIL_H

#include <stdint.h>

/* Longest detail, terminator included. */
#define CCACHE__DETAIL_MAX 512

/* Records the thread's detail (printf-style, truncated to a line), for no
 * status in particular. */
void ccache__detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, recorded for `status` (what ccache__detail_status() returns). */
void ccache__detail_for(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies a detail recorded on another thread (a flight's owner's). */
void ccache__detail_copy(int status, const char *text);
/* Bumped by every record: compare two reads to tell whether one happened. */
uint64_t ccache__detail_seq(void);
/* The status the last record was made for (0: none). */
int ccache__detail_status(void);
/* The last record now stands for `status` (a compile passed it up). */
void ccache__detail_restatus(int status);
/* Whether `status` is one of CCACHE_STATUS_MAP's codes (status.c). */
int ccache__status_known(int status);

#endif /* CCACHE_DETAIL_H */
