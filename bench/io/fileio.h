/*
 * fileio.h — the file-safety rules every deqbench output follows, in one
 * place (records, the corpus cache, safetensors outputs).
 *
 * Appending (records): the bytes go in whole or not at all. A write that
 * comes back short (full disk, file size limit) is undone by truncating a
 * regular file back to its length before the append, so the next record
 * is never glued onto a fragment; a file whose last byte is not a newline
 * (cut by hand) gets one before the record. A record that could not be
 * appended is kept in the rescue file (fileio_rescue_path); a file that
 * a failed append created is removed again, so a file exists only once a
 * record is in it. Missing directories of an appended file are created
 * then and never removed (another process may be about to write there);
 * the up-front check (fileio_probe_append) creates nothing.
 *
 * Replacing (caches, safetensors): the new content is written to a
 * temporary file next to the target, flushed to disk and renamed over it,
 * so a reader sees the old file or the whole new one. Only an absent path
 * or a regular file is replaced; a symbolic link is followed and its target
 * replaced under the same rule (the link stays); a FIFO, device, socket or
 * directory is refused, so out=/dev/full can never replace /dev/full.
 * Before the work that makes the content, fileio_check_replace finds what
 * would make the replacement fail or destroy a file of another kind.
 *
 * Temporary names are PATH.tmp.HOST.PID (fileio_tmp_path). A process
 * killed before its rename leaves one behind; the next writer of PATH
 * removes those of dead processes on this host (fileio_remove_stale_tmp).
 */
#ifndef DQ_BENCH_FILEIO_H
#define DQ_BENCH_FILEIO_H

#include <stddef.h>
#include <sys/uio.h>

/* fileio_make_parents — mkdir -p of PATH's directory part (mode 0777 less
 * the umask); directories that exist already are fine, none is removed.
 * Returns 0, or -1 with "cannot create directory DIR (reason)" in err. */
int fileio_make_parents(const char *path, char *err, size_t errlen);

/*
 * fileio_probe_append — whether records could be appended to PATH, without
 * creating or removing anything that stays: an existing PATH is opened for
 * appending (a FIFO without blocking; it fails when nothing reads it; a
 * dangling symbolic link is refused, naming its target); a missing PATH is
 * probed by creating and removing a file named for this process in the
 * deepest existing directory of PATH, so probes of processes started
 * together never race. Missing directories are created only when the
 * first record is appended. Returns 0, or -1 with "PATH: reason" in err.
 */
int fileio_probe_append(const char *path, char *err, size_t errlen);

/*
 * fileio_append — appends BUF[0..n) to PATH (created with mode 0644 when
 * absent; parents must exist) under an exclusive flock, so deqbench
 * processes sharing a file never interleave; when a regular file's last
 * byte is not '\n', a '\n' goes first (under the same lock). On a short or
 * failed write a regular file is truncated back to its length before the
 * call, and removed when this call created it (an appender that waited
 * for its lock meanwhile opens the path again). A signal that ends the
 * wait for the lock (the first SIGINT or SIGTERM, interrupt.h) fails the
 * append with nothing written. nofollow:
 * refuse a symbolic link at PATH (O_NOFOLLOW; for files in shared
 * directories). A FIFO without a reader fails instead of blocking.
 * Returns 0, or -1 with "PATH: reason" in err, saying whether PATH was left
 * unchanged.
 */
int fileio_append(const char *path, const void *buf, size_t n, int nofollow,
		  char *err, size_t errlen);

/*
 * fileio_rescue_path — where records that could not be appended to out=
 * go: $TMPDIR/deqbench-unsaved-UID.jsonl ($TMPDIR unset or empty: /tmp),
 * written into BUF[0..n). A different file system from out= in the common
 * case of a full results disk; per user, so users do not share it.
 */
const char *fileio_rescue_path(char *buf, size_t n);

/*
 * fileio_rescue_new — a path for a whole file (EXT: ".safetensors") that an
 * output could not be written to: $TMPDIR/deqbench-unsaved-UID-PID.EXT
 * ($TMPDIR unset or empty: /tmp), with -2, -3, ... before EXT while that
 * name exists, into BUF[0..n). As fileio_rescue_path, usually another
 * file system than the output's.
 */
const char *fileio_rescue_new(char *buf, size_t n, const char *ext);

