/*
 * health.h — did a training run train? The verdict a record's `health`
 * object carries (results/SCHEMA.md §health), from the run's per-step
 * training loss, pre-clip gradient norm and forward-solve converged flags.
 *
 * Rules (each constant below is the documented threshold):
 * - A step i (0-based) is a *spike* when its loss or gradient norm is not
 *   finite; or, from i = 1 (step 2) on, when its loss exceeds the lowest
 *   loss of the steps before it (the running minimum) by more than
 *   HEALTH_LOSS_MARGIN nats; or, from i = HEALTH_WINDOW_MIN on, when its
 *   gradient norm exceeds HEALTH_SPIKE_FACTOR times the median of the
 *   norms of the previous min(i, HEALTH_WINDOW) steps. The norms of the
 *   first steps move fast from the initialisation, so the norm rule waits
 *   for a window of them; a loss far above one already reached is wrong
 *   from the second step on.
 * - loss_final is the mean loss of the last w = clamp(n/10, 1, 50) steps;
 *   loss_min the lowest mean of w consecutive steps.
 * - verdict: "diverged" when the run stopped as diverged; else "unstable"
 *   when more than HEALTH_SPIKE_SHARE of the steps are spikes, or
 *   loss_final exceeds loss_min by more than HEALTH_LOSS_MARGIN nats
 *   (training went backwards and stayed there), or loss_final exceeds the
 *   first step's loss by more than HEALTH_REGRESS_MARGIN nats (the run
 *   left the model worse than its initialisation); else "healthy".
 * - unconverged (DEQ runs only): the forward or the backward solve
 *   reached its tolerance in less than HEALTH_MIN_CONVERGED of the steps,
 *   overall or in the last 10% of them (at least one step).
 * - Trends, on runs of at least HEALTH_TREND_STEPS steps, over deciles d =
 *   n/10 steps (the first decile left out: norms fall fast from the
 *   initialisation): norm_growth, the median norm of the last decile over
 *   that of the second; norm_peak, the largest norm after the first decile
 *   over their median; clip_share_early and clip_share_last, the share of
 *   the second and of the last decile's steps whose norm exceeds `clip`
 *   (> 0). norm_growth above HEALTH_GROWTH_MAX ("norm growth"), norm_peak
 *   above HEALTH_PEAK_MAX ("norm peak") and a run that became clip-bound,
 *   clip_share_last above HEALTH_CLIP_SHARE_MAX and at least that much
 *   above clip_share_early ("clip-bound"; a small model whose norm sits
 *   above the clip from the start is not), are flags that make it unstable;
 *   so does loss_final above loss_min by more than HEALTH_SMOOTH_MARGIN
 *   ("loss regression": on such runs w >= 10 steps smooth the batch noise
 *   the 1-nat margin of short runs allows for).
 * - nonfinite_solves: forward and backward solves a non-finite residual
 *   ended; more than HEALTH_SPIKE_SHARE of the solves is the flag "solver
 *   non-finite" (a label: the DEQ's numbers come from broken solves).
 *
 * Measured on the committed records: over the CPU results' 1000-
 * and 2000-step runs, norm_growth 1.06-1.13, norm_peak up to 339 (a DEQ
 * with one large step), clip_share_last <= 0.05 and loss_final - loss_min
 * <= 0.091; the d_model=512 H100 unroll and checkpoint that blew up at lr
 * 1e-3 (commit c4c0f56): norm_growth 19.7 and 10.8, norm_peak 2771 and
 * 29337, clip shares 0.2 -> 1.0 and 0.22 -> 0.98. Healthy runs at lr 1e-3 had 0-8
 * spikes in 1000-2000 steps (at most 0.4%), the d_model=512 H100 runs that
 * blew up 66 and 93 in 500 (13%, 19%). HEALTH_REGRESS_MARGIN is above
 * batch noise: 3-step tiny synthetic runs (16 tokens a batch, seeds 1-8,
 * unroll and deq), which learn nothing yet, ended up to 0.13 nats above
 * their first loss; the lr=0.3 run that left the model worse ended 0.64
 * above it (valid perplexity 1.66x the same run's at lr=1e-3).
 */
#ifndef DQ_BENCH_HEALTH_H
#define DQ_BENCH_HEALTH_H

