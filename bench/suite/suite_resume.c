/* suite_resume.c — done runs and run claims of `suite --resume` (see
 * suite_resume.h). */
#include "suite_resume.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../config/config.h"
#include "../io/fileio.h"
#include "../records/record.h"
#include "../records/record_usable.h"

/* One out= file of the shard: how far it has been read, and its lock
 * file. */
struct resume_out {
	char *path;
	off_t off;   /* bytes read: whole lines (and a whole last record) */
	int lineno;  /* lines read */
	int lock_fd; /* OUT.lock, -1 not open yet, -2 cannot be opened */
};

struct resume {
	struct resume_out *outs;
	int n_outs;
	/* run key (run_key) -> array of the unused ok records of that run */
	json_t *pool;
	int held_fd;   /* lock fd of the claim held, -1 none */
	off_t held_at; /* its byte */
	int warned;    /* the claims' warning was printed */
	int priced;    /* the price records' note was printed */
};

/* "OUT\nKIND\nREPEAT\nIDENTITY" of a run with config cfg (JSON, as a
 * record stores it): equal keys, same run. malloc'd; NULL out of memory. */
static char *run_key(const char *out, const char *kind, long long repeat,
		     const json_t *cfg)
{
	json_t *id = record_run_identity(cfg);
	char *t = json_dumps(id, JSON_COMPACT | JSON_SORT_KEYS |
				     JSON_REAL_PRECISION(17)),
	     *k = NULL;
	json_decref(id);
	if (t && asprintf(&k, "%s\n%s\n%lld\n%s", out, kind, repeat, t) < 0)
		k = NULL;
	free(t);
	return k;
}

/* Adds rec, read from out= o, to the pool when it is a usable ok record. */
static void pool_add(struct resume *rs, const struct resume_out *o, json_t *rec)
{
	const char *st = json_string_value(json_object_get(rec, "status"));
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	const json_t *suite = json_object_get(rec, "suite");
	char why[256], *k;
	json_t *a;
	if (kind && !strcmp(kind, "price") && !rs->priced++)
		fprintf(stderr,
			"deqbench: suite --resume: %s holds price records "
			"(deqbench price): not runs, passed over\n",
			o->path);
	if (!st || strcmp(st, "ok") || !record_usable(rec, why, sizeof(why)))
		return;
	k = run_key(o->path, kind ? kind : "train",
		    json_integer_value(json_object_get(suite, "repeat")),
		    json_object_get(rec, "config"));
	if (!k)
		return;
	/* nocheck: out= need not be UTF-8 */
	if (!(a = json_object_get(rs->pool, k)) &&
	    json_object_set_new_nocheck(rs->pool, k, a = json_array()) != 0)
		a = NULL;
	if (a)
		json_array_append(a, rec);
	free(k);
}

/* Reads out= o on from where it was read up to and pools its records.
 * Stops before a last line that is neither ended by a newline nor a whole
 * JSON object (an append in progress). strict: a malformed line is an
 * error (-1 with one line in err); else it is passed over. */
static int read_more(struct resume *rs, struct resume_out *o, int strict,
		     char *err, size_t errlen)
{
	struct stat st;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	FILE *f;
	if (stat(o->path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0; /* no records yet, or a FIFO or device */
	if (!(f = fopen(o->path, "r")) || fseeko(f, o->off, SEEK_SET) != 0) {
		snprintf(err, errlen, "%s: cannot read (%s); check the path",
			 o->path, strerror(errno));
		if (f)
			fclose(f);
		return strict ? -1 : 0;
	}
	while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
		size_t raw = (size_t)len;
		int ended = line[len - 1] == '\n';
		json_error_t je;
		json_t *r;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			line[len - 1] == ' '))
			line[--len] = 0;
		r = len ? json_loadb(line, (size_t)len, 0, &je) : NULL;
		if (!ended && !json_is_object(r)) {
			json_decref(r);
			break;
		}
		o->off += (off_t)raw;
		o->lineno++;
		if (json_is_object(r))
			pool_add(rs, o, r);
		else if (len && strict) {
			snprintf(err, errlen,
				 "%s:%d:%d: malformed record: %s; each line "
				 "must be one JSON object",
				 o->path, o->lineno, r ? 1 : je.column,
				 r ? "not an object" : je.text);
			rc = -1;
		}
		json_decref(r);
	}
	free(line);
	fclose(f);
	return rc;
}

struct resume *resume_open(const struct suite *s, int si, int sn, char *err,
			   size_t errlen)
{
	struct resume *rs = calloc(1, sizeof(*rs));
	if (!rs || !(rs->outs = calloc((size_t)s->n_runs, sizeof(*rs->outs))))
		goto oom;
	rs->pool = json_object();
	rs->held_fd = -1;
	for (int k = 0; k < s->n_runs; k++) {
		const char *out = s->runs[k].cfg.out;
		struct resume_out *o = &rs->outs[rs->n_outs];
		int seen = 0;
		if (!suite_in_shard(k, si, sn))
			continue;
		for (int j = 0; j < rs->n_outs && !seen; j++)
			seen = !strcmp(rs->outs[j].path, out);
		if (seen)
			continue;
		if (!(o->path = strdup(out)))
			goto oom;
		o->lock_fd = -1;
		rs->n_outs++;
		if (read_more(rs, o, 1, err, errlen) != 0) {
			resume_close(rs);
			return NULL;
		}
	}
	return rs;
oom:
	snprintf(err, errlen, "out of host memory reading out= for --resume");
	resume_close(rs);
	return NULL;
}

