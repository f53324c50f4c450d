/* cinder: what the shared library exports.
 *
 * libcinder.so is built with hidden visibility: only declarations marked CN_API (every function of
 * include/cinder/) are part of its dynamic symbol table; the library's internal functions are not.
 * Static builds and programs that include these headers see no difference. */
#ifndef CINDER_API_H
#define CINDER_API_H

#if defined(__GNUC__) || defined(__clang__)
#define CN_API __attribute__((visibility("default")))
#else
#define CN_API
#endif

#endif
