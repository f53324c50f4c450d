/* The `cinder` program: dispatches to a subcommand from one table.
 *
 *     cinder train                train a model on Fashion-MNIST (or a GPT on a text)
 *     cinder generate --load FILE sample text from a GPT that `cinder train --model gpt` saved
 *     cinder eval --load FILE     test accuracy of a saved model
 *     cinder quantize --load FILE --scheme S --out FILE
 *                                 the model with its weights quantized, for eval
 *     cinder inspect FILE         the tensors of a safetensors file, with their values
 *     cinder explain 3            describe an error code
 *     cinder info                 version, backends, build configuration
 *
 * `cinder <command> --help` prints the command's row: its options, then the environment
 * variables and exit statuses every command shares, then its examples. Every option a command's
 * parser accepts must be listed in its `options` text: cli_option and cli_flag (options.c) refuse
 * one that is not, so an undocumented option fails the first test that reaches it. */
#include <stdio.h>
#include <string.h>

#include "cinder/version.h"
#include "cli/cli.h"

typedef struct cli_command {
    const char *name;
    const char *args;    /* argument synopsis for the usage line */
    const char *summary; /* one line for the command list */
    int (*run)(int argc, char **argv);
    const char *options;  /* what it does and its options, for `cinder <command> --help` */
    const char *examples; /* example command lines, one per line */
} cli_command;

