/* Training curves as SVG (plot.h), written with fprintf: a title, a loss panel and an accuracy
 * panel sharing the x axis (epochs), each with a frame, grid, ticks, axis labels and a legend. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/plot.h"

int cli_plot_supported(const char *path) {
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash) || dot == path || dot[-1] == '/') return 0;
    return strlen(dot) == 4 && (dot[1] | 32) == 's' && (dot[2] | 32) == 'v' && (dot[3] | 32) == 'g';
}

/* ---- geometry ------------------------------------------------------------------------------- */

#define WIDTH           860
#define HEIGHT          644
#define LEFT            80.0  /* x of both panels' left edge */
#define RIGHT           830.0 /* x of their right edge */
#define LOSS_TOP        74.0
#define LOSS_BOTTOM     324.0
#define ACC_TOP         384.0
#define ACC_BOTTOM      584.0
#define MAX_LOSS_POINTS 200 /* the thin loss line averages batches so it has at most this many */

#define COLOR_BATCH "#9ecae1"
#define COLOR_EPOCH "#08519c"
#define COLOR_ACC   "#d94801"

/* An axis from lo to hi with a tick every `step`. */
typedef struct axis {
    double lo, hi, step;
} axis;

/* 1, 2 or 5 times a power of ten, the smallest not below x > 0. */
static double nice_step(double x) {
    double p = pow(10.0, floor(log10(x)));
    double m = x / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

/* An axis covering [lo, hi] with about five ticks at round values. */
static axis nice_axis(double lo, double hi) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
    }
    double step = nice_step((hi - lo) / 5.0);
    axis a = {floor(lo / step + 1e-9) * step, ceil(hi / step - 1e-9) * step, step};
    return a;
}

typedef struct panel {
    double top, bottom;
    axis x, y;
} panel;

static double px(const panel *p, double x) {
    return LEFT + (x - p->x.lo) / (p->x.hi - p->x.lo) * (RIGHT - LEFT);
}

static double py(const panel *p, double y) {
    return p->bottom - (y - p->y.lo) / (p->y.hi - p->y.lo) * (p->bottom - p->top);
}

/* ---- drawing -------------------------------------------------------------------------------- */

/* s with &, < and > escaped, as SVG text. */
static void put_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else
            fputc(*s, f);
    }
}

/* The frame, grid lines, tick labels and the y axis label; the x label under the lowest panel. */
static void draw_axes(FILE *f, const panel *p, const char *y_label, const char *x_label) {
    fprintf(f, "<g font-size=\"12\" fill=\"#333\">\n");
    for (int i = 0;; i++) {
        double v = p->y.lo + i * p->y.step;
        if (v > p->y.hi + p->y.step * 1e-6) break;
        double y = py(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
                LEFT, y, RIGHT, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LEFT - 6, y + 4,
                fabs(v) < p->y.step * 1e-6 ? 0.0 : v);
    }
    for (int i = 0;; i++) {
        double v = p->x.lo + i * p->x.step;
        if (v > p->x.hi + p->x.step * 1e-6) break;
        double x = px(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
                x, p->top, x, p->bottom);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                p->bottom + 16, v);
    }
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            LEFT, p->top, RIGHT - LEFT, p->bottom - p->top);
    double mid = (p->top + p->bottom) / 2;
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
            "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            LEFT - 50, mid, LEFT - 50, mid, y_label);
    if (x_label)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n",
                (LEFT + RIGHT) / 2, p->bottom + 40, x_label);
    fprintf(f, "</g>\n");
}

/* A legend in one row just above the panel, left-aligned, so that it never hides a curve: one
 * entry per (color, line width, dot, text). */
typedef struct legend_entry {
    const char *color;
    double width; /* line width */
    int dot;      /* draw a dot on the sample line */
    const char *text;
} legend_entry;

static void draw_legend(FILE *f, const panel *p, const legend_entry *entries, int n) {
    double x = LEFT, y = p->top - 10;
    for (int i = 0; i < n; i++) {
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"%.1f\"/>\n",
                x, y, x + 28, y, entries[i].color, entries[i].width);
        if (entries[i].dot)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x + 14, y,
                    entries[i].color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#333\">%s</text>\n", x + 34,
                y + 4, entries[i].text);
        x += 34 + 7.0 * (double)strlen(entries[i].text) + 24; /* about 7 px a character */
    }
}

/* A polyline through (xs[i], ys[i]), skipping points that are not finite. */
static void draw_line(FILE *f, const panel *p, const double *xs, const double *ys, int64_t n,
                      const char *color, double width) {
    fprintf(f,
            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
            "stroke-linejoin=\"round\" points=\"",
            color, width);
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(ys[i])) fprintf(f, "%.1f,%.1f ", px(p, xs[i]), py(p, ys[i]));
    }
    fprintf(f, "\"/>\n");
}

static void draw_dots(FILE *f, const panel *p, const double *xs, const double *ys, int64_t n,
                      const char *color) {
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(ys[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px(p, xs[i]),
                    py(p, ys[i]), color);
    }
}

