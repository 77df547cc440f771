/* progress.h — training progress on stderr: a bar redrawn in place with \r
 * on a terminal (step/steps, loss, tokens/s, ETA; at most 10 redraws per
 * second), plain lines at every 10% otherwise, so logs stay readable. */
#ifndef DQ_BENCH_PROGRESS_H
#define DQ_BENCH_PROGRESS_H

struct progress {
	int steps;
	int tty;
	int quiet;
	double t0, last_draw;
	int last_decile;
	char label[96];
};

/* quiet != 0 prints nothing (tests, grad). */
void progress_begin(struct progress *p, int steps, const char *label,
		    int quiet);
/* step is 1-based; loss in nats; tokens_per_s may be NAN when unknown. */
void progress_update(struct progress *p, int step, double loss,
		     double tokens_per_s);
/* Final line (status and elapsed time). */
void progress_end(struct progress *p, const char *status);

#endif
