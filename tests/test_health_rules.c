/* test_health_rules.c — health.h's trend rules (norm growth, norm peak, a
 * run that became clip-bound, the smoothed loss regression), the backward
 * solves' convergence and non-finite solves, on made-up series; and on the
 * committed records of c4c0f56 (d_model 512 at lr 1e-3 on an H100, trimmed
 * to what health reads: tests/fixtures/health-c4c0f56-h100-d512-lr1e-3.jsonl),
 * where unroll and checkpoint blew up and their recorded verdict, from
 * before these rules, said nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "health.h"
#include "step_log.h"

#define N 400

/* A healthy series: loss falling slowly, norms near 1 with a wobble. */
static void steady(double *loss, double *g, int n)
{
	for (int i = 0; i < n; i++) {
		loss[i] = 6.0 - 1e-3 * i + 0.02 * ((i * 7) % 5);
		g[i] = 0.8 + 0.05 * ((i * 3) % 4);
	}
}

static int has_flag(const struct health *h, enum health_flag f)
{
	return (h->flags & f) != 0;
}

Test(health_rules, steady_run_has_no_flag)
{
	double loss[N], g[N];
	struct health_more m = {.clip = 1.0};
	struct health h;
	steady(loss, g, N);
	health_assess(loss, g, N, NULL, 0, 0, &m, &h);
	cr_assert_eq(h.flags, 0);
	cr_assert_eq(h.verdict, HEALTH_HEALTHY);
	cr_assert_float_eq(h.clip_share_last, 0.0, 1e-12);
}

Test(health_rules, gradual_norm_growth_is_unstable)
{
	double loss[N], g[N];
	struct health h;
	steady(loss, g, N);
	/* from 0.8 to about 1000 by the end, no step 10x its window */
	for (int i = 0; i < N; i++)
		g[i] = 0.8 * exp(7.0 * i / N);
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.spike_steps, 0, "no single step is a spike");
	cr_assert(has_flag(&h, HEALTH_F_GROWTH), "growth %g", h.norm_growth);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
}

Test(health_rules, rare_huge_spikes_are_a_peak)
{
	double loss[N], g[N];
	struct health h;
	steady(loss, g, N);
	/* 1% of the steps (not more than HEALTH_SPIKE_SHARE) at 1e5 */
	for (int i = 50; i < N; i += 100)
		g[i] = 1e5;
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_leq(h.spike_steps, HEALTH_SPIKE_SHARE * N);
	cr_assert(has_flag(&h, HEALTH_F_PEAK), "peak %g", h.norm_peak);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
}

Test(health_rules, clip_bound_only_when_it_became_so)
{
	double loss[N], g[N];
	struct health_more m = {.clip = 1.0};
	struct health h;
	steady(loss, g, N);
	for (int i = 0; i < N; i++)
		g[i] = 2.0; /* above the clip from the start: a small model */
	health_assess(loss, g, N, NULL, 0, 0, &m, &h);
	cr_assert_not(has_flag(&h, HEALTH_F_CLIP));
	for (int i = 0; i < N; i++)
		g[i] = i < N / 2 ? 0.5 : 3.0; /* became clip-bound */
	health_assess(loss, g, N, NULL, 0, 0, &m, &h);
	cr_assert(has_flag(&h, HEALTH_F_CLIP));
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert(isnan(h.clip_share_last), "no clip: no share");
}

Test(health_rules, smoothed_regression_of_a_fifth_of_a_nat)
{
	double loss[N], g[N];
	struct health h;
	steady(loss, g, N);
	/* back up by 0.3 nats over the last quarter (under the 1-nat margin
	 * of short runs) */
	for (int i = 3 * N / 4; i < N; i++)
		loss[i] = loss[3 * N / 4] + 0.3;
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert(has_flag(&h, HEALTH_F_REGRESS), "final %g min %g",
		  h.loss_final, h.loss_min);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
	/* the same on a 60-step run keeps the 1-nat margin: no flag */
	health_assess(loss + N - 60, g, 60, NULL, 0, 0, NULL, &h);
	cr_assert_not(has_flag(&h, HEALTH_F_REGRESS));
}