/* ---- the plot ------------------------------------------------------------------------------- */

/* Largest finite value of v[0, n), or `floor` when larger. */
static double finite_max(const double *v, int64_t n, double floor) {
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(v[i]) && v[i] > floor) floor = v[i];
    }
    return floor;
}

/* The thin loss line: the mean of every `per` batches, at the position of the group's last batch
 * (in epochs). Fills xs, ys (capacity MAX_LOSS_POINTS) and returns the number of points. */
static int64_t batch_loss_points(const cli_curves *c, int64_t per, double *xs, double *ys) {
    int64_t n = 0;
    for (int64_t start = 0; start < c->n_batches && n < MAX_LOSS_POINTS; start += per) {
        int64_t end = start + per < c->n_batches ? start + per : c->n_batches;
        double sum = 0;
        for (int64_t i = start; i < end; i++)
            sum += c->batch_loss[i];
        xs[n] = (double)end / (double)c->batches_per_epoch;
        ys[n++] = sum / (double)(end - start);
    }
    return n;
}

int cli_plot_write(const char *path, const cli_curves *c) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;

    int64_t per = (c->n_batches + MAX_LOSS_POINTS - 1) / MAX_LOSS_POINTS;
    if (per < 1) per = 1;
    double bx[MAX_LOSS_POINTS], by[MAX_LOSS_POINTS];
    int64_t nb = batch_loss_points(c, per, bx, by);
    double ex[1024], acc_min = 1.0, acc_max = 0.0;
    int ne = c->n_epochs < 1024 ? c->n_epochs : 1024;
    for (int e = 0; e < ne; e++) {
        ex[e] = e + 1;
        if (c->accuracy[e] < acc_min) acc_min = c->accuracy[e];
        if (c->accuracy[e] > acc_max) acc_max = c->accuracy[e];
    }
    if (ne == 0) acc_min = 0.0, acc_max = c->metric ? 0.0 : 1.0;

    double epochs = (double)(c->n_epochs > 0 ? c->n_epochs : 1);
    panel loss = {LOSS_TOP, LOSS_BOTTOM, nice_axis(0, epochs), {0, 0, 0}};
    loss.y = nice_axis(0, finite_max(c->epoch_loss, ne, finite_max(by, nb, 0.0)));
    panel acc = {ACC_TOP, ACC_BOTTOM, loss.x, {0, 0, 0}};
    if (c->metric) { /* a loss: from 0, as the loss panel */
        acc.y = nice_axis(0, acc_max > 0 ? acc_max : 1);
    } else {
        double acc_lo = acc_min - 0.02 > 0 ? acc_min - 0.02 : 0, acc_hi = acc_max + 0.02;
        acc.y = nice_axis(acc_lo, acc_hi < 1 ? acc_hi : 1);
    }
    const char *metric = c->metric ? c->metric : "test accuracy";
    char metric_legend[96];
    snprintf(metric_legend, sizeof metric_legend, "%s after each epoch", metric);

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, HEIGHT, WIDTH, HEIGHT);
    fprintf(f, "<text x=\"%d\" y=\"32\" text-anchor=\"middle\" font-size=\"16\" fill=\"#111\">",
            WIDTH / 2);
    put_text(f, c->title);
    fprintf(f, "</text>\n");

    /* loss */
    draw_axes(f, &loss, "training loss (cross-entropy)", NULL);
    draw_line(f, &loss, bx, by, nb, COLOR_BATCH, 1.2);
    draw_line(f, &loss, ex, c->epoch_loss, ne, COLOR_EPOCH, 2.0);
    draw_dots(f, &loss, ex, c->epoch_loss, ne, COLOR_EPOCH);
    char batch_text[64];
    if (per == 1)
        snprintf(batch_text, sizeof batch_text, "loss of each batch");
    else
        snprintf(batch_text, sizeof batch_text, "loss, mean of every %lld batches", (long long)per);
    const legend_entry loss_legend[2] = {{COLOR_BATCH, 1.2, 0, batch_text},
                                         {COLOR_EPOCH, 2.0, 1, "loss, mean of each epoch"}};
    draw_legend(f, &loss, loss_legend, 2);

    /* accuracy */
    draw_axes(f, &acc, metric, "epoch");
    draw_line(f, &acc, ex, c->accuracy, ne, COLOR_ACC, 2.0);
    draw_dots(f, &acc, ex, c->accuracy, ne, COLOR_ACC);
    for (int e = 0; e < ne; e++)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" "
                "fill=\"%s\">%.4f</text>\n",
                px(&acc, ex[e]) - 6, py(&acc, c->accuracy[e]) - 8, COLOR_ACC, c->accuracy[e]);
    const legend_entry acc_legend[1] = {{COLOR_ACC, 2.0, 1, metric_legend}};
    draw_legend(f, &acc, acc_legend, 1);

    fprintf(f, "</svg>\n");
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    return failed ? -1 : 0;
}