static const char train_options[] =
    "Trains a model on Fashion-MNIST, or (--model gpt) a character-level GPT on a text. It\n"
    "prints the run (model, device, CPU threads, data,\n"
    "optimizer), a summary of the model (each layer's parameters, the total count and bytes),\n"
    "then after each epoch a line\n"
    "  epoch 1/5: train loss 0.5123, test accuracy 0.8512, epoch time 4.21 s\n"
    "(epoch time: training plus evaluation). These go to stdout. Progress goes to stderr: on a\n"
    "terminal one line redrawn in place, as wide as the terminal (the batches, the running\n"
    "loss, samples/s and the time left); otherwise (a pipe, a file) a line per tenth of an\n"
    "epoch. Images are scaled to [0, 1], then normalised with mean 0.2860 and std 0.3530.\n"
    "\n"
    "  --model mlp|cnn|gpt    mlp: 784-256-128-10, its hidden layers the fused linear+relu\n"
    "                         extension op; cnn: two 3x3 conv+relu+maxpool blocks (32, 64\n"
    "                         channels), then 3136-128-10; gpt: nanoGPT's GPT over the bytes\n"
    "                         of a text (see below) (default mlp)\n"
    "  --epochs N             passes over the training set (default 5)\n"
    "  --batch B              images per step (default 128)\n"
    "  --optimizer sgd|adamw  sgd with momentum 0.9, or adamw with weight decay 0.01\n"
    "                         (default sgd)\n"
    "  --lr X                 learning rate (default 0.1 for sgd, 0.001 for adamw)\n"
    "  --schedule cosine|constant\n"
    "                         cosine: the learning rate falls from --lr to 0 along a cosine\n"
    "                         over the run, step by step (default cosine)\n"
    "  --device cpu|cuda[:N]  where to train (default $CINDER_DEVICE, else cpu)\n"
    "  --threads N            CPU threads, the main one included, 1 to 256 (default\n"
    "                         $OMP_NUM_THREADS, else the number of cores)\n"
    "  --checkpointing none|balanced\n"
    "                         balanced: recompute memory-bound ops in backward instead of\n"
    "                         keeping their values (default none)\n"
    "  --data DIR             the four Fashion-MNIST files (default\n"
    "                         /usr/share/datasets/fashion-mnist, from `apt-get install\n"
    "                         dataset-fashion-mnist`)\n"
    "  --seed S               initial parameters and shuffling (default 42)\n"
    "  --save FILE            write the parameters as safetensors, for `cinder eval --load`\n"
    "  --plot FILE.svg        write the loss and test accuracy curves as an SVG image (the\n"
    "                         only format: another extension is refused before training)\n"
    "  --log FILE             write the run as JSON Lines, one object per line, flushed line\n"
    "                         by line (`tail -f`, `jq`, pandas.read_json(lines=True)):\n"
    "                           {\"event\":\"start\", model, device, threads, optimizer, lr,\n"
    "                            batch, epochs, steps_per_epoch, train_images, test_images,\n"
    "                            parameters, parameter_bytes, seed}\n"
    "                           {\"event\":\"step\", epoch, step (in the epoch), global_step,\n"
    "                            loss (that batch's), lr (used for that step),\n"
    "                            samples_per_s (over the epoch so far), elapsed_s}\n"
    "                           {\"event\":\"epoch\", epoch, train_loss, test_accuracy, lr,\n"
    "                            epoch_time_s, elapsed_s}\n"
    "                         a step line for every step; elapsed_s counts from the start of\n"
    "                         training; a number that is not finite is written null. The\n"
    "                         file is replaced (appended to by --resume, after a new start\n"
    "                         line), and opened before training starts\n"
    "  --resume FILE          continue the run that an interrupted `cinder train` saved in\n"
    "                         FILE (its settings come from the file; ones given again must\n"
    "                         agree)\n"
    "  --stop-after-steps N   stop after N steps as an interrupt does, saving the run to\n"
    "                         resume (for tests)\n"
    "  --ddp                  data-parallel over the ranks of an MPI launch (`mpirun -np N\n"
    "                         cinder train --ddp ...`): rank 0's initial parameters go to\n"
    "                         every rank, each trains on its share of every batch of B (B\n"
    "                         must be a multiple of N), gradients and losses are averaged\n"
    "                         over the ranks (MPI on the CPU, NCCL on CUDA), and rank 0\n"
    "                         alone prints and writes --save, --plot and --log; an\n"
    "                         interrupt (of any rank) stops every rank before the same step\n"
    "                         and rank 0 saves the run, which the same launch (as many\n"
    "                         ranks) with --resume FILE continues; with\n"
    "                         CINDER_TRAIN_PROFILE=1 in the environment each rank (or the\n"
    "                         one process) prints on stderr, after each epoch, its wall and\n"
    "                         thread CPU time in each phase of its steps\n"
    "  --limit N              train on the first N training images only (for tests)\n"
    "  --test-limit N         evaluate on the first N test images only (for tests)\n"
    "\n"
    "--model gpt trains a character-level GPT (nanoGPT's model.py: pre-LayerNorm blocks, causal\n"
    "attention, 4x GELU MLP, lm_head tied to the token embedding) on the bytes of a text: the\n"
    "first 90% trains, the last 10% gives the validation loss that each epoch line prints\n"
    "instead of the test accuracy (\"epoch 1/10: train loss 2.43, val loss 2.30, ...\"). An epoch\n"
    "is (training tokens) / (batch x block) steps, each of `--batch` windows at random offsets.\n"
    "Defaults for the gpt: --optimizer adamw (betas 0.9, 0.95, weight decay 0.1 on the weight\n"
    "matrices only, as nanoGPT's configure_optimizers), --lr 0.001, --batch 32, --epochs 10.\n"
    "The checkpoint's keys are nanoGPT's state_dict's, and its metadata keeps the vocabulary\n"
    "and the sizes for `cinder generate`. For the gpt:\n"
    "  --data FILE            the text (default /usr/share/games/fortunes/science, the science\n"
    "                         fortunes of the Debian package fortunes, 130 KB, 93 characters)\n"
    "  --limit N              use the first N bytes of the text only (for tests)\n"
    "  --block N              the context length, block_size (default 64)\n"
    "  --layers N             transformer blocks, n_layer (default 4)\n"
    "  --heads N              attention heads, n_head (default 4)\n"
    "  --embd N               the width, n_embd, a multiple of --heads (default 128)\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM stops after the current step, writes the run to --save FILE\n"
    "(else cinder-interrupted.safetensors), prints the command that resumes it, and exits with\n"
    "128 + the signal's number (130, 143); a second signal exits at once, saving nothing.\n";

