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

#endif
