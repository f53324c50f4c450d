/* The CLI's option reading (src/cli/options.c) and JSON writing (src/cli/json.c) on their own,
 * against a help text of this test's own: an option or flag that the help does not list, as a
 * whole word, is refused (the check that keeps every command's --help complete), values are read
 * in both spellings, --threads sets the CPU pool before it starts and is refused after, and JSON
 * numbers are never nan or inf. Expected text written here by hand. */
#define _POSIX_C_SOURCE 200809L

#include "cli/cli.h"
#include "harness.h"

/* The help that options.c checks names against (main.c's in the program). */
const char *cli_command_help(const char *cmd) {
    if (strcmp(cmd, "demo") == 0)
        return "  --alpha N              a number\n"
               "  --beta-gamma X         a value\n"
               "  --flag                 a flag\n";
    return NULL;
}

static void test_documented_options_are_read_in_both_spellings(void) {
    char *argv[] = {"demo", "--alpha", "3", "--alpha=4", "--flag", "--alpha"};
    int argc = 6, i = 1;
    const char *v = NULL;
    CHECK(cli_option(argc, argv, &i, "demo", "--alpha", &v) == 1 && strcmp(v, "3") == 0 && i == 2);
    i = 3;
    CHECK(cli_option(argc, argv, &i, "demo", "--alpha", &v) == 1 && strcmp(v, "4") == 0 && i == 3);
    i = 4;
    CHECK(cli_option(argc, argv, &i, "demo", "--alpha", &v) == 0); /* another argument */
    CHECK(cli_flag(argv[4], "demo", "--flag") == 1);
    CHECK(cli_flag(argv[1], "demo", "--flag") == 0);
    i = 5;
    CHECK(cli_option(argc, argv, &i, "demo", "--alpha", &v) == -1); /* no value */
}

static void test_an_option_the_help_does_not_list_is_refused(void) {
    char *argv[] = {"demo", "--other", "1"};
    int i = 1;
    const char *v = NULL;
    fprintf(stderr, "(four internal errors are expected next)\n");
    CHECK(cli_option(3, argv, &i, "demo", "--undocumented", &v) == -1);
    /* "--beta" is only a prefix of "--beta-gamma" in the help */
    CHECK(cli_option(3, argv, &i, "demo", "--beta", &v) == -1);
    CHECK(cli_flag(argv[1], "demo", "--nope") == -1);
    CHECK(cli_flag(argv[1], "no-such-command", "--flag") == -1);
    CHECK(i == 1);                                                   /* nothing consumed */
    CHECK(cli_option(3, argv, &i, "demo", "--beta-gamma", &v) == 0); /* listed: just no match */
}

static void test_threads_set_the_pool_before_it_starts(void) {
    fprintf(stderr, "(three --threads errors are expected next)\n");
    CHECK(cli_parse_threads("demo", "0") == -1);
    CHECK(cli_parse_threads("demo", "257") == -1);
    CHECK(cli_parse_threads("demo", "2") == 0);
    CHECK(cn_cpu_threads() == 2); /* starts the pool */
    CHECK(cli_parse_threads("demo", "2") == 0);
    CHECK(cli_parse_threads("demo", "3") == -1);
    cn_clear_error();
}

/* What f holds, from the start, in buf. */
static const char *contents(FILE *f, char *buf, size_t size) {
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    rewind(f);
    return buf;
}

static void test_json_values_are_always_valid(void) {
    char buf[256];
    const struct {
        double v;
        const char *want;
    } numbers[] = {{NAN, "null"},       {INFINITY, "null"}, {-INFINITY, "null"},
                   {-0.0, "0"},         {0.1, "0.1"},       {1e-5, "1e-05"},
                   {2.5e20, "2.5e+20"}, {-3, "-3"},         {0.123456789012, "0.123456789"}};
    for (size_t k = 0; k < sizeof numbers / sizeof *numbers; k++) {
        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (!f) return;
        cli_json_number(f, numbers[k].v, 9);
        CHECK(strcmp(contents(f, buf, sizeof buf), numbers[k].want) == 0);
        fclose(f);
    }
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    cli_json_string(f, "a\"b\\c\n\t\x01z");
    CHECK(strcmp(contents(f, buf, sizeof buf), "\"a\\\"b\\\\c\\n\\t\\u0001z\"") == 0);
    fclose(f);
    f = tmpfile();
    cli_json_string(f, NULL);
    CHECK(strcmp(contents(f, buf, sizeof buf), "null") == 0);
    fclose(f);
}

int main(void) {
    RUN(test_documented_options_are_read_in_both_spellings);
    RUN(test_an_option_the_help_does_not_list_is_refused);
    RUN(test_threads_set_the_pool_before_it_starts);
    RUN(test_json_values_are_always_valid);
    return th_finish();
}
