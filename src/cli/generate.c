/* `cinder generate --load FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
 * [--top-p P] [--seed S] [--device D] [--threads N]`: samples text from a GPT that `cinder train
 * --model gpt` saved (its --save, or the training state of an interrupted run). The checkpoint's
 * metadata gives the sizes and the vocabulary (train_gpt.c, text.h); the model runs on a concrete
 * device in evaluation mode without gradients. Each new token is drawn with cn_sample_logits
 * from the logits of the last position, the context cropped to its last `block` tokens as
 * nanoGPT's generate does, with a seeded generator: the same seed gives the same text. The
 * prompt, then each token as it is drawn, goes to stdout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/cinder.h"
#include "cli/cli.h"
#include "cli/text.h"

#define CMD "generate"

typedef struct generate_options {
    const char *load, *prompt, *device;
    int64_t tokens, top_k, seed;
    double temperature, top_p;
} generate_options;

static int parse_options(int argc, char **argv, generate_options *o) {
    *o = (generate_options){.tokens = 200, .temperature = 1.0, .top_p = 1.0, .seed = 42};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r, bad = 0;
        if ((r = cli_option(argc, argv, &i, CMD, "--load", &v)) != 0)
            o->load = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--prompt", &v)) != 0)
            o->prompt = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--tokens", &v)) != 0)
            bad = r > 0 && cli_parse_int(CMD, "--tokens", v, 0, 1000000, &o->tokens);
        else if ((r = cli_option(argc, argv, &i, CMD, "--temperature", &v)) != 0)
            bad = r > 0 && cli_parse_real(CMD, "--temperature", v, 0, 100, &o->temperature);
        else if ((r = cli_option(argc, argv, &i, CMD, "--top-k", &v)) != 0)
            bad = r > 0 && cli_parse_int(CMD, "--top-k", v, 0, 1000000, &o->top_k);
        else if ((r = cli_option(argc, argv, &i, CMD, "--top-p", &v)) != 0)
            bad = r > 0 && cli_parse_real(CMD, "--top-p", v, 1e-9, 1, &o->top_p);
        else if ((r = cli_option(argc, argv, &i, CMD, "--seed", &v)) != 0)
            bad = r > 0 && cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &o->seed);
        else if ((r = cli_option(argc, argv, &i, CMD, "--device", &v)) != 0)
            o->device = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--threads", &v)) != 0)
            bad = r > 0 && cli_parse_threads(CMD, v);
        else {
            fprintf(stderr,
                    "cinder generate: unknown argument '%s' (see `cinder generate "
                    "--help`)\n",
                    argv[i]);
            bad = 1;
        }
        if (r < 0 || bad) return CLI_EXIT_USAGE;
    }
    if (!o->load) {
        fprintf(stderr, "cinder generate: --load FILE is required: a checkpoint that `cinder "
                        "train --model gpt --save FILE` wrote\n");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The metadata `key` of h as a whole number >= 1; 0, or -1 (printed). */
static int meta_size(const cn_safetensors *h, const char *path, const char *key, int64_t *out) {
    const char *v = cn_safetensors_metadata(h, key);
    char *end = NULL;
    errno = 0;
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || n < 1) {
        fprintf(stderr,
                "cinder generate: %s: its metadata '%s' is %s%s%s; it is not a checkpoint "
                "of `cinder train --model gpt`\n",
                path, key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
        return -1;
    }
    *out = n;
    return 0;
}

/* Builds the checkpoint's GPT on `device` and reads its vocabulary; 0, or -1 (printed). */
static int load_gpt(const char *path, cn_device device, cn_module **gpt, cli_vocab *vocab,
                    int64_t *block) {
    cn_safetensors *h = NULL;
    if (cn_safetensors_load(path, device, &h) != CN_OK) {
        fprintf(stderr, "cinder generate: cannot load %s: %s\n", path, cn_last_error());
        return -1;
    }
    const char *model = cn_safetensors_metadata(h, "model");
    const char *hex = cn_safetensors_metadata(h, "vocab");
    cn_gpt_config cfg = {.bias = 1};
    int rc = 0;
    if (!model || strcmp(model, "gpt") != 0 || !hex || cli_vocab_from_hex(hex, vocab) != 0) {
        fprintf(stderr,
                "cinder generate: %s is not a checkpoint of `cinder train --model gpt` "
                "(its metadata has %s); sample from a file that `cinder train --model gpt "
                "--save FILE` wrote\n",
                path,
                !model                      ? "no 'model'"
                : strcmp(model, "gpt") != 0 ? "another 'model'"
                                            : "no valid 'vocab'");
        rc = -1;
    }
    if (rc == 0 && (meta_size(h, path, "block", &cfg.block_size) != 0 ||
                    meta_size(h, path, "layers", &cfg.n_layer) != 0 ||
                    meta_size(h, path, "heads", &cfg.n_head) != 0 ||
                    meta_size(h, path, "embd", &cfg.n_embd) != 0))
        rc = -1;
    cfg.vocab_size = vocab->size;
    cn_generator unused = cn_generator_new(0); /* every value is overwritten */
    if (rc == 0 &&
        (!(*gpt = cn_gpt_new(&cfg, device, CN_F32, &unused)) || cn_gpt_load(*gpt, h) != CN_OK)) {
        fprintf(stderr, "cinder generate: cannot load the gpt from %s: %s\n", path,
                cn_last_error());
        rc = -1;
    }
    *block = cfg.block_size;
    cn_safetensors_free(h);
    return rc;
}

