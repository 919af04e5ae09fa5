/* status.c - status texts (from the one list in ccache.h) and the version. */
#include "ccache.h"

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