Test(health_rules, backward_solves_and_nonfinite_ones)
{
	double loss[N], g[N];
	int fwd[N], bwd[N];
	struct health_more m = {.bwd_flags = bwd};
	struct health h;
	steady(loss, g, N);
	for (int i = 0; i < N; i++) {
		fwd[i] = SOLVE_CONVERGED;
		bwd[i] = i % 2 ? SOLVE_CONVERGED : 0; /* half converged */
	}
	health_assess(loss, g, N, fwd, N, 0, &m, &h);
	cr_assert_float_eq(h.bwd_converged, 0.5, 1e-12);
	cr_assert_eq(h.unconverged, 1, "the backward solves count");
	cr_assert_eq(h.verdict, HEALTH_HEALTHY, "a label, not a verdict");
	for (int i = 0; i < N; i++)
		bwd[i] = SOLVE_CONVERGED;
	for (int i = 0; i < N; i += 20)
		fwd[i] = SOLVE_NONFINITE; /* 5% of the forward solves */
	health_assess(loss, g, N, fwd, N, 0, &m, &h);
	cr_assert_eq(h.nonfinite_solves, N / 20);
	cr_assert(has_flag(&h, HEALTH_F_NONFINITE));
	cr_assert_eq(h.verdict, HEALTH_HEALTHY);
	json_t *o = health_json(&h), *f = json_object_get(o, "flags");
	cr_assert_eq(json_array_size(f), 1);
	cr_assert_str_eq(json_string_value(json_array_get(f, 0)),
			 "solver non-finite");
	json_decref(o);
}

/* The committed H100 records of c4c0f56: unroll and checkpoint blew up at
 * lr 1e-3 (their recorded health, from before the trend rules, had no
 * flag); the DEQ trained. */
Test(health_rules, c4c0f56_h100_blowups_are_flagged)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[1024], *line = NULL;
	size_t cap = 0;
	int seen = 0;
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	snprintf(path, sizeof(path),
		 "%s/tests/fixtures/health-c4c0f56-h100-d512-lr1e-3.jsonl",
		 root);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	while (getline(&line, &cap, f) > 0) {
		json_t *r = json_loads(line, 0, NULL);
		const char *m = json_string_value(
		    json_object_get(json_object_get(r, "config"), "method"));
		json_t *h = health_of_record(r);
		json_t *fl = json_object_get(h, "flags");
		const char *v =
		    json_string_value(json_object_get(h, "verdict"));
		cr_assert_not_null(h);
		if (!strcmp(m, "deq")) {
			cr_assert_str_eq(v, "healthy");
			cr_assert_eq(json_array_size(fl), 0);
		} else {
			cr_assert_str_eq(v, "unstable", "%s", m);
			cr_assert_geq(json_array_size(fl), 2, "%s", m);
		}
		seen++;
		json_decref(h);
		json_decref(r);
	}
	free(line);
	fclose(f);
	cr_assert_eq(seen, 3);
}

/* The labels of `deqbench report --format json FILE`'s rows, one line per
 * row ("METHOD: label, label"), into buf. */
static void report_labels(const char *file, char *buf, size_t n)
{
	const char *bin = getenv("DQ_DEQBENCH");
	char cmd[2048];
	json_t *rows;
	size_t i, j, at = 0;
	json_t *o, *l;
	cr_assert_not_null(bin, "DQ_DEQBENCH must give deqbench");
	snprintf(cmd, sizeof(cmd), "'%s' report --format json '%s' 2>/dev/null",
		 bin, file);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	rows = json_loadf(p, 0, NULL);
	pclose(p);
	cr_assert(json_is_array(rows), "report --format json %s", file);
	buf[0] = '\0';
	json_array_foreach(rows, i, o)
	{
		at += (size_t)snprintf(
		    buf + at, n - at,
		    "%s:", json_string_value(json_object_get(o, "method")));
		json_array_foreach(
		    json_object_get(json_object_get(o, "health"), "labels"), j,
		    l) at += (size_t)snprintf(buf + at, n - at, " %s,",
					      json_string_value(l));
		at += (size_t)snprintf(buf + at, n - at, "\n");
	}
	json_decref(rows);
}

