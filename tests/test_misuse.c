/* Misuse caught in debug builds (CINDER_CHECK_MISUSE, tensor_impl.h): each misuse runs in a child
 * process, which must die of SIGABRT with a message on stderr naming the call and the tensor
 * (its number, shape, dtype and device); correct use, the same calls in the right order, must run
 * to its end. Without the checks (release builds) the test is skipped. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifdef CINDER_CHECK_MISUSE

typedef void (*misuse_fn)(void);

/* Runs fn in a child with stderr captured; returns its wait status, the stderr text in out. */
static int run_child(misuse_fn fn, char *out, size_t size) {
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t got;
    while ((got = read(fds[0], out + used, size - 1 - used)) > 0) used += (size_t)got;
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

/* fn must abort, its stderr holding every one of the needles. */
static void expect_abort(misuse_fn fn, const char *const *needles, int n) {
    char err[4096];
    int status = run_child(fn, err, sizeof err);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
        fprintf(stderr, "the child did not abort (status %#x); its stderr:\n%s\n", status, err);
        th_checks_failed++;
    }
    for (int i = 0; i < n; i++)
        if (!strstr(err, needles[i])) {
            fprintf(stderr, "stderr lacks \"%s\":\n%s\n", needles[i], err);
            th_checks_failed++;
        }
}

/* fn must run to its end. */
static void expect_clean(misuse_fn fn) {
    char err[4096];
    int status = run_child(fn, err, sizeof err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "correct use stopped (status %#x); its stderr:\n%s\n", status, err);
        th_checks_failed++;
    }
}

#define EXPECT_ABORT(fn, ...)                                                        \
    do {                                                                             \
        const char *needles_[] = {__VA_ARGS__};                                      \
        expect_abort(fn, needles_, (int)(sizeof needles_ / sizeof *needles_));       \
    } while (0)

static const char *const RELEASED = "was already released";

static cn_tensor *small(void) {
    int64_t shape[2] = {2, 3};
    return cn_zeros(shape, 2, CN_F32, cn_cpu());
}

/* ---- the misuses ------------------------------------------------------------------------------ */

static void release_twice(void) {
    cn_tensor *t = small();
    cn_release(t);
    cn_release(t);
}

static void add_after_release(void) {
    cn_tensor *t = small();
    cn_release(t);
    cn_add(t, t);
}

static void shape_after_release(void) {
    cn_tensor *t = small();
    cn_release(t);
    cn_shape(t);
}

static void read_after_release(void) {
    cn_tensor *t = small();
    float v[6];
    cn_release(t);
    cn_read(t, v, sizeof v);
}

static void view_after_release(void) {
    cn_tensor *t = small();
    cn_release(t);
    cn_transpose(t, 0, 1);
}

static void retain_after_release(void) {
    cn_tensor *t = small();
    cn_release(t);
    cn_retain(t);
}

static void mul_after_scope_end(void) {
    cn_scope_begin();
    cn_tensor *t = small();
    cn_scope_end();
    cn_mul(t, t);
}

static void release_after_scope_end(void) {
    cn_scope_begin();
    cn_tensor *t = small();
    cn_scope_end();
    cn_release(t);
}

static void backward_after_scope_end(void) {
    int64_t n = 3;
    cn_tensor *w = cn_require_grad(cn_ones(&n, 1, CN_F32, cn_autodiff(cn_cpu())));
    cn_scope_begin();
    cn_tensor *loss = cn_sum(cn_mul(w, w));
    cn_scope_end();
    cn_backward(loss);
}

/* A scope-owned tensor whose scope's reference is dropped on another thread: the owner's scope
 * would release it again at its end. */
static void *release_on_other_thread(void *t) {
    cn_release(t);
    return NULL;
}

static void release_scope_owned_on_another_thread_then_end_scope(void) {
    cn_scope_begin();
    cn_tensor *t = small();
    pthread_t th;
    pthread_create(&th, NULL, release_on_other_thread, t);
    pthread_join(th, NULL);
    cn_scope_end();
}

/* The scope's reference released by hand while someone else holds a reference: the scope's end
 * drops one more, and the holder's next use finds the tensor freed (memory.h). */