static const char generate_options[] =
    "Samples text from a GPT that `cinder train --model gpt --save FILE` wrote (or the training\n"
    "state of an interrupted run): it prints the prompt, then each token as it is drawn from\n"
    "the logits of the last position (the context cropped to the model's block), with a seeded\n"
    "generator, so the same seed gives the same text.\n"
    "\n"
    "  --load FILE            the checkpoint (required)\n"
    "  --prompt TEXT          the start; only characters of the training text (default a\n"
    "                         newline)\n"
    "  --tokens N             characters to generate (default 200)\n"
    "  --temperature T        divides the logits; 0 takes the most likely token (default 1)\n"
    "  --top-k K              draw among the K most likely only (default 0: all)\n"
    "  --top-p P              then among the most likely whose probability reaches P (nucleus\n"
    "                         sampling; default 1: all)\n"
    "  --seed S               the generator's seed (default 42)\n"
    "  --device cpu|cuda[:N]  where to run (default $CINDER_DEVICE, else cpu)\n"
    "  --threads N            CPU threads, the main one included, 1 to 256 (default\n"
    "                         $OMP_NUM_THREADS, else the number of cores)\n";

static const char eval_options[] =
    "Rebuilds the model saved by `cinder train --save FILE` (mlp or cnn, recognised from its\n"
    "parameters) and prints `test accuracy 0.8391 (8391 correct)` on the Fashion-MNIST test\n"
    "set. The keys are those of the state_dict of the equivalent PyTorch nn.Sequential, so a\n"
    "checkpoint that PyTorch saved with safetensors.torch.save_file loads too\n"
    "(docs/pytorch.md). A checkpoint that `cinder quantize` wrote runs with its quantized\n"
    "weights (cn_quant_linear), and the first line names their scheme.\n"
    "\n"
    "  --load FILE            the checkpoint (required)\n"
    "  --data DIR             the data set's directory\n"
    "                         (default /usr/share/datasets/fashion-mnist)\n"
    "  --device cpu|cuda[:N]  where to run (default $CINDER_DEVICE, else cpu)\n"
    "  --threads N            CPU threads, the main one included, 1 to 256 (default\n"
    "                         $OMP_NUM_THREADS, else the number of cores)\n"
    "  --test-limit N         evaluate on the first N test images only\n";

static const char quantize_options[] =
    "Writes the model that `cinder train --save FILE` saved (mlp or cnn) with every weight\n"
    "quantized, for `cinder eval --load` to run with the quantized linear (cn_quant_linear):\n"
    "each weight is stored as the [out, fan-in] matrix its layer multiplies by (a conv's\n"
    "[out, C * kh * kw], run over its 3x3 patches), padded with zero columns to a multiple of\n"
    "32 for the block schemes; the biases stay f32. It prints each tensor with its bytes\n"
    "before and after, the total, and the sizes of both files. The file is safetensors:\n"
    "each quantized weight as its values (U8) and '<name>.__qscales', the scheme in the\n"
    "metadata (include/cinder/io.h).\n"
    "\n"
    "  --load FILE            the f32 checkpoint (required)\n"
    "  --scheme q8_block|q8_channel|q4_block\n"
    "                         q8_block: int8, one f16 scale per block of 32 (ggml's Q8_0,\n"
    "                         about 3.8x smaller); q8_channel: int8, one f32 scale per\n"
    "                         output (about 4x); q4_block: 4-bit, one f16 scale per block\n"
    "                         of 32 (ggml's Q4_0, about 7x) (required)\n"
    "  --out FILE             where to write the quantized checkpoint (required; not the\n"
    "                         --load file)\n";