/* report's group rule: c4c0f56's H200 unroll and checkpoint at d_model 512
 * stalled near loss 6.2 from step 100 (valid ppl 421.9 against the DEQ's
 * 227.0) with healthy-looking norms; the committed CPU gc-vs-deq rows,
 * within 0.04 nats of each other, are not suspects. */
Test(health_rules, stuck_baseline_is_a_suspect)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[1024], buf[8192];
	cr_assert_not_null(root);
	snprintf(path, sizeof(path),
		 "%s/tests/fixtures/report-c4c0f56-h200-d512-stuck.jsonl",
		 root);
	report_labels(path, buf, sizeof(buf));
	cr_assert(
	    strstr(buf, "unroll L=16: health unknown 1/1, suspect baseline,"),
	    "%s", buf);
	cr_assert(strstr(buf, "checkpoint L=16 k=4: health unknown 1/1, "
			      "suspect baseline,"),
		  "%s", buf);
	cr_assert(strstr(buf, "deq broyden/ift: health unknown 1/1,\n"), "%s",
		  buf);
	snprintf(path, sizeof(path), "%s/results/cpu/gc-vs-deq.jsonl", root);
	report_labels(path, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "suspect"), "%s", buf);
}

/* validate --strict of the one record rec (written to a temporary file):
 * the exit status. */
static int validate_one(const json_t *rec)
{
	char path[] = "/tmp/dq-health-XXXXXX", cmd[2048];
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	json_dumpf(rec, f, JSON_COMPACT);
	fputc('\n', f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "'%s' validate --strict '%s' >/dev/null 2>&1",
		 getenv("DQ_DEQBENCH"), path);
	int rc = system(cmd);
	unlink(path);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* validate's cross rule: unconverged is true exactly when a forward or
 * backward converged fraction is below 0.9 (a record of Anderson solves
 * whose backward converged in 85% of the steps was refused as "expected
 * false" before the rule knew the backward). */
Test(health_rules, validate_knows_the_backward_solves)
{
	char path[] = "/tmp/dq-health-run-XXXXXX", cmd[2048];
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "'%s' run corpus=synthetic d_model=16 n_heads=2 d_ff=32 "
		 "seq_len=8 batch_size=2 layers=2 steps=3 warmup_steps=1 "
		 "eval_tokens=16 threads=1 method=deq out=%s >/dev/null 2>&1",
		 getenv("DQ_DEQBENCH"), path);
	cr_assert_eq(system(cmd), 0);
	json_t *r = json_load_file(path, 0, NULL);
	unlink(path);
	cr_assert_not_null(r);
	json_t *h = json_object_get(r, "health");
	json_object_set_new(h, "fwd_converged", json_real(1.0));
	json_object_set_new(h, "fwd_converged_last", json_real(1.0));
	json_object_set_new(h, "bwd_converged", json_real(0.85));
	json_object_set_new(h, "bwd_converged_last", json_real(1.0));
	json_object_set_new(h, "unconverged", json_true());
	/* the solver's own fraction must agree with health's */
	json_object_set_new(
	    json_object_get(json_object_get(r, "solver"), "forward"),
	    "converged_fraction", json_real(1.0));
	cr_assert_eq(validate_one(r), 0, "unconverged by the backward");
	json_object_set_new(h, "unconverged", json_false());
	cr_assert_neq(validate_one(r), 0, "not unconverged: refused");
	json_decref(r);
}
