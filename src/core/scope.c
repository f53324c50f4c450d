/* Scopes: a per-thread list of the tensors made while scopes are open. Scope k owns the entries
 * from starts[k] to the end of the list (or to starts[k+1]); a freed tensor leaves a NULL. */
#include <string.h>

#include "cinder/memory.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"

typedef struct scope_state {
    cn_tensor **items;
    int64_t count, cap;
    int64_t *starts;
    int depth_cap;            /* the depth itself is cn__scope_depth_now */
} scope_state;

static _Thread_local scope_state st;
/* open scopes on this thread; extern for the inline checks in tensor_impl.h */
_Thread_local int cn__scope_depth_now;

static void free_if_idle(void) {
    if (cn__scope_depth_now > 0) return;
    cn__free(st.items);
    cn__free(st.starts);
    memset(&st, 0, sizeof st);
}

cn_status cn_scope_begin(void) {
    if (cn__scope_depth_now == st.depth_cap) {
        int cap = st.depth_cap ? st.depth_cap * 2 : 8;
        int64_t *starts = cn__malloc("scope_begin", sizeof *starts * (size_t)cap);
        if (!starts) return CN_ERR_OUT_OF_MEMORY;
        if (cn__scope_depth_now)
            memcpy(starts, st.starts, sizeof *starts * (size_t)cn__scope_depth_now);
        cn__free(st.starts);
        st.starts = starts;
        st.depth_cap = cap;
    }
    st.starts[cn__scope_depth_now++] = st.count;
    return CN_OK;
}

cn_status cn__scope_add(cn_tensor *t) {
    if (cn__scope_depth_now == 0) return CN_OK;
    if (st.count == st.cap) {
        int64_t cap = st.cap ? st.cap * 2 : 256;
        cn_tensor **items = cn__malloc("scope", sizeof *items * (size_t)cap);
        if (!items) return CN_ERR_OUT_OF_MEMORY;
        if (st.count) memcpy(items, st.items, sizeof *items * (size_t)st.count);
        cn__free(st.items);
        st.items = items;
        st.cap = cap;
    }
    t->scope_slot = st.count;
#ifdef CINDER_CHECK_MISUSE
    t->scope_owner = &st;
#endif
    st.items[st.count++] = t;
    return CN_OK;
}

#ifdef CINDER_CHECK_MISUSE
/* A scope belongs to its thread: another thread that drops the scope's reference, or keeps the
 * tensor, would leave the owner's list pointing at a dead header (released twice at its end). */
static void check_owner(const char *op, const cn_tensor *t) {
    if (t->scope_owner != &st)
        cn__misuse(op, t, "is owned by a scope of another thread: the thread that made it must "
                   "release it or end that scope (cn_retain it to share it, and release only "
                   "the references you took)");
}
#endif

void cn__scope_remove(cn_tensor *t) {
#ifdef CINDER_CHECK_MISUSE
    check_owner("release", t);
#endif
    if (t->scope_slot >= 0 && t->scope_slot < st.count && st.items[t->scope_slot] == t)
        st.items[t->scope_slot] = NULL;
    t->scope_slot = -1;
}

cn_status cn_scope_end(void) {
    if (cn__scope_depth_now == 0)
        return cn_set_error(CN_ERR_SCOPE, "scope_end", "no scope is open on this thread; pair "
                            "every cn_scope_end with an earlier cn_scope_begin");
    int64_t begin = st.starts[--cn__scope_depth_now];
    int64_t end = st.count;
    int64_t kept = begin; /* kept tensors move down into the enclosing scope's range */
    for (int64_t i = begin; i < end; i++) {
        cn_tensor *t = st.items[i];
        if (!t) continue;
#ifdef CINDER_CHECK_MISUSE
        if (t->live != CN__LIVE)
            cn__misuse("scope_end", t, "was released while this scope still owned it");
#endif
        if (t->scope_kept) {
            t->scope_kept = 0;
            if (cn__scope_depth_now > 0) {
                st.items[kept] = t;
                t->scope_slot = kept++;
            } else {
                t->scope_slot = -1;
            }
        } else {
            st.items[i] = NULL;
            t->scope_slot = -1;
            cn_release(t);
        }
    }
    /* releases above may have NULLed kept slots' old positions only; trim to what is kept */
    st.count = kept;
    free_if_idle();
    return CN_OK;
}

cn_tensor *cn_keep(cn_tensor *t) {
    CN__CHECK_LIVE("keep", t);
#ifdef CINDER_CHECK_MISUSE
    if (t && t->scope_slot >= 0) check_owner("keep", t);
#endif
    if (t && t->scope_slot >= 0) t->scope_kept = 1;
    return t;
}

int cn_scope_depth(void) { return cn__scope_depth_now; }
