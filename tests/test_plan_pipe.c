/* test_plan_pipe.c — `deqbench plan stages=P`'s pipeline model
 * (bench/cmd/plan_pipe.h) on fixed numbers: the slowest stage's
 * slot with its sends, (M + P − 1) slots, the ring all-reduce of the tied
 * block, the bubble (P − 1) / (M + P − 1) (GPipe, Huang et al. 2019; 1F1B,
 * Narayanan et al. 2021), the worst stage's memory (the tied block on
 * every stage; GPipe's M micro-batches of tapes in flight against
 * 1F1B's min(M, P)); one device's step; and the CLI: the table printed
 * after the plan, bad stages and link_gbps exiting 2 with one line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_pipe.h"
#include "test_cli.h"

/* L 8 on P 4 stages (2 layers each), M 8 micro-batches; a layer 1 ms
 * forward + 2 ms VJP; head 3 ms; step_fixed 0.5 ms; Adam 4 ms; 1e6-byte
 * activations over a 1e6 bytes/ms link (1 ms a send); tapes 1e5 bytes a
 * layer; block 2e6 bytes, embeddings 3e6, head 1e6. */
static struct pipe_in sample(void)
{
	return (struct pipe_in){.L = 8,
				.P = 4,
				.M = 8,
				.fwd_ms = 1,
				.vjp_ms = 2,
				.head_ms = 3,
				.fixed_ms = 0.5,
				.opt_ms = 4,
				.act_bytes = 1e6,
				.tape_bytes = 1e5,
				.block_bytes = 2e6,
				.first_bytes = 3e6,
				.last_bytes = 1e6,
				.link_bytes_ms = 1e6};
}

Test(pipe, gpipe_and_1f1b)
{
	struct pipe_in in = sample();
	struct pipe_out g, o;
	/* slot: 2 layers × 3 ms + the head's 3 (the last stage is the
	 * slowest) + 2 sends of 1 ms = 11 ms */
	cr_assert_float_eq(pipe_slot_ms(&in), 11, 1e-12);
	pipe_model(&in, 0, &g);
	pipe_model(&in, 1, &o);
	/* all-reduce 2 (3/4) 2e6 / 1e6 = 3 ms; step 11 × 11 + 3 + 4 */
	cr_assert_float_eq(g.allreduce_ms, 3, 1e-12);
	cr_assert_float_eq(g.step_ms, 11 * 11 + 3 + 4, 1e-12);
	cr_assert_float_eq(o.step_ms, g.step_ms, 1e-12);
	cr_assert_float_eq(g.bubble, 3.0 / 11.0, 1e-15);
	cr_assert_float_eq(o.bubble, g.bubble, 0);
	/* the worst stage: block + embeddings; grads alike, Adam twice */
	cr_assert_float_eq(g.params, 5e6, 0);
	cr_assert_float_eq(g.grads, 5e6, 0);
	cr_assert_float_eq(g.adam, 1e7, 0);
	/* tapes: GPipe 8 micro-batches × 2 layers; 1F1B min(8, 4) × 2 */
	cr_assert_float_eq(g.depth, 16e5, 0);
	cr_assert_float_eq(o.depth, 8e5, 0);
	/* one device: 8 × (8 × 3 + 3 + 0.5) + 4 */
	cr_assert_float_eq(pipe_one_device_ms(&in), 8 * 27.5 + 4, 1e-12);
}

/* Layers that P does not divide: the deepest stage sets the slot; fewer
 * micro-batches than stages: 1F1B holds M of them. */
Test(pipe, uneven_stages_and_few_microbatches)
{
	struct pipe_in in = sample();
	struct pipe_out o;
	in.L = 10; /* 3 layers on the deepest of 4 stages */
	in.M = 2;
	cr_assert_eq(pipe_stage_layers(10, 4), 3);
	cr_assert_float_eq(pipe_slot_ms(&in), 3 * 3 + 3 + 2, 1e-12);
	pipe_model(&in, 1, &o);
	cr_assert_float_eq(o.depth, 2 * 3 * 1e5, 0);
	cr_assert_float_eq(o.bubble, 3.0 / 5.0, 1e-15);
}

#define PIPE_TINY                                                              \
	"plan", "corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32",      \
	    "seq_len=8", "batch_size=8", "layers=8", "threads=1",              \
	    "budget_mib=1000", "price_cap_s=1"

Test(pipe_cli, table_after_the_plan, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char err[4096], p[512], *t;
	const char *a[] = {PIPE_TINY, "microbatches=4", "stages=4",
			   "link_gbps=50", NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(p, sizeof(p), "stdout.txt");
	t = cli_read(p, NULL);
	cr_assert(strstr(t, "pipeline model (not a measurement"), "%s", t);
	cr_assert(strstr(t, "stages=4 devices of 2 layers, microbatches=4, "
			    "link 50 GB/s"),
		  "%s", t);
	/* bubble (4 − 1) / (4 + 4 − 1) */
	cr_assert(strstr(t, "GPipe       42.9%"), "%s", t);
	cr_assert(strstr(t, "1F1B        42.9%"), "%s", t);
	cr_assert(strstr(t, "1 device "), "%s", t);
	free(t);
}

Test(pipe_cli, bad_keys_exit_2_with_one_line, .init = cli_setup,
     .fini = cli_teardown)
{
	char err[4096];
	const char *bad[][2] = {{"stages=1", "stages=1: give"},
				{"stages=9", "from 2 to layers=8"},
				{"stages=x", "stages=x: give"},
				{"link_gbps=0", "link_gbps=0: give"},
				{"link_gbps=fast", "link_gbps=fast: give"}};
	for (int i = 0; i < 5; i++) {
		/* link_gbps is read beside a valid stages */
		const char *a[] = {PIPE_TINY, bad[i][0],
				   i < 3 ? NULL : "stages=2", NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s: %s",
			     bad[i][0], err);
		cr_assert(strstr(err, bad[i][1]) && !strstr(err, "twice"), "%s",
			  err);
		cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "%s",
			     err);
	}
}
