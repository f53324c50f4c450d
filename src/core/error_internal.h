/* Internal helpers around the error state. */
#ifndef CINDER_CORE_ERROR_INTERNAL_H
#define CINDER_CORE_ERROR_INTERNAL_H

#include "cinder/error.h"
#include "cinder/tensor.h"

/* The NULL-argument rule: keeps an earlier error, otherwise sets CN_ERR_NULL_ARG naming arg. */
void cn__null_arg(const char *op, const char *arg);

/* The catalogue's short phrase for a status ("shapes are incompatible"); "" if none. Messages are
 * "<op>: <phrase>: <detail>", so each matches its catalogue pattern. */
const char *cn__status_phrase(cn_status s);

/* A thread's error state, saved and put back by a call that tries something whose failure is
 * an answer, not an error of the call (cn_backend_status_of). */
typedef struct cn__saved_error {
    cn_status status;
    char message[1024];
} cn__saved_error;
void cn__error_save(cn__saved_error *saved);
void cn__error_restore(const cn__saved_error *saved);

#endif
