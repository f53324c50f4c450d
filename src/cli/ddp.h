/* `cinder train --ddp`: data-parallel training over the ranks of an MPI launch, through the
 * distributed layer (cinder/distributed.h). Built when that layer is (MPI found); otherwise
 * cli_ddp_begin says so and the run stops. */
#ifndef CINDER_CLI_DDP_H
#define CINDER_CLI_DDP_H

#include "cinder/cinder.h"
#include "cli/models.h"

/* Joins the job (the engine of *inner: MPI for the CPU, NCCL for CUDA) and sets *rank and
 * *world; on CUDA *inner becomes this rank's GPU (local rank mod the node's GPUs). 0, or -1
 * (printed on stderr). */
int cli_ddp_begin(cn_device *inner, int *rank, int *world);

/* Keeps m's replicas in step: broadcasts rank 0's parameters and sets m->sync to average the
 * gradients (bucketed, during backward) and the loss over the ranks. 0, or -1 (printed). */
int cli_ddp_attach(cli_model *m);

/* --ddp with interrupts and --resume: the ranks stop at the same step and resume from the same
 * file. cli_ddp_stop_signal: the first signal any rank received (the largest signal number when
 * several did; 0: none), agreed before each step so that every rank stops before the same one;
 * -1 when the ranks cannot agree (printed). cli_ddp_same_file: 0 when every rank read the same
 * bytes at `path` (a hash of the file compared over the ranks), else -1 on every rank (printed:
 * a rank that read another checkpoint would train on other parameters and optimizer state). */
int cli_ddp_stop_signal(int sig);
int cli_ddp_same_file(const char *path);

/* The accuracy of m on images/labels (models.h: cli_model_accuracy) with the evaluation shared
 * out: rank r evaluates the r-th of world near-equal row ranges and the counts of correct
 * predictions are summed over the ranks, so every rank gets the accuracy of the whole set (the
 * same number as one process's) for 1/world of the work. -1 with the error set on failure (a
 * failure on any rank fails it on all). */
double cli_ddp_accuracy(cli_model *m, cn_tensor *images, cn_tensor *labels, int64_t batch);

/* Ends the job: with rc 0, or the 128 + signal of a stop all the ranks agreed on
 * (cli_ddp_stop_signal), leaves the group (cn_dist_finalize); otherwise this rank failed, and
 * the whole job is stopped (cn_dist_abort) so that the other ranks do not wait for it. Frees
 * what cli_ddp_attach made. Returns rc. */
int cli_ddp_end(cli_model *m, int rc);

#endif
