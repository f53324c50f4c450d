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

/* Ends the job: with rc 0 leaves the group (cn_dist_finalize); otherwise this rank failed, and
 * the whole job is stopped (cn_dist_abort) so that the other ranks do not wait for it. Frees
 * what cli_ddp_attach made. Returns rc. */
int cli_ddp_end(cli_model *m, int rc);

#endif
