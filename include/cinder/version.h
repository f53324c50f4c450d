/* cinder: version. */
#ifndef CINDER_VERSION_H
#define CINDER_VERSION_H

#include "cinder/api.h"

#define CN_VERSION_MAJOR 0
#define CN_VERSION_MINOR 1
#define CN_VERSION_PATCH 0
#define CN_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked in (may differ from CN_VERSION_STRING of the header). */
CN_API const char *cn_version(void);

/* One line describing how the library was built (compiler, flags, BLAS, threading). */
CN_API const char *cn_build_config(void);

#ifdef __cplusplus
}
#endif
#endif
