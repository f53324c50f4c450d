/* Threads (the threading model in tensor.h): two models trained on two threads at once, each with
 * its own data, end bit-identical to the same runs made one after the other on one thread; a
 * tensor shared read-only by several threads, retained and released from each, gives every
 * thread the right answer and is freed exactly once. Built with ThreadSanitizer by
 * scripts/tsan.sh, where a data race anywhere on these paths fails the run. */
#include <pthread.h>

#include "harness.h"

/* ---- two models, two threads ---------------------------------------------------------------- */

enum { IN = 32, HIDDEN = 128, OUT = 4, BATCH = 256, STEPS = 20 };

typedef struct run {
    uint64_t seed;     /* the model's weights and its data both come from it */
    double first_loss, last_loss;
    float *params;     /* every parameter after training, concatenated */
    int64_t n_params;
    int ok;
} run;

/* A batch of x ~ N(0, 1) [BATCH, IN] and labels (x0 > 0) + 2 (x1 > 0): learnable by an MLP. */
static int make_batch(cn_generator *gen, cn_device dev, cn_tensor **x, cn_tensor **labels) {
    int64_t xs[2] = {BATCH, IN}, ls = BATCH;
    *x = cn_rand_normal(gen, xs, 2, 0.0, 1.0, CN_F32, dev);
    if (!*x) return 0;
    static _Thread_local float host[BATCH * IN];
    int64_t lab[BATCH];
    if (cn_read(*x, host, sizeof host) != CN_OK) return 0;
    for (int i = 0; i < BATCH; i++)
        lab[i] = (host[i * IN] > 0) + 2 * (host[i * IN + 1] > 0);
    *labels = cn_from_data(lab, &ls, 1, CN_I64, cn_inner_device(dev));
    return *labels != NULL;
}

/* Trains IN-HIDDEN-HIDDEN-OUT with SGD + momentum for STEPS steps on one batch of its own. */
static void *train(void *arg) {
    run *r = arg;
    cn_device dev = cn_autodiff(cn_cpu());
    cn_generator gen = cn_generator_new(r->seed);
    cn_module *net = cn_sequential_new((cn_module *[]){
        cn_linear_new(IN, HIDDEN, 1, dev, CN_F32, &gen), cn_activation_new(CN_ACT_RELU),
        cn_linear_new(HIDDEN, HIDDEN, 1, dev, CN_F32, &gen), cn_activation_new(CN_ACT_RELU),
        cn_linear_new(HIDDEN, OUT, 1, dev, CN_F32, &gen)}, 5);
    int n = 0;
    const cn_param *params = net ? cn_module_params(net, &n) : NULL;
    cn_optimizer *opt = params ? cn_sgd_new(params, n, 0.1, 0.9, 0.0, 0, 0.0) : NULL;
    cn_tensor *x = NULL, *labels = NULL;
    r->ok = opt && make_batch(&gen, dev, &x, &labels);
    for (int step = 0; step < STEPS && r->ok; step++) {
        cn_scope_begin();
        cn_tensor *loss = cn_cross_entropy(cn_module_forward(net, x), labels, 0.0);
        cn_grads *g = cn_backward(loss);
        float value = 0;
        r->ok = g && cn_read(loss, &value, sizeof value) == CN_OK &&
                cn_optimizer_step(opt, g) == CN_OK;
        if (step == 0) r->first_loss = value;
        r->last_loss = value;
        cn_grads_free(g);
        cn_scope_end();
    }
    r->n_params = 0;
    for (int i = 0; i < n; i++) r->n_params += cn_numel(params[i].tensor);
    r->params = malloc(sizeof *r->params * (size_t)(r->n_params ? r->n_params : 1));
    int64_t at = 0;
    for (int i = 0; i < n && r->ok; i++) {
        int64_t k = cn_numel(params[i].tensor);
        r->ok = cn_read(params[i].tensor, r->params + at, sizeof(float) * (size_t)k) == CN_OK;
        at += k;
    }
    if (!r->ok) fprintf(stderr, "training seed %llu failed: %s\n", (unsigned long long)r->seed,
                        cn_last_error());
    cn_release(x);
    cn_release(labels);
    cn_optimizer_free(opt);
    cn_module_free(net);
    return NULL;
}

static void check_same(const run *a, const run *b) {
    CHECK(a->ok && b->ok);
    CHECK(a->n_params == b->n_params && a->n_params > 0);
    CHECK(a->first_loss == b->first_loss);
    CHECK(a->last_loss == b->last_loss);
    if (a->ok && b->ok && a->n_params == b->n_params)
        CHECK(memcmp(a->params, b->params, sizeof(float) * (size_t)a->n_params) == 0);
}

