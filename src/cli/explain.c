/* `cinder explain`: prints catalogue entries, as text for people or as JSON for tools.
 *
 *     cinder explain 3 | CN_ERR_SHAPE | incompatible-shapes | "add: incompatible shapes: ..."
 *     cinder explain --json            all entries, as a JSON array
 *     cinder explain --json <query>    one entry, as a JSON object
 *     cinder explain --list            one line per code
 *
 * The JSON objects use the field names of the exported error record: slug, errorCode,
 * messagePattern, documentation, triggerScenarios, commonSituations, solutions, exampleFix,
 * preventionTips (solutions and preventionTips are arrays of strings, the rest strings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/catalogue.h"
#include "cli/cli.h"

/* ---- text ----------------------------------------------------------------------------------- */

#define WRAP_COLUMNS 80

/* Prints text word-wrapped to WRAP_COLUMNS: the first line starts with `first` (indent spaces
 * plus, e.g., "- "), later lines with `indent` spaces. */
static void print_wrapped(FILE *f, const char *text, const char *first, int indent) {
    int col = (int)strlen(first);
    fputs(first, f);
    int line_empty = 1;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        int len = (int)(p - w);
        if (!line_empty && col + 1 + len > WRAP_COLUMNS) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            line_empty = 1;
        }
        if (!line_empty) {
            fputc(' ', f);
            col++;
        }
        fwrite(w, 1, (size_t)len, f);
        col += len;
        line_empty = 0;
    }
    fputc('\n', f);
}

static void print_list(FILE *f, const char *const *items) {
    for (; *items; items++)
        print_wrapped(f, *items, "  - ", 4);
}

/* Code is printed as it is, each line indented. */
static void print_code(FILE *f, const char *code) {
    fputs("    ", f);
    for (const char *p = code; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fputs("    ", f);
    }
    fputc('\n', f);
}

static void print_entry(FILE *f, const cn_error_entry *e) {
    fprintf(f, "%s: %s\n\n", e->error_code, e->slug);
    fprintf(f, "  message: %s\n\n", e->message_pattern);
    fprintf(f, "What it means\n");
    print_wrapped(f, e->documentation, "  ", 2);
    fprintf(f, "\nWhat raises it\n");
    print_wrapped(f, e->trigger_scenarios, "  ", 2);
    fprintf(f, "\nWhere it usually comes from\n");
    print_wrapped(f, e->common_situations, "  ", 2);
    fprintf(f, "\nHow to fix it\n");
    print_list(f, e->solutions);
    fprintf(f, "\nExample fix\n");
    print_code(f, e->example_fix);
    fprintf(f, "\nHow to prevent it\n");
    print_list(f, e->prevention_tips);
}

static void print_index(FILE *f) {
    const cn_error_entry *entries;
    size_t n = cn_error_catalogue(&entries);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%3d  %-26s %-22s %s\n", (int)entries[i].status, entries[i].name,
                entries[i].slug, entries[i].phrase);
    }
}

/* ---- JSON ----------------------------------------------------------------------------------- */


static void json_string_array(FILE *f, const char *const *items, const char *indent) {
    fputc('[', f);
    for (size_t i = 0; items[i]; i++) {
        fprintf(f, "%s\n%s  ", i ? "," : "", indent);
        cli_json_string(f, items[i]);
    }
    if (items[0]) fprintf(f, "\n%s", indent);
    fputc(']', f);
}

/* One entry as a JSON object; `indent` is the indentation of its braces. */
static void json_entry(FILE *f, const cn_error_entry *e, const char *indent) {
    const struct {
        const char *key;
        const char *value;
    } strings[] = {
        {"slug", e->slug},
        {"errorCode", e->error_code},
        {"messagePattern", e->message_pattern},
        {"documentation", e->documentation},
        {"triggerScenarios", e->trigger_scenarios},
        {"commonSituations", e->common_situations},
    };
    fprintf(f, "%s{\n", indent);
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) {
        fprintf(f, "%s  \"%s\": ", indent, strings[i].key);
        cli_json_string(f, strings[i].value);
        fputs(",\n", f);
    }
    char inner[32];
    snprintf(inner, sizeof inner, "%s  ", indent);
    fprintf(f, "%s  \"solutions\": ", indent);
    json_string_array(f, e->solutions, inner);
    fprintf(f, ",\n%s  \"exampleFix\": ", indent);
    cli_json_string(f, e->example_fix);
    fprintf(f, ",\n%s  \"preventionTips\": ", indent);
    json_string_array(f, e->prevention_tips, inner);
    fprintf(f, "\n%s}", indent);
}

static void json_catalogue(FILE *f) {
    const cn_error_entry *entries;
    size_t n = cn_error_catalogue(&entries);
    fputs("[\n", f);
    for (size_t i = 0; i < n; i++) {
        json_entry(f, &entries[i], "  ");
        fputs(i + 1 < n ? ",\n" : "\n", f);
    }
    fputs("]\n", f);
}

/* ---- the command ---------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f, "usage: cinder explain <code | name | slug | message text>\n"
               "       cinder explain --json [query]   JSON: every entry, or the one matching\n"
               "       cinder explain --list           one line per error code\n"
               "examples:\n"
               "  cinder explain 3\n"
               "  cinder explain CN_ERR_SHAPE\n"
               "  cinder explain incompatible-shapes\n"
               "  cinder explain \"add: incompatible shapes: [2, 3] and [4]\"\n");
}

/* The words of argv joined by single spaces, so an unquoted message works too; NULL if none. */
static char *join_words(int argc, char **argv) {
    size_t len = 0;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    if (len == 0) return NULL;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < argc; i++) {
        if (i) strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

int cli_explain(int argc, char **argv) {
    int json = 0, list = 0;
    char **words = malloc(sizeof *words * (size_t)(argc > 0 ? argc : 1));
    if (!words) {
        fprintf(stderr, "cinder explain: out of memory\n");
        return CLI_EXIT_FAILURE;
    }
    int n_words = 0;
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        int is_json = 0, is_list = 0, is_end = 0;
        if (!options_done && ((is_json = cli_flag(argv[i], "explain", "--json")) < 0 ||
                              (is_list = cli_flag(argv[i], "explain", "--list")) < 0 ||
                              (is_end = cli_flag(argv[i], "explain", "--")) < 0)) {
            free(words);
            return CLI_EXIT_USAGE;
        }
        if (!options_done && is_json) {
            json = 1;
        } else if (!options_done && is_list) {
            list = 1;
        } else if (!options_done && is_end) {
            options_done = 1;
        } else {
            words[n_words++] = argv[i];
        }
    }
    char *query = join_words(n_words, words);
    free(words);

    int rc = CLI_EXIT_OK;
    if (list && !json && !query) {
        print_index(stdout);
    } else if (json && !list && !query) {
        json_catalogue(stdout);
    } else if (!query || list) {
        usage(stderr);
        rc = CLI_EXIT_USAGE;
    } else {
        const cn_error_entry *e = cn_error_lookup(query);
        if (!e) {
            fprintf(stderr,
                    "cinder explain: no error matches \"%s\".\n"
                    "Give a code number, a name (CN_ERR_SHAPE), a slug (incompatible-shapes) "
                    "or a message cinder printed;\n`cinder explain --list` lists every code.\n",
                    query);
            rc = CLI_EXIT_USAGE;
        } else if (json) {
            json_entry(stdout, e, "");
            fputc('\n', stdout);
        } else {
            print_entry(stdout, e);
        }
    }
    free(query);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cinder explain: cannot write the output\n");
        return CLI_EXIT_FAILURE;
    }
    return rc;
}
