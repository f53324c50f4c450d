/* cinder: one include for the whole public API. */
#ifndef CINDER_CINDER_H
#define CINDER_CINDER_H

#include "cinder/autodiff.h"
#include "cinder/backend.h"
#include "cinder/catalogue.h"
#include "cinder/extension.h"
#include "cinder/format.h"
#include "cinder/interop.h"
#include "cinder/io.h"
#include "cinder/device.h"
#include "cinder/error.h"
#include "cinder/memory.h"
#include "cinder/nn.h"
#include "cinder/ops.h"
#include "cinder/quant.h"
#include "cinder/tensor.h"
#include "cinder/version.h"

#endif
