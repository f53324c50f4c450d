/* A byte-level tokenizer over a text file (text.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/text.h"

static void vocab_index(cli_vocab *v) {
    for (int b = 0; b < 256; b++)
        v->token[b] = -1;
    for (int i = 0; i < v->size; i++)
        v->token[v->bytes[i]] = (int16_t)i;
}

int cli_text_load(const char *cmd, const char *path, int64_t limit, cli_text *out) {
    *out = (cli_text){0};
    const char *file = path ? path : CLI_TEXT_DEFAULT;
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "cinder %s: cannot read the text %s: %s%s\n", cmd, file, strerror(errno),
                path ? ""
                     : " (it comes with the Debian package fortunes: apt-get install "
                       "fortunes, or scripts/deps.sh; or give --data FILE, any text file)");
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *bytes = malloc(cap);
    while (bytes && (limit == 0 || (int64_t)n < limit)) {
        if (n == cap) {
            unsigned char *more = realloc(bytes, cap * 2);
            if (!more) {
                free(bytes);
                bytes = NULL;
                break;
            }
            bytes = more;
            cap *= 2;
        }
        size_t want = cap - n;
        if (limit && (int64_t)want > limit - (int64_t)n) want = (size_t)(limit - (int64_t)n);
        size_t got = fread(bytes + n, 1, want, f);
        n += got;
        if (got < want) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (!bytes || failed) {
        fprintf(stderr, "cinder %s: cannot read the text %s: %s\n", cmd, file,
                !bytes ? "out of memory" : "a read failed");
        free(bytes);
        return -1;
    }
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++)
        seen[bytes[i]] = 1;
    for (int b = 0; b < 256; b++)
        if (seen[b]) out->vocab.bytes[out->vocab.size++] = (unsigned char)b;
    vocab_index(&out->vocab);
    out->tokens = malloc(sizeof *out->tokens * (n ? n : 1));
    if (!out->tokens) {
        fprintf(stderr, "cinder %s: cannot read the text %s: out of memory\n", cmd, file);
        free(bytes);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        out->tokens[i] = out->vocab.token[bytes[i]];
    out->length = (int64_t)n;
    free(bytes);
    return 0;
}

void cli_text_free(cli_text *t) {
    free(t->tokens);
    *t = (cli_text){0};
}

void cli_vocab_to_hex(const cli_vocab *v, char *buf, size_t size) {
    size_t at = 0;
    for (int i = 0; i < v->size && at + 3 <= size; i++, at += 2)
        snprintf(buf + at, 3, "%02x", v->bytes[i]);
    if (size) buf[at < size ? at : size - 1] = '\0';
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int cli_vocab_from_hex(const char *hex, cli_vocab *v) {
    size_t len = strlen(hex);
    if (len == 0 || len % 2 || len > 512) return -1;
    v->size = 0;
    for (size_t i = 0; i < len; i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        int b = hi * 16 + lo;
        if (v->size && b <= v->bytes[v->size - 1]) return -1;
        v->bytes[v->size++] = (unsigned char)b;
    }
    vocab_index(v);
    return 0;
}
