/* Backend modules (backend.h): a program's own module found by name on CINDER_BACKEND_PATH and
 * by path, its device parsed and its kernel run; every refusal a clear error that loses nothing:
 * a module not found (the message lists where it looked), one built for another ABI version, one
 * without the entry point, one whose backend name differs from its file's, a bad name; and the
 * status that `cinder info` prints. MODULE_DIR (set by tests/CMakeLists.txt) holds the modules. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "harness.h"

#include <stdlib.h>

static void test_a_missing_module_is_a_clear_error_naming_where_it_looked(void) {
    cn_clear_error();
    CHECK(cn_backend_load("nosuch") == -1);
    CHECK(cn_last_status() == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "backend_load: unknown device: "));
    CHECK(strstr(cn_last_error(), "libcinder_nosuch.so was not found"));
    CHECK(strstr(cn_last_error(), MODULE_DIR "/libcinder_nosuch.so"));
    CHECK(strstr(cn_last_error(), "the dynamic loader's search"));
    CHECK(strstr(cn_last_error(), "CINDER_BACKEND_PATH"));
    /* asked again: the same answer, without searching, naming the new caller */
    cn_device d;
    CHECK(cn_device_parse("nosuch:0", &d) == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "device_parse: unknown device: "));
    CHECK(strstr(cn_last_error(), "libcinder_nosuch.so was not found"));
    CHECK(cn_backend_compiled("nosuch") == 0);
    CHECK(cn_backend_device_count("nosuch") == 0);
    cn_backend_status st;
    cn_clear_error();
    CHECK(cn_backend_status_of("nosuch", &st) == CN_OK);
    CHECK(st.id == -1 && st.devices == 0 && strstr(st.why, "looked at"));
    CHECK(cn_last_status() == CN_OK); /* a failed load is the answer, not an error */
}

static void test_a_bad_name_is_refused(void) {
    CHECK(cn_backend_load("Mock") == -1 && cn_last_status() == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "'Mock' is not a backend name"));
    CHECK(cn_backend_load("") == -1);
    CHECK(cn_backend_load(NULL) == -1);
}

static void test_a_module_for_another_abi_is_refused(void) {
    CHECK(cn_backend_load("badabi") == -1 && cn_last_status() == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "built for backend ABI version 999"));
    CHECK(strstr(cn_last_error(), "rebuild the module"));
    CHECK(cn_backend_find("badabi") == -1);
}

static void test_a_file_without_the_entry_is_refused(void) {
    CHECK(cn_backend_load("noentry") == -1 && cn_last_status() == CN_ERR_UNKNOWN_DEVICE);
    CHECK(strstr(cn_last_error(), "has no cn_backend_module_init"));
    CHECK(cn_backend_load(MODULE_DIR "/libcinder_noentry.so") == -1);
    CHECK(strstr(cn_last_error(), "is not a cinder backend module"));
    CHECK(cn_backend_load(MODULE_DIR "/libcinder_absent.so") == -1);
    CHECK(strstr(cn_last_error(), "cannot load the backend module"));
}

static void test_a_module_named_otherwise_than_its_file_is_refused(void) {
    /* libcinder_renamed.so registers "mock2": found by its file, refused by name */
    CHECK(cn_backend_load("renamed") == -1);
    CHECK(strstr(cn_last_error(), "registers a backend named 'mock2', not 'renamed'"));
}

static void test_a_programs_module_loads_and_runs(void) {
    int64_t live = cn_live_tensors();
    cn_device d;
    CHECK(cn_device_parse("mock:0", &d) == CN_OK); /* loads libcinder_mock.so */
    int id = cn_backend_find("mock");
    CHECK(id > 0 && d.backend == id);
    CHECK(cn_backend_load("mock") == id);          /* loaded once */
    const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    int64_t shape[1] = {4};
    cn_tensor *x = cn_from_data(a, shape, 1, CN_F32, d);
    cn_tensor *y = cn_from_data(b, shape, 1, CN_F32, d);
    cn_tensor *z = cn_add(x, y);
    float out[4] = {0};
    CHECK(z && cn_read(z, out, sizeof out) == CN_OK);
    CHECK(out[0] == 11 && out[1] == 22 && out[2] == 33 && out[3] == 44);
    /* a kernel it lacks: the router's clear error */
    CHECK(cn_mul(x, y) == NULL && cn_last_status() == CN_ERR_NO_KERNEL);
    cn_release(z);
    cn_release(y);
    cn_release(x);
    CHECK(cn_live_tensors() == live);
    cn_backend_status st;
    CHECK(cn_backend_status_of("mock", &st) == CN_OK);
    CHECK(st.id == id && st.devices == 1 && strstr(st.module, "/libcinder_mock.so"));
    /* by path: the backend it registers is already there */
    CHECK(cn_backend_load(MODULE_DIR "/libcinder_mock.so") == -1);
    CHECK(strstr(cn_last_error(), "already registered"));
}

int main(void) {
    setenv("CINDER_BACKEND_PATH", "/nonexistent-dir:" MODULE_DIR, 1);
    RUN(test_a_missing_module_is_a_clear_error_naming_where_it_looked);
    RUN(test_a_bad_name_is_refused);
    RUN(test_a_module_for_another_abi_is_refused);
    RUN(test_a_file_without_the_entry_is_refused);
    RUN(test_a_module_named_otherwise_than_its_file_is_refused);
    RUN(test_a_programs_module_loads_and_runs);
    return th_finish();
}
