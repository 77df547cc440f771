/* cmd_compare.c — `deqbench compare BASE NEW [--match KEY] [--threshold
 * PCT] [--alpha A] [--fail-above PCT] [--format md|csv|json]` (compare.h;
 * docs/commands.md). BASE and NEW are JSONL files or directories of them.
 * Exit 0; 1 when a pair fails --fail-above (compare_gate: SLOWER by more
 * than PCT, UNDECIDED with a ratio above 1 + PCT/100, NEW DIVERGED, NO
 * DATA); 2 for bad input (a flag, a file that cannot be read, no usable
 * records, an ambiguous --match). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd.h"
#include "../report/compare.h"
#include "../config/config.h"
#include "../records/record_usable.h"

static const char USAGE[] =
    "usage: deqbench compare BASE NEW [--match KEY] [--threshold PCT] "
    "[--alpha A] [--fail-above PCT] [--format md|csv|json]\n"
    "  BASE, NEW     record files (.jsonl) or directories of them\n"
    "  --match KEY   pair configurations that may differ in config key KEY\n"
    "                (e.g. impl, threads); each NEW row pairs on its own\n"
    "  --threshold   step-time change called SAME, percent (default 5)\n"
    "  --alpha       significance level of the exact Mann-Whitney U test\n"
    "                on run means (default 0.05)\n"
    "  --fail-above  exit 1 when a pair is SLOWER by more than PCT percent,\n"
    "                or UNDECIDED (too few runs) with new/base above\n"
    "                1 + PCT/100, NEW DIVERGED or NO DATA\n"
    "  --format      md (default), csv or json\n";

struct compare_args {
	const char *base, *new_path, *format;
	struct compare_opts o;
	double fail_above; /* < 0: off */
	unsigned given;	   /* bit k: flag k of take_flag's names seen */
};

/* A flag's number in [lo, hi] into *x. 0, or bad input's status. */
static int number_flag(const char *flag, const char *v, double lo, double hi,
		       double *x)
{
	char *end, e[256];
	errno = 0;
	*x = v ? strtod(v, &end) : 0;
	if (v && *v && !*end && !errno && *x >= lo && *x <= hi)
		return 0;
	snprintf(e, sizeof(e), "compare: %s needs a number in [%g, %g], got %s",
		 flag, lo, hi, v ? v : "nothing");
	return bad_input(e);
}

/* One flag at argv[*i] (its value next, or after '='). 0, or bad input. */
static int take_flag(int argc, char **argv, int *i, struct compare_args *a)
{
	static const char *const names[] = {"--match", "--threshold", "--alpha",
					    "--fail-above", "--format"};
	const char *arg = argv[*i], *eq = strchr(arg, '='), *v = NULL;
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
	int k = -1, rc = 0;
	char e[300];
	for (int j = 0; j < 5; j++)
		if (strlen(names[j]) == len && !strncmp(arg, names[j], len))
			k = j;
	if (k < 0) {
		snprintf(e, sizeof(e),
			 "compare: unknown flag %.100s; see deqbench compare "
			 "--help",
			 arg);
		return bad_input(e);
	}
	/* as config keys given twice: which one was meant is not ours to
	 * guess (G20.7) */
	if (a->given & 1u << k) {
		snprintf(e, sizeof(e),
			 "compare: %s is given twice; give it once", names[k]);
		return bad_input(e);
	}
	a->given |= 1u << k;
	v = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
	if (k == 0) {
		if (!v || !config_key_known(v)) {
			snprintf(e, sizeof(e),
				 "compare: --match needs a config key "
				 "(deqbench run --help), got %.100s",
				 v ? v : "nothing");
			return bad_input(e);
		}
		a->o.match = v;
	} else if (k == 1)
		rc = number_flag("--threshold", v, 0, 1000, &a->o.threshold);
	else if (k == 2)
		rc = number_flag("--alpha", v, 1e-9, 1, &a->o.alpha);
	else if (k == 3)
		rc = number_flag("--fail-above", v, 0, 1e6, &a->fail_above);
	else if (!v ||
		 (strcmp(v, "md") && strcmp(v, "csv") && strcmp(v, "json")))
		return bad_input("compare: --format must be md, csv or json");
	else
		a->format = v;
	return rc;
}

static int parse(int argc, char **argv, struct compare_args *a)
{
	int npos = 0, rc;
	memset(a, 0, sizeof(*a));
	a->o.threshold = 100 * COMPARE_THRESHOLD;
	a->o.alpha = COMPARE_ALPHA;
	a->fail_above = -1;
	a->format = "md";
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "--", 2)) {
			if ((rc = take_flag(argc, argv, &i, a)))
				return rc;
		} else if (npos < 2)
			*(npos++ ? &a->new_path : &a->base) = argv[i];
		else
			return bad_input("compare: give two record files or "
					 "directories, BASE and NEW");
	}
	if (npos < 2)
		return bad_input("compare: give BASE and NEW, e.g. deqbench "
				 "compare results/cpu/default.jsonl "
				 "results/local/default.jsonl");
	a->o.threshold /= 100;
	return 0;
}

/* The usable records of path (a JSONL file, or every *.jsonl of a
 * directory, in name order) appended to arr. 0, or -1 with err. */
static int read_side(const char *path, json_t *arr, char *err, size_t errlen)
{
	struct stat st;
	struct dirent **ents;
	int n, rc = 0, skipped = 0;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return record_read_usable(path, arr, &skipped, err, errlen);
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		size_t l = strlen(ents[i]->d_name);
		char p[4096];
		if (!rc && l > 6 &&
		    !strcmp(ents[i]->d_name + l - 6, ".jsonl")) {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			rc = record_read_usable(p, arr, &skipped, err, errlen);
		}
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int cmd_compare(int argc, char **argv)
{
	struct compare_args a;
	json_t *base = json_array(), *new_recs = json_array(), *res;
	char err[1200];
	int rc = 0;
	if (argc > 0 &&
	    (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
		fputs(USAGE, stdout);
		return 0;
	}
	if ((rc = parse(argc, argv, &a)) == 0 &&
	    (read_side(a.base, base, err, sizeof(err)) != 0 ||
	     read_side(a.new_path, new_recs, err, sizeof(err)) != 0))
		rc = bad_input(err);
	if (!rc && (!json_array_size(base) || !json_array_size(new_recs))) {
		snprintf(err, sizeof(err),
			 "compare: %s holds no usable records; give files "
			 "written by deqbench run or suite",
			 json_array_size(base) ? a.new_path : a.base);
		rc = bad_input(err);
	}
	if (!rc &&
	    !(res = compare_records(base, new_recs, &a.o, err, sizeof(err))))
		rc = err[0] ? bad_input(err)
			    : bad_input("compare: out of memory");
	else if (!rc) {
		compare_print(stdout, res,
			      !strcmp(a.format, "json")	 ? COMPARE_JSON
			      : !strcmp(a.format, "csv") ? COMPARE_CSV
							 : COMPARE_MD);
		fflush(stdout);
		if (a.fail_above >= 0 &&
		    compare_gate(res, a.fail_above, stderr) > 0)
			rc = 1;
		json_decref(res);
	}
	json_decref(base);
	json_decref(new_recs);
	return rc;
}
