/* Version and build description. */
#include "cinder/version.h"

#ifndef CINDER_BUILD_CONFIG
#define CINDER_BUILD_CONFIG "unknown"
#endif

const char *cn_version(void) { return CN_VERSION_STRING; }

const char *cn_build_config(void) { return CINDER_BUILD_CONFIG; }
