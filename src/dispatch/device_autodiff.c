/* The autodiff flag of a device value. A cn_device is plain data that the router reads; these set
 * and clear the flag and the checkpointing strategy. Recording is the autodiff layer's business
 * (src/autodiff), which the router reaches only through the layer it registers (router.h). */
#include "cinder/autodiff.h"

cn_device cn_autodiff_checkpointed(cn_device inner, cn_checkpoint strategy) {
    inner.autodiff = 1;
    inner.checkpoint = (uint8_t)strategy;
    return inner;
}

cn_device cn_autodiff(cn_device inner) {
    return cn_autodiff_checkpointed(inner, CN_CHECKPOINT_NONE);
}

cn_device cn_inner_device(cn_device device) {
    device.autodiff = 0;
    device.checkpoint = 0;
    return device;
}
