/* status.c - status texts (from the one list in ccache.h) and the version. */
#include "ccache.h"

#include "base/detail.h"

const char *ccache_strerror(int status) {
  switch (status) {
#define CCACHE__STATUS_TEXT(name, value, text) \
  case (value):                                \
    return text;
    CCACHE_STATUS_MAP(CCACHE__STATUS_TEXT)
#undef CCACHE__STATUS_TEXT
  }
  return "unknown ccache status";
}

unsigned ccache_version(void) { return CCACHE_VERSION_NUMBER; }

int ccache__status_known(int status) {
  switch (status) {
#define CCACHE__STATUS_CASE(name, value, text) case (value):
    CCACHE_STATUS_MAP(CCACHE__STATUS_CASE)
#undef CCACHE__STATUS_CASE
    return 1;
  }
  return 0;
}
