/* The error catalogue: one table row per status code, and the lookups over it.
 *
 * This table is the single source of every status's phrase: cn_set_error writes
 * "<op>: <phrase>: <detail>" with cn__status_phrase, which reads the row, so raised messages and
 * the patterns documented there cannot drift apart. The rows themselves are data, kept in
 * catalogue_table.inc; this file defines the macros they are written with, the table that includes
 * them, and the lookups. To add a code, append a row there (in code order);
 * tests/test_catalogue.c then demands a call that raises it. */
#include "cinder/catalogue.h"

#include <ctype.h>
#include <string.h>

#include "core/error_internal.h"

/* A row's identity. The status number is written out so that the row reads like the record it
 * exports; the array size below is negative, failing the build, if it disagrees with error.h. */
#define CODE(sym, num)                                                                             \
    .status = (cn_status)((sym) + 0 * sizeof(char[(sym) == (num) ? 1 : -1])), .name = #sym,        \
    .error_code = #sym " (" #num ")"

/* The usual pattern: the op, the status's phrase, then the detail. A row whose messages take
 * another form sets .phrase and .message_pattern itself (the phrase must appear in the pattern). */
#define PHRASE(p) .phrase = p, .message_pattern = "{op}: " p ": {detail}"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the table ------------------------------------------------------------------------------ */

static const cn_error_entry catalogue[] = {
#include "core/catalogue_table.inc"
};

#define CATALOGUE_SIZE (sizeof catalogue / sizeof *catalogue)

/* One row per code, CN_ERR_NULL_ARG (1) first and in order: a new code in error.h without a row
 * (or a row without a code) stops the build here. */
_Static_assert(CATALOGUE_SIZE == (size_t)CN_STATUS_COUNT - 1,
               "every cn_status except CN_OK needs exactly one row in the catalogue");

/* ---- access --------------------------------------------------------------------------------- */

const cn_error_entry *cn_error_entry_of(cn_status s) {
    if ((int)s < 1 || (size_t)s > CATALOGUE_SIZE) return NULL;
    const cn_error_entry *e = &catalogue[(size_t)s - 1];
    return e->status == s ? e : NULL; /* rows out of order: caught by the tests */
}

size_t cn_error_catalogue(const cn_error_entry **entries) {
    if (entries) *entries = catalogue;
    return CATALOGUE_SIZE;
}

const char *cn__status_phrase(cn_status s) {
    const cn_error_entry *e = cn_error_entry_of(s);
    return e ? e->phrase : "";
}

/* ---- matching ------------------------------------------------------------------------------- */

/* Length of the placeholder "{name}" starting at p, or 0 if p does not start one. */
static size_t placeholder_len(const char *p) {
    if (*p != '{') return 0;
    const char *q = p + 1;
    while (*q && *q != '}' && *q != '{')
        q++;
    return *q == '}' && q > p + 1 ? (size_t)(q - p) + 1 : 0;
}

/* Glob matching of msg[0, n) against pattern, with placeholders as "any text". On a mismatch the
 * last placeholder absorbs one more character and matching resumes after it; literal runs never
 * need deeper backtracking, so this is O(n * pattern length) at worst. */
static int pattern_matches(const char *pattern, const char *msg, size_t n) {
    const char *p = pattern;
    size_t m = 0;
    const char *star_p = NULL; /* pattern position just after the last placeholder */
    size_t star_m = 0;         /* message position that placeholder currently extends to */
    while (m < n) {
        size_t ph = placeholder_len(p);
        if (ph) {
            p += ph;
            star_p = p;
            star_m = m;
        } else if (*p && *p == msg[m]) {
            p++;
            m++;
        } else if (star_p) {
            p = star_p;
            m = ++star_m;
        } else {
            return 0;
        }
    }
    for (size_t ph; (ph = placeholder_len(p)) != 0;)
        p += ph;
    return *p == '\0';
}

int cn_error_message_matches(const cn_error_entry *entry, const char *message) {
    if (!entry || !message || !entry->message_pattern) return 0;
    return pattern_matches(entry->message_pattern, message, strlen(message));
}

/* ---- lookup --------------------------------------------------------------------------------- */

static int equals_nocase(const char *a, size_t n, const char *b) {
    for (size_t i = 0; i < n; i++, b++) {
        if (*b == '\0' || tolower((unsigned char)a[i]) != tolower((unsigned char)*b)) return 0;
    }
    return *b == '\0';
}

/* Offset of needle in s[0, n), or -1. */
static long find_in(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k == 0) return -1;
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(s + i, needle, k) == 0) return (long)i;
    }
    return -1;
}

/* The entry whose phrase occurs earliest in s[0, n) among those accepted by `want` (all when
 * want is NULL); ties go to the longer phrase. */
static const cn_error_entry *earliest_phrase(const char *s, size_t n, const char *want) {
    const cn_error_entry *best = NULL;
    long best_at = -1;
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        const cn_error_entry *e = &catalogue[i];
        if (want && !want[i]) continue;
        long at = find_in(s, n, e->phrase);
        if (at < 0) continue;
        if (!best || at < best_at || (at == best_at && strlen(e->phrase) > strlen(best->phrase))) {
            best = e;
            best_at = at;
        }
    }
    return best;
}

const cn_error_entry *cn_error_lookup(const char *query) {
    if (!query) return NULL;
    const char *s = query;
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0) return NULL;

    /* a code number */
    size_t digits = 0;
    while (digits < n && isdigit((unsigned char)s[digits]))
        digits++;
    if (digits == n) {
        long code = 0;
        for (size_t i = 0; i < n && code < 1000000; i++)
            code = code * 10 + (s[i] - '0');
        return code < 1000000 ? cn_error_entry_of((cn_status)code) : NULL;
    }

    /* a name, an error_code, a slug */
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        const cn_error_entry *e = &catalogue[i];
        if (equals_nocase(s, n, e->name) || equals_nocase(s, n, e->error_code) ||
            equals_nocase(s, n, e->slug))
            return e;
    }

    /* a whole message */
    char matched[CATALOGUE_SIZE];
    int any = 0;
    for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
        matched[i] = (char)pattern_matches(catalogue[i].message_pattern, s, n);
        any |= matched[i];
    }
    if (any) {
        const cn_error_entry *e = earliest_phrase(s, n, matched);
        if (e) return e;
        for (size_t i = 0; i < CATALOGUE_SIZE; i++) {
            if (matched[i]) return &catalogue[i];
        }
    }

    /* text that contains a phrase */
    return earliest_phrase(s, n, NULL);
}