static void test_two_models_on_two_threads_match_one_thread(void) {
    run solo[2] = {{.seed = 1}, {.seed = 2}}, duo[2] = {{.seed = 1}, {.seed = 2}};
    /* first in the program: the two threads record the process's first graph nodes at once */
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, train, &duo[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    train(&solo[0]); /* the oracle: the same runs, one after the other, on this thread */
    train(&solo[1]);
    for (int i = 0; i < 2; i++) {
        check_same(&duo[i], &solo[i]);
        printf("seed %llu: loss %.4f -> %.4f\n", (unsigned long long)duo[i].seed,
               duo[i].first_loss, duo[i].last_loss);
        CHECK(duo[i].last_loss < duo[i].first_loss * 0.5); /* it learns */
    }
    CHECK(memcmp(solo[0].params, solo[1].params, sizeof(float) * 16) != 0); /* different runs */
    for (int i = 0; i < 2; i++) {
        free(solo[i].params);
        free(duo[i].params);
    }
}

/* ---- one tensor, many threads ----------------------------------------------------------------- */

enum { READERS = 4, ROUNDS = 200 };

typedef struct reader {
    cn_tensor *shared; /* a reference this thread owns and releases */
    int wrong;
} reader;

/* Uses the shared tensor as an input (concrete and tracked), retains and releases it, and drops
 * the reference it was given. */
static void *read_shared(void *arg) {
    reader *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        cn_tensor *t = cn_retain(r->shared);
        cn_tensor *y = cn_add(t, t);
        float v[8] = {0};
        if (!y || cn_read(y, v, sizeof v) != CN_OK) r->wrong++;
        for (int k = 0; k < 8; k++) r->wrong += v[k] != 2.0f * (float)k;
        cn_release(y);
        cn_release(t);
    }
    cn_release(r->shared);
    return NULL;
}

static void test_a_shared_tensor_is_read_and_released_from_many_threads(void) {
    float v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t n = 8;
    int64_t live = cn_live_tensors();
    cn_tensor *t = cn_from_data(v, &n, 1, CN_F32, cn_cpu());
    cn_tensor *view = cn_reshape(t, (int64_t[]){2, 4}, 2); /* shares t's storage */
    reader rs[READERS];
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++) {
        rs[i] = (reader){cn_retain(t), 0};
        CHECK(pthread_create(&th[i], NULL, read_shared, &rs[i]) == 0);
    }
    cn_release(t); /* the readers' references keep it alive */
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        CHECK(rs[i].wrong == 0);
    }
    float back[8];
    CHECK(cn_read(view, back, sizeof back) == CN_OK && memcmp(back, v, sizeof v) == 0);
    cn_release(view);
    CHECK(cn_live_tensors() == live);
}

/* A tracked leaf shared by threads that each record their own graph from it: recording only takes
 * references to the leaf's node, so it runs concurrently. A backward walks (marks) every node of
 * its graph, the shared leaf's included, so the backwards take turns (tensor.h). Each thread's
 * gradient of sum(w * c_i) is c_i. */
static pthread_mutex_t backward_turn = PTHREAD_MUTEX_INITIALIZER;

typedef struct tracker {
    cn_tensor *w;
    float c;
    int wrong;
} tracker;

static void *record_from_shared_leaf(void *arg) {
    tracker *k = arg;
    int64_t n = 4;
    for (int i = 0; i < 50; i++) {
        cn_scope_begin();
        cn_tensor *c = cn_full(&n, 1, k->c, CN_F32, cn_cpu());
        cn_tensor *loss = cn_sum(cn_mul(k->w, c));
        pthread_mutex_lock(&backward_turn);
        cn_grads *g = cn_backward(loss);
        pthread_mutex_unlock(&backward_turn);
        float got[4] = {0};
        if (!g || cn_read(cn_grad(g, k->w), got, sizeof got) != CN_OK) k->wrong++;
        for (int j = 0; j < 4; j++) k->wrong += got[j] != k->c;
        cn_grads_free(g);
        cn_scope_end();
    }
    return NULL;
}

static void test_threads_record_their_own_graphs_from_a_shared_leaf(void) {
    int64_t n = 4;
    cn_tensor *w = cn_require_grad(cn_ones(&n, 1, CN_F32, cn_autodiff(cn_cpu())));
    tracker ks[2] = {{w, 2.0f, 0}, {w, 3.0f, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, record_from_shared_leaf, &ks[i]) == 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(ks[i].wrong == 0);
    }
    cn_release(w);
}

int main(void) {
    RUN(test_two_models_on_two_threads_match_one_thread);
    RUN(test_a_shared_tensor_is_read_and_released_from_many_threads);
    RUN(test_threads_record_their_own_graphs_from_a_shared_leaf);
    return th_finish();
}
