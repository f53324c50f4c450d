/* cinder-extgen: the lexer. Tokens are identifiers and punctuation; `//` and `/ * * /` comments
 * and whitespace separate them. Anything else is an error at its line. */
#include <ctype.h>
#include <string.h>

#include "extgen.h"

void xg_lex_init(xg_lexer *lx, const char *src, size_t len) {
    lx->src = src;
    lx->pos = 0;
    lx->len = len;
    lx->line = 1;
}

/* Skips whitespace and comments; an unterminated block comment is an error at its start. */
static void skip_blank(xg_lexer *lx) {
    while (lx->pos < lx->len) {
        char c = lx->src[lx->pos];
        if (c == '\n') {
            lx->line++;
            lx->pos++;
        } else if (isspace((unsigned char)c)) {
            lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->len && lx->src[lx->pos + 1] == '/') {
            while (lx->pos < lx->len && lx->src[lx->pos] != '\n')
                lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->len && lx->src[lx->pos + 1] == '*') {
            int start = lx->line;
            lx->pos += 2;
            for (;;) {
                if (lx->pos + 1 >= lx->len) xg_fatal(start, "unterminated comment");
                if (lx->src[lx->pos] == '*' && lx->src[lx->pos + 1] == '/') break;
                if (lx->src[lx->pos] == '\n') lx->line++;
                lx->pos++;
            }
            lx->pos += 2;
        } else {
            return;
        }
    }
}

xg_token xg_lex_next(xg_lexer *lx) {
    xg_token t = {TOK_EOF, "end of file", 0};
    skip_blank(lx);
    t.line = lx->line;
    if (lx->pos >= lx->len) return t;
    const char *s = lx->src + lx->pos;
    unsigned char c = (unsigned char)*s;
    if (isalpha(c) || c == '_') {
        size_t n = 1;
        while (lx->pos + n < lx->len && (isalnum((unsigned char)s[n]) || s[n] == '_'))
            n++;
        t.kind = TOK_IDENT;
        t.text = xg_strdup(s, n);
        lx->pos += n;
        return t;
    }
    if (c == '-' && lx->pos + 1 < lx->len && s[1] == '>') {
        t.kind = TOK_PUNCT;
        t.text = "->";
        lx->pos += 2;
        return t;
    }
    if (strchr("(){},;?", c) && c != '\0') {
        t.kind = TOK_PUNCT;
        t.text = xg_strdup(s, 1);
        lx->pos++;
        return t;
    }
    if (isprint(c)) xg_fatal(t.line, "unexpected character '%c'", c);
    xg_fatal(t.line, "unexpected byte 0x%02x", c);
}
