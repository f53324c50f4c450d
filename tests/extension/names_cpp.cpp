// The header generated from names.cnext, compiled as C++17 under -Wall -Wextra -Wpedantic
// -Werror (a syntax-only build: test_extgen_names.c runs the same constructors in C).
#include "names.h"

names_pick cpp_constructors(cn_tensor *a, cn_tensor *b) {
    names_pick none = names_pick_v();
    names_pick m = names_pick_memset(a, b);
    names_pick as = names_pick_as(b, a);
    return none.tag == NAMES_PICK_V && m.as.memset.memset == b && as.as.as.as == a ? m : none;
}