static const char inspect_options[] =
    "Prints, for each tensor of the file in its order, `name: [shape] dtype`, then its values\n"
    "as PyTorch's repr writes them (more than 1000 elements: the first and last 3 of each\n"
    "long dim, with ...). Any safetensors file works, not only cinder's.\n"
    "\n"
    "  FILE                   the safetensors file (required)\n"
    "  --name NAME            show only the tensor called NAME\n";

static const char explain_options[] =
    "Describes an error of cinder's catalogue: what it means, what raises it, how to fix it,\n"
    "an example fix. The query is a code number (3), a name (CN_ERR_SHAPE), a slug\n"
    "(incompatible-shapes) or a message cinder printed (quoted or not).\n"
    "\n"
    "  --json                 JSON: with a query, its entry as an object; without, every\n"
    "                         entry as an array (fields: slug, errorCode, messagePattern,\n"
    "                         documentation, triggerScenarios, commonSituations, solutions,\n"
    "                         exampleFix, preventionTips)\n"
    "  --list                 one line per error code: number, name, slug, summary\n"
    "  --                     what follows is the query, even if it starts with --\n";

static const char info_options[] =
    "Prints the version, the build configuration, the CPU threads, and each backend: its\n"
    "registry id, its devices, the module it was loaded from, or why it is not usable (for a\n"
    "module that was not found, every place looked at).\n"
    "\n"
    "  --json                 the same as one JSON object:\n"
    "                         {\"version\", \"headers_version\", \"build\", \"cpu_threads\",\n"
    "                          \"backends\": [{\"name\", \"found\", \"id\" (null when not found),\n"
    "                          \"devices\", \"module\" (null when built in), \"why\" (null when\n"
    "                          there is nothing to say)}]}\n";

/* What every command reads from its environment, and how it exits. */
static const char environment[] =
    "environment:\n"
    "  CINDER_DEVICE          the default of --device (cpu, cuda, cuda:1)\n"
    "  CINDER_BACKEND_PATH    directories (separated by ':') searched first for backend\n"
    "                         modules such as libcinder_cuda.so\n"
    "  OMP_NUM_THREADS        CPU threads when --threads is not given (default: the cores)\n"
    "  COLUMNS                the width of the progress line when the terminal does not say\n"
    "\n"
    "exit status: 0 done; 1 the work failed (a file, the data, a device, the training);\n"
    "2 the command line was not understood (the message says which argument).\n";

/* One row per subcommand. */
static const cli_command commands[] = {
    {"train",
     "[--model mlp|cnn|gpt] [--epochs N] [--batch B] [--lr X] [--optimizer sgd|adamw] "
     "[--schedule cosine|constant] [--device cpu|cuda] [--threads N] "
     "[--checkpointing none|balanced] [--data DIR] [--save FILE] [--seed S] [--plot FILE.svg] "
     "[--log FILE] [--resume FILE] [--stop-after-steps N] [--limit N] [--test-limit N] [--ddp] "
     "[--block N] [--layers N] [--heads N] [--embd N]",
     "train a model on Fashion-MNIST, or a GPT on a text", cli_train, train_options,
     "cinder train --epochs 3 --save mlp.safetensors --plot curves.svg --log run.jsonl\n"
     "cinder train --model cnn --optimizer adamw --device cuda\n"
     "cinder train --threads 4 --log run.jsonl 2>/dev/null   # epoch lines only\n"
     "cinder train --model gpt --data input.txt --epochs 20 --save gpt.safetensors\n"
     "mpirun -np 2 cinder train --ddp --threads 1 --batch 128 --save mlp.safetensors\n"
     "jq -r 'select(.event==\"epoch\") | [.epoch, .test_accuracy] | @tsv' run.jsonl\n"},
    {"generate",
     "--load FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P] "
     "[--seed S] [--device cpu|cuda] [--threads N]",
     "sample text from a GPT saved by `cinder train --model gpt`", cli_generate,
     generate_options,
     "cinder generate --load gpt.safetensors --prompt 'The ' --tokens 300 --top-k 10\n"},
    {"eval", "--load FILE [--data DIR] [--device cpu|cuda] [--threads N] [--test-limit N]",
     "print the test accuracy of a model saved by `cinder train --save`", cli_eval, eval_options,
     "cinder eval --load mlp.safetensors\n"
     "cinder eval --load mlp-q4.safetensors --threads 4\n"},
    {"quantize", "--load FILE --scheme q8_block|q8_channel|q4_block --out FILE",
     "write a saved model with its weights quantized to int8 or 4 bits", cli_quantize,
     quantize_options,
     "cinder quantize --load mlp.safetensors --scheme q4_block --out mlp-q4.safetensors\n"
     "cinder eval --load mlp-q4.safetensors\n"},
    {"inspect", "FILE [--name NAME]",
     "show the tensors of a safetensors file: names, shapes, dtypes and values", cli_inspect,
     inspect_options, "cinder inspect mlp.safetensors --name 0.weight\n"},
    {"explain", "<code | name | slug | message text> | --json [query] | --list",
     "describe an error: what it means, how to fix it", cli_explain, explain_options,
     "cinder explain 3\n"
     "cinder explain CN_ERR_SHAPE\n"
     "cinder explain \"add: incompatible shapes: [2, 3] and [4]\"\n"
     "cinder explain --json incompatible-shapes\n"},
    {"info", "[--json]", "print the version, the backends and the build configuration", cli_info,
     info_options, "cinder info --json | jq '.backends[] | {name, devices}'\n"},
};

