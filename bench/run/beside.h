/* beside.h — whether other deqbench runs ran on this host beside a run,
 * for the record's `beside` object (results/SCHEMA.md): a time measured
 * while a second run shared the cores is not the time of the run alone,
 * and `report` labels such rows.
 *
 * The registry is a directory of this user's (DQ_RUNS_DIR, else
 * $XDG_RUNTIME_DIR/deqbench-runs, else /tmp/deqbench-runs-UID, made mode
 * 0700): each running run holds a file run.PID ("PID STARTTIME\nLABEL\n",
 * STARTTIME the process's start in clock ticks, /proc/PID/stat). A run
 * entering reads the others (those at its start) and leaves a mark
 * seen.OTHER.PID on each, so that a run learns at its end who joined it
 * while it ran; at its end it reads the registry again (those at its end)
 * and its marks, and removes its file and marks. A file or mark of a
 * process that is gone (no such pid, a zombie, or another process's start
 * time under that pid) is removed by whoever finds it. A run that started
 * and ended between another's start and end is counted by both (the mark),
 * so "runs" is every other run that overlapped this one, whatever the
 * sampling instants. O(files in the registry) per sample.
 */
#ifndef DQ_BENCH_BESIDE_H
#define DQ_BENCH_BESIDE_H

#include <jansson.h>

struct beside;

/* Registers this process as a running run (LABEL: what it is, one line,
 * for a person reading the registry) and counts the runs already there.
 * Never fails: where the registry cannot be made or written, the result
 * says so (beside_leave gives nulls). Free with beside_leave. */
struct beside *beside_enter(const char *label);

/* Counts the runs there now and those that joined, unregisters, frees b,
 * and returns the record's `beside` object: {"runs", "at_start", "at_end",
 * "lanes"}: the other runs that overlapped this one, at its start, at its
 * end (null where the registry could not be used), and LANES (suite
 * --lanes; 0: null). New reference. */
json_t *beside_leave(struct beside *b, int lanes);

/* The registry's directory into buf (n bytes). 0, or -1 when it does not
 * fit. */
int beside_dir(char *buf, size_t n);

#endif