static void release_scope_owned_then_end_scope_under_a_holder(void) {
    cn_scope_begin();
    cn_tensor *t = small();
    cn_tensor *holder = cn_retain(t); /* e.g. a module that keeps it */
    cn_release(t);                    /* the scope's reference: not the caller's to drop */
    cn_scope_end();                   /* drops the holder's reference: the tensor dies */
    cn_add(holder, holder);
}

static void test_a_second_release_stops_naming_the_tensor(void) {
    EXPECT_ABORT(release_twice, "cinder: misuse in release: tensor #", "[2, 3] f32 cpu", RELEASED);
}

static void test_an_op_on_a_released_tensor_stops_naming_the_op(void) {
    EXPECT_ABORT(add_after_release, "misuse in add: tensor #", "[2, 3] f32 cpu", RELEASED);
    EXPECT_ABORT(view_after_release, "misuse in transpose: tensor #", RELEASED);
    EXPECT_ABORT(retain_after_release, "misuse in retain: tensor #", RELEASED);
}

static void test_an_accessor_on_a_released_tensor_stops(void) {
    EXPECT_ABORT(shape_after_release, "misuse in shape: tensor #", "[2, 3] f32 cpu", RELEASED);
    EXPECT_ABORT(read_after_release, "misuse in read: tensor #", RELEASED);
}

static void test_a_use_after_its_scope_ended_stops(void) {
    EXPECT_ABORT(mul_after_scope_end, "misuse in mul: tensor #", "[2, 3] f32 cpu", RELEASED);
    EXPECT_ABORT(release_after_scope_end, "misuse in release: tensor #", RELEASED);
    EXPECT_ABORT(backward_after_scope_end, "misuse in backward: tensor #", "[] f32",
                 RELEASED);
    EXPECT_ABORT(release_scope_owned_then_end_scope_under_a_holder, "misuse in add: tensor #",
                 "[2, 3] f32 cpu", RELEASED);
}

static void test_releasing_another_threads_scoped_tensor_stops(void) {
    EXPECT_ABORT(release_scope_owned_on_another_thread_then_end_scope,
                 "misuse in release: tensor #", "[2, 3] f32 cpu",
                 "is owned by a scope of another thread");
}

/* ---- correct use -------------------------------------------------------------------------------- */

static void *retain_release_elsewhere(void *t) {
    cn_release(cn_add(t, t));
    cn_release(t); /* the reference the main thread took for this thread */
    return NULL;
}

static void correct_use(void) {
    cn_tensor *t = small();
    cn_release(cn_retain(t)); /* balanced */
    cn_tensor *v = cn_transpose(t, 0, 1);
    cn_release(t); /* the view keeps the storage */
    cn_release(cn_add(v, v));
    cn_release(v);

    cn_scope_begin(); /* a scope's tensor released early is forgotten by the scope */
    cn_tensor *early = small();
    cn_release(early);
    cn_tensor *kept = cn_keep(small());
    cn_tensor *held = cn_retain(small()); /* the scope drops its reference, ours stays */
    cn_scope_end();
    cn_release(cn_mul(kept, held));
    cn_release(kept);
    cn_release(held);

    cn_scope_begin(); /* a scope's tensor shared with a thread that takes its own reference */
    cn_tensor *shared = small();
    pthread_t th;
    pthread_create(&th, NULL, retain_release_elsewhere, cn_retain(shared));
    pthread_join(th, NULL);
    cn_scope_end();

    for (int i = 0; i < 10000; i++) cn_release(small()); /* past the quarantine's size */
    if (cn_live_tensors() != 0) abort();
}

static void test_correct_use_runs_to_its_end(void) { expect_clean(correct_use); }

int main(void) {
    RUN(test_a_second_release_stops_naming_the_tensor);
    RUN(test_an_op_on_a_released_tensor_stops_naming_the_op);
    RUN(test_an_accessor_on_a_released_tensor_stops);
    RUN(test_a_use_after_its_scope_ended_stops);
    RUN(test_releasing_another_threads_scoped_tensor_stops);
    RUN(test_correct_use_runs_to_its_end);
    return th_finish();
}

#else

int main(void) {
    printf("misuse checks are off in this build (CINDER_CHECK_MISUSE): skipped\n");
    return 77;
}

#endif
