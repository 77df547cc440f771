/* progress.c — see progress.h. */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void progress_begin(struct progress *p, int steps, const char *label, int quiet)
{
	memset(p, 0, sizeof(*p));
	p->steps = steps > 0 ? steps : 1;
	p->tty = isatty(STDERR_FILENO);
	p->quiet = quiet;
	p->t0 = now_s();
	p->last_draw = -1;
	p->last_decile = 0;
	snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
}

static void fmt_eta(char *buf, size_t n, double s)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, n, "?");
	else if (s >= 3600)
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600),
			 (int)fmod(s / 60, 60));
	else
		snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
}

void progress_update(struct progress *p, int step, double loss,
		     double tokens_per_s)
{
	double t = now_s(), el = t - p->t0;
	double eta = step > 0 ? el / step * (p->steps - step) : NAN;
	char etab[32], tps[48];

	if (p->quiet)
		return;
	fmt_eta(etab, sizeof(etab), eta);
	if (isfinite(tokens_per_s))
		snprintf(tps, sizeof(tps), "%.0f tok/s", tokens_per_s);
	else
		snprintf(tps, sizeof(tps), "- tok/s");
	if (p->tty) {
		int width = 24, fill = (int)((double)step / p->steps * width);
		char bar[32];
		if (step < p->steps && t - p->last_draw < 0.1)
			return;
		p->last_draw = t;
		for (int i = 0; i < width; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[width] = 0;
		fprintf(stderr, "\r%s [%s] %d/%d loss %.4f  %s  ETA %s\033[K",
			p->label, bar, step, p->steps, loss, tps, etab);
		fflush(stderr);
	} else {
		int decile = (int)((long)step * 10 / p->steps);
		if (decile <= p->last_decile && step != 1)
			return;
		p->last_decile = decile;
		fprintf(stderr, "%s step %d/%d loss %.4f %s ETA %s\n", p->label,
			step, p->steps, loss, tps, etab);
	}
}

void progress_end(struct progress *p, const char *status)
{
	if (p->quiet)
		return;
	fprintf(stderr, "%s%s %s in %.1f s\n", p->tty ? "\n" : "", p->label,
		status, now_s() - p->t0);
}
