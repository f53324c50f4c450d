#include "harness.h"
#include "cinder/cuda.h"
int main(void) {
    if (cn_backend_find("cuda") < 0 || cn_backend_device_count("cuda") == 0) {
        printf("cuda: no device, skipping\n");
        return 77;
    }
    return 0;
}