/*
 * fileio_replace_target — the file that replacing PATH writes: PATH itself
 * when absent or a regular file, the final target of a symbolic link when
 * that is a regular file. Otherwise -1 with "PATH is a FIFO (named pipe),
 * not a regular file; ..." in err (dangling links included). TARGET gets at
 * most n bytes.
 */
int fileio_replace_target(const char *path, char *target, size_t n, char *err,
			  size_t errlen);

/* What an existing file must already be for an output to replace it:
 * NAME for messages ("a safetensors file"); is() tells from the file's
 * first n bytes HEAD (n <= 256) and its size in bytes. */
struct fileio_kind {
	const char *name;
	int (*is)(const unsigned char *head, size_t n, long long size);
};

/* Safetensors: an 8-byte little-endian header length within the file,
 * then the header's '{'. */
extern const struct fileio_kind fileio_kind_safetensors;

/*
 * fileio_check_replace — what fileio_replace of PATH would find wrong,
 * checked before the work that makes the content (a run's training), so
 * bad output paths are bad input: PATH ending in '/', the refusals of
 * fileio_replace_target, a name longer than PATH_MAX or a component longer than
 * NAME_MAX, an existing non-empty file that is not of KIND (NULL: any
 * regular file), an immutable or append-only file (chattr +i, +a), a file
 * of another user in a sticky directory (rename may not replace it), and
 * a directory where its temporary file cannot be created (that file is
 * created and removed). Returns 0, or -1 with "PATH: reason; fix" in err
 * (a long PATH shortened so the reason always fits).
 */
int fileio_check_replace(const char *path, const struct fileio_kind *kind,
			 char *err, size_t errlen);

/* fileio_tmp_path — the temporary file that replacing TARGET (a resolved
 * path, fileio_replace_target) writes, in BUF[0..n): TARGET.tmp.HOST.PID
 * beside it, TARGET's base name shortened where the whole would exceed
 * NAME_MAX. */
void fileio_tmp_path(const char *target, char *buf, size_t n);

/*
 * fileio_replace — writes the concatenation of IOV[0..niov) to PATH by
 * temporary file, fsync and rename, after fileio_replace_target (so the
 * same refusals) and fileio_remove_stale_tmp. Mode 0666 less the umask.
 * Returns 0, or -1 with "STEP failed (reason): PATH; nothing was
 * replaced" in err (the step: creating, writing or renaming the temporary
 * file) and no temporary file left.
 */
int fileio_replace(const char *path, const struct iovec *iov, int niov,
		   char *err, size_t errlen);

/*
 * fileio_remove_stale_tmp — removes the regular files PATH.tmp (older
 * deqbench versions) and PATH.tmp.PID / PATH.tmp.HOST.PID whose HOST is this
 * one (or absent) and whose process no longer exists. Files of live
 * processes and of other hosts are kept. Returns how many were removed.
 */
int fileio_remove_stale_tmp(const char *path);

/*
 * fileio_open_read — opens PATH for reading, only when it is a regular file
 * (a link to one included): a FIFO is opened without waiting for a writer
 * and refused like a directory, socket or device. Returns the descriptor
 * (blocking reads, close it), or -1 with "PATH is a directory, not a
 * regular file" / "PATH: cannot read (reason)" in err (the caller adds
 * the fix) and errno set (EISDIR for a directory).
 */
int fileio_open_read(const char *path, char *err, size_t errlen);

/* fileio_same_file — whether paths A and B name one file: same device and
 * inode when both exist (links followed), else the same absolute path once
 * the existing part of each is resolved (realpath) and the rest cleaned
 * (".." after a missing directory as once an append has created it). */
int fileio_same_file(const char *a, const char *b);

/* One file a command reads or writes, for fileio_distinct: WHAT names it
 * in messages ("out=", "the config file "), PATH (NULL or "" = not
 * given), OUTPUT whether the command writes it. */
struct fileio_named {
	const char *what;
	const char *path;
	int output;
};

/*
 * fileio_distinct — refuses two of F[0..n) that name the same file
 * (fileio_same_file) when at least one of them is an output, so out= can
 * never append to the config or parameter file, nor save_params= replace
 * the records. Returns 0, or -1 with "WHAT1PATH1 and WHAT2PATH2 name the
 * same file; give each its own path ..." in err.
 */
int fileio_distinct(const struct fileio_named *f, int n, char *err,
		    size_t errlen);

#endif
