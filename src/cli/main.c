/* The `cinder` program: dispatches to a subcommand from one table.
 *
 *     cinder train                train a model on Fashion-MNIST
 *     cinder eval --load FILE     test accuracy of a saved model
 *     cinder inspect FILE         the tensors of a safetensors file, with their values
 *     cinder explain 3            describe an error code
 *     cinder info                 version, backends, build configuration */
#include <stdio.h>
#include <string.h>

#include "cinder/version.h"
#include "cli/cli.h"

typedef struct cli_command {
    const char *name;
    const char *args;    /* argument synopsis for the usage line */
    const char *summary; /* one line for the command list */
    int (*run)(int argc, char **argv);
    const char *details; /* the options, for `cinder <command> --help`; NULL when none */
} cli_command;

static const char train_details[] =
    "Trains a model on Fashion-MNIST and prints, after each epoch, a line\n"
    "  epoch 1/5: train loss 0.5123, test accuracy 0.8512, epoch time 4.21 s\n"
    "(epoch time: training plus evaluation). On a terminal a progress bar shows the batches,\n"
    "the running loss, samples/s and the time left; otherwise a line per tenth of an epoch.\n"
    "Images are scaled to [0, 1], then normalised with mean 0.2860 and std 0.3530.\n"
    "\n"
    "  --model mlp|cnn        mlp: 784-256-128-10, its hidden layers the fused linear+relu\n"
    "                         extension op; cnn: two 3x3 conv+relu+maxpool blocks (32, 64\n"
    "                         channels), then 3136-128-10 (default mlp)\n"
    "  --epochs N             passes over the training set (default 5)\n"
    "  --batch B              images per step (default 128)\n"
    "  --optimizer sgd|adamw  sgd with momentum 0.9, or adamw with weight decay 0.01\n"
    "                         (default sgd)\n"
    "  --lr X                 learning rate (default 0.1 for sgd, 0.001 for adamw)\n"
    "  --schedule cosine|constant\n"
    "                         cosine: the learning rate falls from --lr to 0 along a cosine\n"
    "                         over the run, step by step (default cosine)\n"
    "  --device cpu|cuda[:N]  where to train (default cpu)\n"
    "  --checkpointing none|balanced\n"
    "                         balanced: recompute memory-bound ops in backward instead of\n"
    "                         keeping their values (default none)\n"
    "  --data DIR             the four Fashion-MNIST files (default\n"
    "                         /usr/share/datasets/fashion-mnist, from `apt-get install\n"
    "                         dataset-fashion-mnist`)\n"
    "  --seed S               initial parameters and shuffling (default 42)\n"
    "  --save FILE            write the parameters as safetensors, for `cinder eval --load`\n"
    "  --plot FILE.svg        write the loss and test accuracy curves as an SVG image\n"
    "  --limit N              train on the first N training images only (for tests)\n"
    "  --test-limit N         evaluate on the first N test images only (for tests)\n";

static const char eval_details[] =
    "Rebuilds the model saved by `cinder train --save FILE` (mlp or cnn, recognised from its\n"
    "parameters) and prints `test accuracy 0.xxxx` on the Fashion-MNIST test set.\n"
    "\n"
    "  --load FILE            the checkpoint (required)\n"
    "  --data DIR             the data set's directory\n"
    "                         (default /usr/share/datasets/fashion-mnist)\n"
    "  --device cpu|cuda[:N]  where to run (default cpu)\n"
    "  --test-limit N         evaluate on the first N test images only\n";

/* One row per subcommand. */
static const cli_command commands[] = {
    {"train",
     "[--model mlp|cnn] [--epochs N] [--batch B] [--lr X] [--optimizer sgd|adamw] "
     "[--device cpu|cuda] [--checkpointing balanced] [--data DIR] [--save FILE] [--seed S] "
     "[--plot FILE.svg] [--limit N] [--test-limit N]",
     "train a model on Fashion-MNIST", cli_train, train_details},
    {"eval", "--load FILE [--data DIR] [--device cpu|cuda] [--test-limit N]",
     "print the test accuracy of a model saved by `cinder train --save`", cli_eval, eval_details},
    {"inspect", "FILE [--name NAME]",
     "show the tensors of a safetensors file: names, shapes, dtypes and values", cli_inspect,
     "Prints, for each tensor of the file in its order, `name: [shape] dtype`, then its values\n"
     "as PyTorch's repr writes them (more than 1000 elements: the first and last 3 of each\n"
     "long dim, with ...).\n"
     "\n"
     "  --name NAME            show only the tensor called NAME\n"},
    {"explain", "<code | name | slug | message text> | --json [query] | --list",
     "describe an error: what it means, how to fix it", cli_explain, NULL},
    {"info", "", "print the version, the backends and the build configuration", cli_info, NULL},
};

#define N_COMMANDS (sizeof commands / sizeof *commands)

static void print_usage(FILE *f) {
    fprintf(f, "usage: cinder <command> [arguments]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexample: cinder train --epochs 3 --plot curves.svg --save mlp.safetensors\n"
               "\n`cinder <command> --help` shows a command's arguments; "
               "`cinder --version` the version.\n");
}

static void print_command_usage(FILE *f, const cli_command *c) {
    fprintf(f, "usage: cinder %s%s%s\n  %s\n", c->name, c->args[0] ? " " : "", c->args, c->summary);
    if (c->details) fprintf(f, "\n%s", c->details);
}

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    }
    return NULL;
}

static int is_help(const char *arg) {
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (is_help(name)) {
        const cli_command *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (c)
            print_command_usage(stdout, c);
        else
            print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("cinder %s\n", cn_version());
        return CLI_EXIT_OK;
    }
    const cli_command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "cinder: unknown command '%s'\n\n", name);
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        print_command_usage(stdout, c);
        return CLI_EXIT_OK;
    }
    return c->run(argc - 1, argv + 1);
}
