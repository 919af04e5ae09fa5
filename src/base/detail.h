/*
 * detail.h - the thread-local error detail behind ccache_error_detail()
 * (detail.c): one line naming the path or value a failed call refused.
 */
#ifndef CCACHE_DETAIL_H
#define CCACHE_DETAIL_H

/* Records the thread's error detail (printf-style, truncated to a line). */
void ccache__detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* CCACHE_DETAIL_H */