#include <jansson.h>

#define HEALTH_SPIKE_FACTOR   10.0
#define HEALTH_WINDOW	      50
#define HEALTH_WINDOW_MIN     10
#define HEALTH_LOSS_MARGIN    1.0
#define HEALTH_SPIKE_SHARE    0.01
#define HEALTH_REGRESS_MARGIN 0.5
#define HEALTH_MIN_CONVERGED  0.90
#define HEALTH_TREND_STEPS    100
#define HEALTH_GROWTH_MAX     5.0
#define HEALTH_PEAK_MAX	      1000.0
#define HEALTH_CLIP_SHARE_MAX 0.5
#define HEALTH_SMOOTH_MARGIN  0.2
/* A forward or backward solve's bit for a non-finite residual
 * (step_log.h's SOLVE_NONFINITE; run_record.c asserts they agree). */
#define HEALTH_NONFINITE_BIT 2

/* health.flags: the rule behind each flag (health_flag_name) */
enum health_flag {
	HEALTH_F_GROWTH = 1,
	HEALTH_F_PEAK = 2,
	HEALTH_F_CLIP = 4,
	HEALTH_F_REGRESS = 8,
	HEALTH_F_NONFINITE = 16,
};
/* The bit of a forward solve's flags that says it reached its tolerance
 * (step_log.h's SOLVE_CONVERGED; run_record.c asserts they agree). */
#define HEALTH_CONVERGED_BIT 1

enum health_verdict { HEALTH_HEALTHY, HEALTH_UNSTABLE, HEALTH_DIVERGED };

struct health {
	int steps;			/* steps assessed */
	int steps_solved;		/* of them, with a forward solve */
	double gnorm_median, gnorm_max; /* pre-clip; NAN without steps */
	int spike_steps;
	double loss_final, loss_min; /* nats; NAN without steps */
	/* forward converged fraction overall and over the last 10% of the
	 * steps; NAN when the run has no forward solve */
	double fwd_converged, fwd_converged_last;
	double bwd_converged, bwd_converged_last; /* NAN: no backward solve */
	int unconverged; /* 1, 0; -1 when the run has no forward solve */
	/* trends (NAN on runs shorter than HEALTH_TREND_STEPS, and
	 * clip_share_last without clipping) and broken solves */
	double norm_growth, norm_peak, clip_share_early, clip_share_last;
	int nonfinite_solves;
	int flags; /* enum health_flag bits */
	enum health_verdict verdict;
};

/* What health_assess reads beyond the losses and norms; NULL: none. */
struct health_more {
	double clip; /* the gradient-norm clip (0: none) */
	/* the backward solves' SOLVE_* flags, nc entries as fwd_conv, or
	 * NULL (no backward solve) */
	const int *bwd_flags;
};

/*
 * health_assess — the verdict of n steps: loss[0..n) (nats) and gnorm[0..n)
 * (pre-clip global l2 norm) of the training steps in order; fwd_conv[0..nc)
 * the forward solves' flags of the DEQ phase's steps, a solve converged
 * where HEALTH_CONVERGED_BIT is set (other bits, a stall or protective
 * break or a non-finite residual, are not convergence), or NULL
 * (no forward solve: unroll, checkpoint, ...); diverged: the run stopped as
 * diverged; more: the clip and the backward solves' flags (or NULL). A
 * non-finite loss or norm counts as a spike. Never fails.
 */
void health_assess(const double *loss, const double *gnorm, int n,
		   const int *fwd_conv, int nc, int diverged,
		   const struct health_more *more, struct health *h);

/* The flag's name in the record ("norm growth", ...). */
const char *health_flag_name(enum health_flag f);

/* "healthy", "unstable" or "diverged". */
const char *health_verdict_name(enum health_verdict v);

/* The record's `health` object of h (SCHEMA.md §health). New reference. */
json_t *health_json(const struct health *h);

/*
 * health_of_record — health_assess on a training record's `trace` (its
 * loss, grad_norm and fwd_converged arrays; the last solver.forward.steps
 * flags when the record has a forward solve) and status: the verdict of a
 * record that deqbench did not compute itself (impl=pytorch with
 * trace=true). NULL when the record has no such trace. New reference.
 */
json_t *health_of_record(const json_t *rec);

#endif
