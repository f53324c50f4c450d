/* cinder: the error catalogue.
 *
 * One entry per status code (every cn_status except CN_OK), compiled into the library: what the
 * error means, what raises it, how to fix it and how to avoid it. `cinder explain <code>` prints
 * the same entries, and `cinder explain --json` exports them all.
 *
 * Every message cinder raises has the form "<op>: <phrase>: <detail>", where <phrase> is the
 * fixed phrase of its status in this catalogue, so a message can be traced back to its entry by
 * text alone (cn_error_lookup). */
#ifndef CINDER_CATALOGUE_H
#define CINDER_CATALOGUE_H

#include "cinder/api.h"

#include <stddef.h>

#include "cinder/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One catalogue entry. Every string is static, non-empty and valid for the life of the program.
 * The field names follow the exported record (`cinder explain --json`):
 *   slug -> slug, error_code -> errorCode, message_pattern -> messagePattern, documentation,
 *   trigger_scenarios -> triggerScenarios, common_situations -> commonSituations, solutions,
 *   example_fix -> exampleFix, prevention_tips -> preventionTips. */
typedef struct cn_error_entry {
    cn_status status;       /* the code */
    const char *name;       /* its stable name, "CN_ERR_SHAPE" (= cn_status_name(status)) */
    const char *error_code; /* name and number, "CN_ERR_SHAPE (3)" */
    const char *slug;       /* lowercase, dash-separated, unique: "incompatible-shapes" */
    const char *phrase;     /* the fixed phrase of raised messages: "incompatible shapes" */
    /* The text every raised message of this status matches. "{op}" and "{detail}" are
     * placeholders (see cn_error_message_matches): "{op}: incompatible shapes: {detail}". */
    const char *message_pattern;
    const char *documentation;          /* what the error means and why cinder reports it */
    const char *trigger_scenarios;      /* concrete calls that raise it */
    const char *common_situations;      /* where it tends to come from in real programs */
    const char *const *solutions;       /* NULL-terminated list of fixes, most likely first */
    const char *example_fix;            /* a short C fragment: "// before" ... "// after" ... */
    const char *const *prevention_tips; /* NULL-terminated list */
} cn_error_entry;

/* The entry of status s, or NULL for CN_OK and values that are not codes. */
CN_API const cn_error_entry *cn_error_entry_of(cn_status s);

/* All entries, in increasing code order: sets *entries to the first (when entries is not NULL)
 * and returns how many there are (CN_STATUS_COUNT - 1). */
CN_API size_t cn_error_catalogue(const cn_error_entry **entries);

/* Finds the entry a user is asking about. Leading and trailing white space is ignored. The query
 * may be, tried in this order:
 *   - a number: "3";
 *   - a status name, any case: "CN_ERR_SHAPE", or the error_code form "CN_ERR_SHAPE (3)";
 *   - a slug, any case: "incompatible-shapes";
 *   - a raised message: "add: incompatible shapes: [2, 3] and [4] ..." (matched against each
 *     message_pattern; if several match, the one whose phrase comes first in the text wins);
 *   - failing all of those, any text containing a phrase, such as a log line that wraps the
 *     message ("error: step 3: add: incompatible shapes: ...").
 * Returns NULL when nothing matches (or query is NULL). Sets no error. */
CN_API const cn_error_entry *cn_error_lookup(const char *query);

/* Non-zero when message matches entry's message_pattern: the literal text of the pattern must
 * appear exactly, and each {placeholder} (a '{', a name, a '}') matches any text, possibly empty.
 * A pattern without placeholders must equal the whole message. Returns 0 if either is NULL. */
CN_API int cn_error_message_matches(const cn_error_entry *entry, const char *message);

#ifdef __cplusplus
}
#endif
#endif
