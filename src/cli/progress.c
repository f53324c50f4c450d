/* Progress of a training epoch (progress.h): one line redrawn on a terminal, plain lines
 * elsewhere; both on stderr. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/progress.h"

#define BAR_MAX        24 /* the bar's inner width when there is room */
#define BAR_MIN        5  /* narrower than this, no bar */
#define REDRAW_SECONDS 0.1
#define PLAIN_LINES    10 /* a plain line per tenth of the epoch */
#define DEFAULT_WIDTH  80
#define LINE_MAX       512

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_progress_is_terminal(void) { return isatty(STDERR_FILENO); }

int cli_progress_width(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *env = getenv("COLUMNS");
    if (env && *env) {
        char *end = NULL;
        long c = strtol(env, &end, 10);
        if (*end == '\0' && c >= 1 && c <= 10000) return (int)c;
    }
    return DEFAULT_WIDTH;
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

/* The terminal line in `line` (at most `room` characters, room < LINE_MAX): the first of these
 * forms that fits (progress.h): with samples/s and a bar of BAR_MIN..BAR_MAX, without samples/s
 * with such a bar, without samples/s or bar; else that last one cut at `room`. */
static void compose_line(const cli_progress *p, double elapsed, int room, char *line) {
    int eta = (int)(eta_seconds(p, elapsed) + 0.5);
    double rate = elapsed > 0 ? (double)p->samples / elapsed : 0.0;
    char head[64], counts[64], loss[64], speed[64], left[64];
    snprintf(head, sizeof head, "epoch %d/%d ", p->epoch, p->epochs);
    snprintf(counts, sizeof counts, "%lld/%lld", (long long)p->done, (long long)p->total);
    snprintf(loss, sizeof loss, "  loss %.4f", cli_progress_mean_loss(p));
    snprintf(speed, sizeof speed, "  %.0f samples/s", rate);
    snprintf(left, sizeof left, "  ETA %d:%02d", eta / 60, eta % 60);
    int core = (int)(strlen(head) + strlen(counts) + strlen(loss) + strlen(left));
    for (int with_speed = 1; with_speed >= 0; with_speed--) {
        int rest = core + (with_speed ? (int)strlen(speed) : 0);
        int bar_width = room - rest - 3; /* "[", "]", " " */
        if (bar_width > BAR_MAX) bar_width = BAR_MAX;
        if (bar_width < BAR_MIN) continue;
        char bar[BAR_MAX + 1];
        int filled = p->total ? (int)(bar_width * p->done / p->total) : bar_width;
        for (int i = 0; i < bar_width; i++)
            bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
        bar[bar_width] = '\0';
        snprintf(line, LINE_MAX, "%s[%s] %s%s%s%s", head, bar, counts, loss,
                 with_speed ? speed : "", left);
        return;
    }
    snprintf(line, LINE_MAX, "%s%s%s%s", head, counts, loss, left);
    if ((int)strlen(line) > room) line[room] = '\0';
}

static void draw_line(cli_progress *p, double elapsed) {
    int width = cli_progress_width();
    /* the last column stays empty: a line that fills it wraps on many terminals */
    int room = width - 1 < LINE_MAX - 1 ? width - 1 : LINE_MAX - 1;
    if (room < 1) room = 1;
    char line[LINE_MAX];
    compose_line(p, elapsed, room, line);
    /* "\033[K" erases what a longer earlier line left to the right */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p->shown = 1;
}

static void print_line(cli_progress *p, double elapsed) {
    fprintf(stderr, "epoch %d/%d [%3d%%] batch %lld/%lld: loss %.4f, %.0f samples/s, ETA %.0f s\n",
            p->epoch, p->epochs, (int)(100 * p->done / p->total), (long long)p->done,
            (long long)p->total, p->chunk_sum / (double)p->chunk_n,
            elapsed > 0 ? (double)p->samples / elapsed : 0.0, eta_seconds(p, elapsed));
    fflush(stderr);
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
    if (p->quiet) return;
    if (p->tty) {
        if (now - p->drawn >= REDRAW_SECONDS || p->done == p->total) {
            draw_line(p, elapsed);
            p->drawn = now;
        }
        return;
    }
    /* a line whenever done crosses the next tenth of total */
    if (p->done * PLAIN_LINES / p->total > (p->done - 1) * PLAIN_LINES / p->total)
        print_line(p, elapsed);
}

void cli_progress_end(cli_progress *p) {
    if (p->tty && p->shown) {
        fputc('\n', stderr);
        fflush(stderr);
        p->shown = 0;
    }
}