/* The prompt as tokens into ids (room for strlen(prompt)); its length, or -1 (printed) when a
 * character is outside the vocabulary. */
static int64_t encode(const char *prompt, const cli_vocab *v, int64_t *ids) {
    int64_t n = 0;
    for (const unsigned char *c = (const unsigned char *)prompt; *c; c++, n++) {
        if (v->token[*c] < 0) {
            fprintf(stderr,
                    "cinder generate: the prompt's character %lld (byte 0x%02x '%c') is "
                    "not in the model's vocabulary of %d characters, which the training text "
                    "had; use only characters of that text\n",
                    (long long)n + 1, *c, *c >= 32 && *c < 127 ? *c : '?', v->size);
            return -1;
        }
        ids[n] = v->token[*c];
    }
    return n;
}

int cli_generate(int argc, char **argv) {
    generate_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cn_device device;
    if (cli_parse_device(CMD, o.device, &device) != 0) return CLI_EXIT_FAILURE;
    cn_module *gpt = NULL;
    cli_vocab vocab;
    int64_t block = 0;
    if (load_gpt(o.load, device, &gpt, &vocab, &block) != 0) {
        cn_module_free(gpt);
        return CLI_EXIT_FAILURE;
    }
    /* no prompt: a newline (nanoGPT's default start) when the text had one, else token 0 */
    const char *prompt = o.prompt;
    char first[2] = {(char)vocab.bytes[0], '\0'};
    if (!prompt || !*prompt) prompt = vocab.token['\n'] >= 0 ? "\n" : first;
    size_t plen = strlen(prompt);
    int64_t *ids = malloc(sizeof *ids * (plen + (size_t)o.tokens + 1));
    int64_t n = ids ? encode(prompt, &vocab, ids) : -1;
    if (!ids) fprintf(stderr, "cinder generate: no memory for %lld tokens\n", (long long)o.tokens);
    rc = n < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
    if (rc == CLI_EXIT_OK) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    cn_generator gen = cn_generator_new((uint64_t)o.seed);
    cn_module_train(gpt, 0);
    cn_no_grad_begin();
    for (int64_t k = 0; k < o.tokens && rc == CLI_EXIT_OK; k++) {
        if (cn_scope_begin() != CN_OK) {
            rc = CLI_EXIT_FAILURE;
            break;
        }
        int64_t from = n > block ? n - block : 0; /* the last block_size tokens */
        const int64_t shape[2] = {1, n - from};
        cn_tensor *logits = cn_module_forward(
            gpt, cn_from_data(ids + from, shape, 2, CN_I64, device)); /* [1, T, V] */
        cn_tensor *tail = cn_slice(logits, 1, -1, n - from, 1);       /* [1, 1, V] */
        const int64_t rows[2] = {1, vocab.size};
        cn_tensor *next = cn_sample_logits(cn_reshape(tail, rows, 2), o.temperature, o.top_k,
                                           o.top_p, &gen); /* [1] */
        int64_t id = -1;
        if (!next || cn_read(next, &id, sizeof id) != CN_OK || id < 0 || id >= vocab.size) {
            fprintf(stderr, "\ncinder generate: sampling token %lld failed: %s\n", (long long)k + 1,
                    cn_last_error());
            rc = CLI_EXIT_FAILURE;
        } else {
            ids[n++] = id;
            fputc(vocab.bytes[id], stdout);
            fflush(stdout);
        }
        cn_scope_end();
    }
    cn_no_grad_end();
    if (rc == CLI_EXIT_OK) {
        fputc('\n', stdout);
        if (fflush(stdout) != 0) rc = CLI_EXIT_FAILURE;
    }
    free(ids);
    cn_module_free(gpt);
    return rc;
}