#define N_COMMANDS (sizeof commands / sizeof *commands)

static void print_examples(FILE *f, const char *examples) {
    fprintf(f, "\nexamples:\n");
    for (const char *p = examples; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(f, "  %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: cinder <command> [arguments]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n  --help, -h             this text; `cinder <command> --help` (or `cinder help\n"
            "                         <command>`) shows a command's options\n"
            "  --version              the version\n\n%s",
            environment);
    print_examples(f, "cinder train --epochs 3 --plot curves.svg --save mlp.safetensors\n"
                      "cinder eval --load mlp.safetensors\n"
                      "cinder quantize --load mlp.safetensors --scheme q8_block --out "
                      "mlp-q8.safetensors\n"
                      "cinder train --help\n");
}

/* "usage: cinder <name> <args>", the args wrapped at USAGE_COLUMNS between bracketed groups
 * and words, continuation lines aligned under the first argument. */
#define USAGE_COLUMNS 100

static void print_synopsis(FILE *f, const cli_command *c) {
    int indent = fprintf(f, "usage: cinder %s", c->name), col = indent;
    for (const char *p = c->args; *p;) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const char *end = p;
        int depth = 0;
        while (*end && (depth > 0 || *end != ' ')) {
            depth += *end == '[' ? 1 : *end == ']' ? -1 : 0;
            end++;
        }
        int len = (int)(end - p);
        if (col > indent && col + 1 + len > USAGE_COLUMNS)
            col = fprintf(f, "\n%*s", indent, "") - 1;
        col += fprintf(f, " %.*s", len, p);
        p = end;
    }
    fputc('\n', f);
}

static void print_command_usage(FILE *f, const cli_command *c) {
    print_synopsis(f, c);
    fprintf(f, "  %s\n", c->summary);
    fprintf(f, "\n%s  --help, -h             this text\n\n%s", c->options, environment);
    print_examples(f, c->examples);
}

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    }
    return NULL;
}

const char *cli_command_help(const char *name) {
    const cli_command *c = find_command(name);
    return c ? c->options : NULL;
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
        if (argc > 2 && !c) {
            fprintf(stderr, "cinder: no help for '%s': it is not a command\n\n", argv[2]);
            print_usage(stderr);
            return CLI_EXIT_USAGE;
        }
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
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_command_usage(stdout, c);
            return CLI_EXIT_OK;
        }
    }
    return c->run(argc - 1, argv + 1);
}
