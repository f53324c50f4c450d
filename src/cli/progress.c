/* Progress of a training epoch (progress.h): a bar on a terminal, plain lines elsewhere. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <time.h>

#include "cli/progress.h"

#define BAR_WIDTH      24
#define REDRAW_SECONDS 0.1
#define PLAIN_LINES    10 /* a plain line per tenth of the epoch */

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_begin(cli_progress *p, int epoch, int epochs, int64_t total, int tty) {
    *p = (cli_progress){.tty = tty, .epoch = epoch, .epochs = epochs, .total = total};
    p->start = cli_now();
    p->drawn = p->start - REDRAW_SECONDS;
}

double cli_progress_mean_loss(const cli_progress *p) {
    return p->done ? p->loss_sum / (double)p->done : 0.0;
}

/* The time left in the epoch at the current pace, in seconds. */
static double eta_seconds(const cli_progress *p, double elapsed) {
    return p->done ? elapsed / (double)p->done * (double)(p->total - p->done) : 0.0;
}

static void draw_bar(cli_progress *p, double elapsed) {
    int filled = p->total ? (int)(BAR_WIDTH * p->done / p->total) : BAR_WIDTH;
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    bar[BAR_WIDTH] = '\0';
    int eta = (int)(eta_seconds(p, elapsed) + 0.5);
    /* "\033[K" erases what a longer earlier line left to the right */
    printf("\repoch %d/%d [%s] %lld/%lld  loss %.4f  %.0f samples/s  ETA %d:%02d\033[K", p->epoch,
           p->epochs, bar, (long long)p->done, (long long)p->total, cli_progress_mean_loss(p),
           elapsed > 0 ? (double)p->samples / elapsed : 0.0, eta / 60, eta % 60);
    fflush(stdout);
}

static void print_line(cli_progress *p, double elapsed) {
    printf("epoch %d/%d [%3d%%] batch %lld/%lld: loss %.4f, %.0f samples/s, ETA %.0f s\n", p->epoch,
           p->epochs, (int)(100 * p->done / p->total), (long long)p->done, (long long)p->total,
           p->chunk_sum / (double)p->chunk_n, elapsed > 0 ? (double)p->samples / elapsed : 0.0,
           eta_seconds(p, elapsed));
    fflush(stdout);
    p->chunk_sum = 0;
    p->chunk_n = 0;
}

void cli_progress_step(cli_progress *p, double loss, int64_t samples) {
    p->done++;
    p->samples += samples;
    p->loss_sum += loss;
    p->chunk_sum += loss;
    p->chunk_n++;
    double now = cli_now(), elapsed = now - p->start;
    if (p->tty) {
        if (now - p->drawn >= REDRAW_SECONDS || p->done == p->total) {
            draw_bar(p, elapsed);
            p->drawn = now;
        }
        return;
    }
    /* a line whenever done crosses the next tenth of total */
    if (p->done * PLAIN_LINES / p->total > (p->done - 1) * PLAIN_LINES / p->total)
        print_line(p, elapsed);
}

void cli_progress_end(cli_progress *p) {
    if (p->tty) {
        printf("\r\033[K");
        fflush(stdout);
    }
}