/* Takes an unused record of key k from the pool into *rec: 1, or 0 when
 * there is none. */
static int take(struct resume *rs, const char *k, json_t **rec)
{
	json_t *a = json_object_get(rs->pool, k);
	if (!json_array_size(a))
		return 0;
	*rec = json_incref(json_array_get(a, 0));
	json_array_remove(a, 0);
	return 1;
}

/* The lock byte of run key k: FNV-1a, in [1, 2^62]. */
static off_t claim_byte(const char *k)
{
	uint64_t h = 14695981039346656037ull;
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ull;
	return (off_t)(1 + (h >> 2));
}

/* The lock fd of out= o (OUT.lock, opened on first use); -1 when it cannot
 * be opened (warned once) or out= is not a regular file (a FIFO or device
 * keeps no records to resume from: no claims). */
static int lock_fd(struct resume *rs, struct resume_out *o)
{
	char *p = NULL, e[512];
	struct stat st;
	if (o->lock_fd == -1 && stat(o->path, &st) == 0 && !S_ISREG(st.st_mode))
		o->lock_fd = -2;
	if (o->lock_fd == -1) {
		o->lock_fd = -2;
		snprintf(e, sizeof(e), "out of memory");
		if (asprintf(&p, "%s.lock", o->path) >= 0 &&
		    fileio_make_parents(p, e, sizeof(e)) == 0) {
			o->lock_fd =
			    open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
			snprintf(e, sizeof(e), "%s", strerror(errno));
		}
		if (o->lock_fd < 0 && !rs->warned++)
			fprintf(stderr,
				"deqbench: --resume: cannot open %s.lock (%s); "
				"runs are not claimed, so a concurrent "
				"--resume of out=%s may run a run twice\n",
				o->path, e, o->path);
		if (o->lock_fd < 0)
			o->lock_fd = -2;
		free(p);
	}
	return o->lock_fd >= 0 ? o->lock_fd : -1;
}

enum resume_what resume_claim(struct resume *rs, const struct suite *s,
			      const struct suite_run *r, json_t **rec)
{
	json_t *cj = config_to_json(&r->cfg), *stored;
	char *t = record_dumps(cj), *k = NULL;
	struct resume_out *o = NULL;
	enum resume_what w = RESUME_RUN;
	int fd;
	/* the config as its record would store it */
	stored = t ? json_loads(t, 0, NULL) : NULL;
	if (stored)
		k = run_key(r->cfg.out, s->eval ? "eval" : "train", r->repeat,
			    stored);
	json_decref(cj);
	json_decref(stored);
	free(t);
	for (int j = 0; j < rs->n_outs && !o; j++)
		if (!strcmp(rs->outs[j].path, r->cfg.out))
			o = &rs->outs[j];
	if (!k || !o) {
		free(k);
		return RESUME_RUN;
	}
	if (take(rs, k, rec)) {
		free(k);
		return RESUME_DONE;
	}
	if ((fd = lock_fd(rs, o)) >= 0) {
		struct flock fl = {.l_type = F_WRLCK,
				   .l_whence = SEEK_SET,
				   .l_start = claim_byte(k),
				   .l_len = 1};
		if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
			char e[1024];
			rs->held_fd = fd;
			rs->held_at = fl.l_start;
			read_more(rs, o, 0, e, sizeof(e));
			if (take(rs, k, rec)) {
				resume_release(rs);
				w = RESUME_DONE;
			}
		} else if (errno == EAGAIN || errno == EACCES)
			w = RESUME_BUSY;
		else if (!rs->warned++)
			fprintf(stderr,
				"deqbench: --resume: cannot lock %s.lock (%s); "
				"runs are not claimed, so a concurrent "
				"--resume of out=%s may run a run twice\n",
				o->path, strerror(errno), o->path);
	}
	free(k);
	return w;
}

void resume_release(struct resume *rs)
{
	struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_len = 1};
	if (!rs || rs->held_fd < 0)
		return;
	fl.l_start = rs->held_at;
	fcntl(rs->held_fd, F_OFD_SETLK, &fl);
	rs->held_fd = -1;
}

void resume_close(struct resume *rs)
{
	if (!rs)
		return;
	resume_release(rs);
	for (int j = 0; j < rs->n_outs; j++) {
		if (rs->outs[j].lock_fd >= 0)
			close(rs->outs[j].lock_fd);
		free(rs->outs[j].path);
	}
	free(rs->outs);
	json_decref(rs->pool);
	free(rs);
}
