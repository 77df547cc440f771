/* suite_resume.h — `deqbench suite --resume`: which runs of a suite already
 * have their record in out=, and claims that keep concurrent resumes (two
 * of one suite, or shards sharing out=) from running one run twice.
 *
 * A run is done when its out= file holds an ok record, usable
 * (record_usable.h: this schema version, valid), of the same kind and
 * suite repeat (0 for a record of `deqbench run`) whose config has the run
 * identity (record_run_identity) of the run's config as a record stores
 * it. Each record stands for one run only: a combination with 3 repeats
 * and one record runs twice more.
 *
 * A run that is not done is claimed before it starts: an OFD write lock
 * (fcntl F_OFD_SETLK) on one byte of the file OUT.lock beside out=, the
 * byte chosen by a hash of the run's out=, kind, repeat and identity. The
 * claim is held until the run's process has ended, and the kernel drops it
 * when the process holding it dies. A run claimed by another process is
 * skipped (that process appends its record); once the claim is taken, out=
 * is read again from where it was read up to, so a run that another
 * process finished meanwhile is not run again. OUT.lock stays (an empty
 * file; delete it when no suite runs). Where it cannot be created, runs go
 * unclaimed, with one warning.
 */
#ifndef DQ_BENCH_SUITE_RESUME_H
#define DQ_BENCH_SUITE_RESUME_H

#include <jansson.h>
#include <stddef.h>

#include "suite.h"

struct resume;

/* Reads the records of the out= files of shard si/sn's runs (each file
 * once; a missing file or one that is not a regular file has none).
 * NULL with one line in err for an unreadable file or a malformed line
 * (bad input), or out of memory. Free with resume_close. */
struct resume *resume_open(const struct suite *s, int si, int sn, char *err,
			   size_t errlen);

enum resume_what {
	RESUME_RUN,  /* not done: the caller holds its claim, runs it, then
			calls resume_release */
	RESUME_DONE, /* done: *rec is its record (new reference), now used */
	RESUME_BUSY, /* another process holds its claim: skip it */
};

/* What to do with run r of suite s (above). */
enum resume_what resume_claim(struct resume *rs, const struct suite *s,
			      const struct suite_run *r, json_t **rec);

/* Releases the claim resume_claim took (none held: nothing). */
void resume_release(struct resume *rs);

/* Releases every claim and frees rs (NULL: nothing). */
void resume_close(struct resume *rs);

#endif
