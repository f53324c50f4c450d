/* Where a training step's time goes, per process: `cinder train` with CINDER_TRAIN_PROFILE=1 in
 * the environment prints, on stderr after each epoch, this rank's wall time and this thread's
 * CPU time (CLOCK_THREAD_CPUTIME_ID) in each phase of its steps. Thread CPU time is what a loaded
 * machine disturbs least: it does not count the time the thread waited for a core, so it shows
 * the work a rank did, where wall time shows when it did it. With --ddp every rank prints its own
 * line, which is how the work that does not shrink with a rank's share of the batch is found
 * (docs/distributed.md: "Where the 2-rank step lost time").
 *
 * The phases are cut by marks: cli_profile_mark(ph) charges the time since the previous mark to
 * ph. Without CINDER_TRAIN_PROFILE every call returns at once. Main thread only. */
#ifndef CINDER_CLI_STEP_PROFILE_H
#define CINDER_CLI_STEP_PROFILE_H

#include "cli/models.h"

typedef enum cli_phase {
    CLI_PHASE_AGREE,    /* --ddp: the ranks agree on whether to stop (a scalar all-reduce) */
    CLI_PHASE_DATA,     /* the next batch: gathering this rank's rows of the shuffled order */
    CLI_PHASE_FORWARD,  /* the forward pass and the loss */
    CLI_PHASE_BACKWARD, /* backward (with --ddp: the gradient hooks' copies and the reductions
                          they start and test), reading the loss */
    CLI_PHASE_SYNC,     /* --ddp: cn_ddp_sync: waiting for the reductions, copying the means */
    CLI_PHASE_LOSS,     /* --ddp: the loss's mean over the ranks */
    CLI_PHASE_OPTIM,    /* the optimizer step, freeing the step's gradients and intermediates */
    CLI_PHASE_OTHER,    /* the loop's own: progress, log, learning-rate schedule */
    CLI_PHASE_EVAL,     /* the evaluation after the epoch */
    CLI_PHASE_COUNT
} cli_phase;

/* Reads CINDER_TRAIN_PROFILE once; 1 when profiling. */
int cli_profile_on(void);

/* Starts a period (an epoch): clears the sums and sets the first mark. */
void cli_profile_begin(void);

/* Charges the time since the previous mark to `phase`. */
void cli_profile_mark(cli_phase phase);

/* With --ddp, before a step's cn_ddp_sync: the gradient reductions that backward started, of
 * `buckets`. */
void cli_profile_buckets(int started, int buckets);

/* Wraps m->sync so that the end of backward is marked (BACKWARD) and the end of the sync (SYNC,
 * or LOSS when the wrapped sync marked SYNC itself) even without --ddp; a no-op when not
 * profiling. */
void cli_profile_wrap_sync(cli_model *m);

/* Prints this rank's sums for epoch `epoch` on stderr, one line. */
void cli_profile_print(int rank, int epoch);

#endif
