/* The text of `cinder train --model gpt` and `cinder generate`: a character-level (byte-level)
 * tokenizer over a file's bytes.
 *
 * The vocabulary is the distinct bytes of the text in increasing order; token i is the i-th of
 * them. A checkpoint keeps it as the metadata "vocab": the bytes in that order as lowercase hex,
 * two digits each ("0a20214142..."), so any byte survives JSON and the file stays readable by
 * safetensors' own tools. */
#ifndef CINDER_CLI_TEXT_H
#define CINDER_CLI_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The default text: the science fortunes of the Debian package `fortunes` (130 KB of plain
 * ASCII, 93 distinct bytes), installed by scripts/deps.sh. */
#define CLI_TEXT_DEFAULT "/usr/share/games/fortunes/science"

typedef struct cli_vocab {
    unsigned char bytes[256]; /* token -> byte */
    int16_t token[256];       /* byte -> token, -1 for a byte outside the vocabulary */
    int size;
} cli_vocab;

typedef struct cli_text {
    int64_t *tokens; /* the text's bytes as tokens, malloc'd */
    int64_t length;
    cli_vocab vocab;
} cli_text;

/* Reads `path` (NULL: CLI_TEXT_DEFAULT), keeping its first `limit` bytes (0: all), and encodes it
 * with its own vocabulary. 0, or -1 after printing why ("cinder <cmd>: cannot read the text
 * ...", with how to install the default) on stderr. */
int cli_text_load(const char *cmd, const char *path, int64_t limit, cli_text *out);

void cli_text_free(cli_text *t);

/* The vocabulary as hex into buf (2 * size + 1 bytes at least). */
void cli_vocab_to_hex(const cli_vocab *v, char *buf, size_t size);

/* The vocabulary from its hex text: 0, or -1 when the text is not 1 to 256 distinct bytes in
 * increasing order, written as pairs of hex digits. */
int cli_vocab_from_hex(const char *hex, cli_vocab *v);

#endif
