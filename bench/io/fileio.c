/* fileio.c — appending, replacing and temporary files (see fileio.h). */
#include "fileio.h"

#include "errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BUF 4096

/* mkdir -p of the directory part of path (directories are never removed
 * again: another process may be using them). */
static int mkdirs(const char *path, char *err, size_t errlen)
{
	char buf[PATH_BUF];
	size_t n = strlen(path);
	if (n >= sizeof(buf)) {
		char pb[160];
		snprintf(err, errlen, "%s: path too long",
			 errmsg_brief(path, pb, sizeof(pb)));
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
			char pb[160], db[160];
			snprintf(
			    err, errlen, "%s: cannot create directory %s (%s)",
			    errmsg_brief(path, pb, sizeof(pb)),
			    errmsg_brief(buf, db, sizeof(db)), strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

int fileio_make_parents(const char *path, char *err, size_t errlen)
{
	return mkdirs(path, err, errlen);
}

/* "PATH: cannot open for appending (reason)", with a plain word for a FIFO
 * nobody reads (ENXIO under O_NONBLOCK). */
static void open_error(const char *path, int e, char *err, size_t errlen)
{
	char pb[256];
	snprintf(err, errlen, "%s: cannot open for appending (%s)",
		 errmsg_brief(path, pb, sizeof(pb)),
		 e == ENXIO ? "a FIFO with no reader" : strerror(e));
}

/* This host's name as it appears in temporary names: letters, digits, '-',
 * '_' and '.', others replaced by '_'. */
static void host_tag(char *buf, size_t n)
{
	if (gethostname(buf, n) != 0 || !buf[0])
		snprintf(buf, n, "localhost");
	buf[n - 1] = 0;
	for (char *p = buf; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && *p != '-' && *p != '.')
			*p = '_';
}

/* The longest base name kept in a temporary name: NAME_MAX less
 * ".tmp.HOST." and the 10 digits of the largest pid, so the temporary name
 * of any target that may exist fits in one component. Fixed per host (not
 * per pid), so fileio_remove_stale_tmp finds the names of other pids. */
static size_t tmp_base_max(const char *host)
{
	size_t fixed = strlen(".tmp.") + strlen(host) + 1 + 10;
	return fixed + 16 < NAME_MAX ? NAME_MAX - fixed : 16;
}

void fileio_tmp_path(const char *target, char *buf, size_t n)
{
	char host[256];
	const char *slash = strrchr(target, '/');
	size_t dir = slash ? (size_t)(slash - target + 1) : 0, base, max;
	host_tag(host, sizeof(host));
	base = strlen(target + dir);
	max = tmp_base_max(host);
	snprintf(buf, n, "%.*s%.*s.tmp.%s.%ld", (int)dir, target,
		 (int)(base < max ? base : max), target + dir, host,
		 (long)getpid());
}

/* Whether a file can be created where path would be: in the deepest
 * directory of path's directory part that exists, a file with a name of
 * this process alone (so probes running together never meet) is created
 * and removed. A missing directory below it would be created by this
 * user, so it would be writable; an existing component that is not a
 * directory, or a name longer than NAME_MAX, is named. */
static int probe_create(const char *path, char *err, size_t errlen)
{
	char dir[PATH_BUF], tmp[PATH_BUF + 300], host[256], pb[256], db[256];
	struct stat st;
	char *slash;
	int fd;
	snprintf(dir, sizeof(dir), "%s", path);
	for (;;) {
		const char *base;
		slash = strrchr(dir, '/');
		base = slash ? slash + 1 : dir;
		if (strlen(base) > NAME_MAX) {
			snprintf(err, errlen,
				 "%s: name too long (%zu bytes "
				 "in one component, at most %d)",
				 errmsg_brief(path, pb, sizeof(pb)),
				 strlen(base), NAME_MAX);
			return -1;
		}
		if (!slash) {
			snprintf(dir, sizeof(dir), ".");
			break;
		}
		slash[slash == dir] = 0; /* "/x" keeps "/" */
		if (stat(dir, &st) == 0 || errno != ENOENT)
			break;
	}
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s is not a directory",
			 errmsg_brief(path, pb, sizeof(pb)),
			 errmsg_brief(dir, db, sizeof(db)));
		return -1;
	}
	host_tag(host, sizeof(host));
	snprintf(tmp, sizeof(tmp), "%s/.deqbench-probe.%s.%ld", dir, host,
		 (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* ours, stale */
		fd = open(tmp,
			  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			  0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create a file in %s (%s)",
			 errmsg_brief(path, pb, sizeof(pb)),
			 errmsg_brief(dir, db, sizeof(db)), strerror(errno));
		return -1;
	}
	close(fd);
	unlink(tmp);
	return 0;
}

int fileio_probe_append(const char *path, char *err, size_t errlen)
{
	struct stat st;
	char pb[256];
	int fd;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return probe_create(path, err, errlen);
		open_error(path, errno, err, errlen);
		return -1;
	}
	if (S_ISLNK(st.st_mode) && stat(path, &st) != 0 && errno == ENOENT) {
		char to[PATH_BUF] = "";
		ssize_t n = readlink(path, to, sizeof(to) - 1);
		to[n > 0 ? n : 0] = 0;
		snprintf(err, errlen,
			 "%s is a dangling symbolic link (to '%.300s', which "
			 "does not exist); create that file or remove the "
			 "link",
			 errmsg_brief(path, pb, sizeof(pb)), to);
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		open_error(path, errno, err, errlen);
		return -1;
	}
	close(fd);
	return 0;
}

/* Writes buf[0..n) to fd, retrying short writes; returns the bytes written
 * and leaves errno set when fewer than n. */
static size_t write_all(int fd, const void *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(fd, (const char *)buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			break;
		}
		off += (size_t)w;
	}
	return off;
}

/* Whether the regular file open as fd (size bytes, size > 0) ends in
 * something other than '\n': its last byte read through a second
 * descriptor of path (fd is write-only), used only when it is the same
 * file. 0 when it cannot be read. */
static int lacks_final_newline(const char *path, int fd, off_t size)
{
	struct stat a, b;
	char c = '\n';
	int rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (rd < 0)
		return 0;
	if (fstat(fd, &a) != 0 || fstat(rd, &b) != 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || pread(rd, &c, 1, size - 1) != 1)
		c = '\n';
	close(rd);
	return c != '\n';
}

/* Takes the exclusive lock on fd. -1 when a signal (the first SIGINT or
 * SIGTERM, interrupt.h) ended the wait; other failures (no locks on this
 * file system) go on without the lock, as before. */
static int lock_file(int fd)
{
	if (flock(fd, LOCK_EX) == 0 || errno != EINTR)
		return 0;
	return -1;
}

/* Whether path (not followed) is still the file open as fd. */
static int names_fd(const char *path, int fd)
{
	struct stat a, b;
	return lstat(path, &a) == 0 && fstat(fd, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Opens path for appending (O_NONBLOCK: a FIFO without a reader fails
 * instead of blocking); *created tells whether this call created it. */
static int open_append(const char *path, int nofollow, int *created)
{
	int fl = O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC |
		 (nofollow ? O_NOFOLLOW : 0);
	int fd = open(path, fl);
	*created = 0;
	if (fd >= 0 || errno != ENOENT)
		return fd;
	fd = open(path, fl | O_CREAT | O_EXCL, 0644);
	if (fd >= 0)
		*created = 1;
	else if (errno == EEXIST) /* created meanwhile, or a dangling link */
		fd = open(path, fl | O_CREAT, 0644);
	return fd;
}

/* Opens and locks path for an append (open_append, lock_file). A file a
 * failed first append removed while we waited for its lock (no links
 * left) is opened again, so no record goes into a removed file. The
 * descriptor, or -1 with err. */
static int open_locked(const char *path, int nofollow, int *created, char *err,
		       size_t errlen)
{
	for (int tries = 0; tries < 16; tries++) {
		struct stat st;
		int fd = open_append(path, nofollow, created);
		if (fd < 0) {
			open_error(path, errno, err, errlen);
			return -1;
		}
		/* O_NONBLOCK only kept the open from waiting for a FIFO
		 * reader */
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		if (lock_file(fd) != 0) {
			snprintf(err, errlen,
				 "%s: interrupted by a signal while waiting "
				 "for the lock another process holds on it; "
				 "nothing was written",
				 path);
			close(fd);
			return -1;
		}
		if (fstat(fd, &st) != 0 || st.st_nlink > 0)
			return fd;
		close(fd);
	}
	snprintf(err, errlen,
		 "%s: cannot append (removed again and again while waiting "
		 "for its lock); nothing was written",
		 path);
	return -1;
}

int fileio_append(const char *path, const void *buf, size_t n, int nofollow,
		  char *err, size_t errlen)
{
	struct stat st;
	off_t old = -1;
	size_t done = 0;
	int e = 0, created, fd;

	fd = open_locked(path, nofollow, &created, err, errlen);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		old = st.st_size;
	/* a file cut mid-line (or edited) gets the record on a line of its
	 * own, never glued onto the last one */
	if (old > 0 && lacks_final_newline(path, fd, old) &&
	    write_all(fd, "\n", 1) != 1)
		e = errno;
	if (!e) {
		done = write_all(fd, buf, n);
		if (done < n)
			e = errno;
		else if (old >= 0 && fsync(fd) != 0)
			e = errno; /* NFS and friends report write errors here */
	}
	if (e) {
		const char *left = "a partial line may remain at its end";
		if (old >= 0 && ftruncate(fd, old) == 0)
			left = "the file is unchanged";
		else if (done == 0)
			left = "nothing was written";
		/* a file this append created, still empty, goes again (under
		 * the lock: a waiting appender sees it unlinked, open_locked):
		 * out= exists only once a record is in it */
		if (created && old == 0 && names_fd(path, fd) &&
		    unlink(path) == 0)
			left = "it was not created";
		snprintf(err, errlen, "%s: cannot append (%s); %s", path,
			 strerror(e), left);
	}
	close(fd);
	return e ? -1 : 0;
}

const char *fileio_rescue_path(char *buf, size_t n)
{
	const char *t = getenv("TMPDIR");
	snprintf(buf, n, "%s/deqbench-unsaved-%ld.jsonl", t && *t ? t : "/tmp",
		 (long)getuid());
	return buf;
}

const char *fileio_rescue_new(char *buf, size_t n, const char *ext)
{
	const char *t = getenv("TMPDIR");
	struct stat st;
	for (int k = 1; k < 1000; k++) {
		char num[16] = "";
		if (k > 1)
			snprintf(num, sizeof(num), "-%d", k);
		snprintf(buf, n, "%s/deqbench-unsaved-%ld-%ld%s%s",
			 t && *t ? t : "/tmp", (long)getuid(), (long)getpid(),
			 num, ext);
		if (lstat(buf, &st) != 0 && errno == ENOENT)
			break;
	}
	return buf;
}

static const char *type_name(mode_t m)
{
	return S_ISFIFO(m)   ? "FIFO (named pipe)"
	       : S_ISCHR(m)  ? "character device"
	       : S_ISBLK(m)  ? "block device"
	       : S_ISSOCK(m) ? "socket"
	       : S_ISDIR(m)  ? "directory"
			     : "special file";
}

static int copy_path(char *dst, size_t n, const char *src, char *err,
		     size_t errlen)
{
	if (strlen(src) >= n) {
		snprintf(err, errlen, "%s: path too long", src);
		return -1;
	}
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* Target of the symbolic link path, which must be a regular file. */
static int link_target(const char *path, char *target, size_t n, char *err,
		       size_t errlen)
{
	char *real = realpath(path, NULL);
	struct stat st;
	int rc = -1;
	if (!real || stat(real, &st) != 0)
		snprintf(err, errlen,
			 "%s is a symbolic link that does not resolve (%s); "
			 "point it at a regular file or give another path",
			 path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		snprintf(err, errlen,
			 "%s is a symbolic link to %s, a %s, not a regular "
			 "file; give a new path or a regular file",
			 path, real, type_name(st.st_mode));
	else
		rc = copy_path(target, n, real, err, errlen);
	free(real);
	return rc;
}

int fileio_replace_target(const char *path, char *target, size_t n, char *err,
			  size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) != 0 || S_ISREG(st.st_mode))
		return copy_path(target, n, path, err, errlen);
	if (S_ISLNK(st.st_mode))
		return link_target(path, target, n, err, errlen);
	snprintf(err, errlen,
		 "%s is a %s, not a regular file; outputs are written to a "
		 "temporary file and renamed into place, so give a new path "
		 "or a regular file",
		 path, type_name(st.st_mode));
	return -1;
}

/* Whether SUFFIX, the part of a name after "BASE.tmp", names a temporary
 * file of a process of this host that no longer runs: "" (older
 * versions), ".PID" or ".HOST.PID". */
static int stale_suffix(const char *suffix, const char *host)
{
	const char *dot, *pid_s;
	char *end;
	long pid;
	if (!*suffix)
		return 1;
	if (*suffix != '.')
		return 0;
	dot = strrchr(suffix + 1, '.');
	pid_s = dot ? dot + 1 : suffix + 1;
	if (dot && ((size_t)(dot - suffix - 1) != strlen(host) ||
		    strncmp(suffix + 1, host, strlen(host))))
		return 0; /* another host's, or not ours at all */
	errno = 0;
	pid = strtol(pid_s, &end, 10);
	if (!*pid_s || *end || errno || pid <= 0 || pid > INT_MAX)
		return 0;
	if (pid == (long)getpid())
		return 1; /* an earlier process that had our number */
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int fileio_remove_stale_tmp(const char *path)
{
	char dir[PATH_BUF], host[256], prefix[PATH_BUF];
	const char *slash = strrchr(path, '/'), *base;
	struct dirent *de;
	DIR *d;
	int removed = 0;

	if (strlen(path) >= sizeof(dir) - 8)
		return 0;
	if (slash) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path + 1),
			 path);
		base = slash + 1;
	} else {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	}
	host_tag(host, sizeof(host));
	/* as fileio_tmp_path shortens a long base */
	snprintf(prefix, sizeof(prefix), "%.*s.tmp", (int)tmp_base_max(host),
		 base);
	if (!*base || !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		struct stat st;
		size_t pl = strlen(prefix);
		if (strncmp(de->d_name, prefix, pl) ||
		    !stale_suffix(de->d_name + pl, host))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISREG(st.st_mode) &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

/* "STEP failed (reason): PATH; nothing was replaced" into err: the reason
 * before the path, so a long path cannot cut it off. */
static void replace_error(const char *step, int e, const char *path, char *err,
			  size_t errlen)
{
	char pb[256];
	errmsg_set(err, errlen, "%s failed (%s): %s; nothing was replaced",
		   step, strerror(e), errmsg_brief(path, pb, sizeof(pb)));
}

int fileio_replace(const char *path, const struct iovec *iov, int niov,
		   char *err, size_t errlen)
{
	char target[PATH_BUF], tmp[PATH_BUF + 300];
	const char *step = "writing its temporary file";
	int fd, e = 0;

	if (fileio_replace_target(path, target, sizeof(target), err, errlen))
		return -1;
	fileio_remove_stale_tmp(target);
	fileio_tmp_path(target, tmp, sizeof(tmp));
	/* O_EXCL: our own stale name was removed above; never truncate a file
	 * someone else put there */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0666);
	if (fd < 0) {
		replace_error("creating a temporary file beside it", errno,
			      path, err, errlen);
		return -1;
	}
	for (int i = 0; i < niov && !e; i++)
		if (write_all(fd, iov[i].iov_base, iov[i].iov_len) <
		    iov[i].iov_len)
			e = errno;
	if (!e && fsync(fd) != 0)
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	if (!e && rename(tmp, target) != 0) {
		e = errno;
		step = "renaming its temporary file over it";
	}
	if (e) {
		unlink(tmp);
		replace_error(step, e, path, err, errlen);
		return -1;
	}
	return 0;
}

int fileio_open_read(const char *path, char *err, size_t errlen)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char pb[256];
	if (fd < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot read (%s)",
			 errmsg_brief(path, pb, sizeof(pb)), strerror(e));
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is a %s, not a regular file",
			 errmsg_brief(path, pb, sizeof(pb)),
			 type_name(st.st_mode));
		close(fd);
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Appends the lexically cleaned relative path rel ("." dropped, ".."
 * removing the component before it) to the absolute directory buf. */
static void append_clean(char *buf, size_t n, const char *rel)
{
	char part[PATH_BUF];
	const char *p = rel;
	while (*p) {
		size_t len = strcspn(p, "/");
		snprintf(part, sizeof(part), "%.*s", (int)len, p);
		p += len + (p[len] == '/');
		if (!*part || !strcmp(part, "."))
			continue;
		if (!strcmp(part, "..")) {
			char *s = strrchr(buf, '/');
			if (s)
				s[s == buf] = 0;
			continue;
		}
		if (strlen(buf) + len + 2 > n)
			return;
		if (strcmp(buf, "/"))
			strcat(buf, "/");
		strcat(buf, part);
	}
}

/* The absolute path path names with its longest existing prefix resolved
 * (realpath: links, "..") and the missing rest cleaned lexically; "" when
 * the working directory is unknown. */
static void resolve_path(const char *path, char *out, size_t n)
{
	char abs[2 * PATH_BUF + 2], cwd[PATH_BUF];
	size_t k;
	if (path[0] == '/')
		snprintf(abs, sizeof(abs), "%s", path);
	else if (getcwd(cwd, sizeof(cwd)))
		snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
	else {
		out[0] = 0;
		return;
	}
	k = strlen(abs);
	for (;;) {
		char save = abs[k], *real;
		abs[k] = 0;
		real = realpath(k ? abs : "/", NULL);
		abs[k] = save;
		if (real || k == 0) {
			snprintf(out, n, "%s", real ? real : "/");
			free(real);
			append_clean(out, n, abs + k);
			return;
		}
		while (k > 0 && abs[k - 1] != '/') /* drop the last component */
			k--;
		if (k > 0)
			k--;
	}
}

int fileio_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char ra[PATH_BUF], rb[PATH_BUF];
	int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
	if (ea && eb)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	/* "dir/../f" with dir missing is f once an append creates dir */
	resolve_path(a, ra, sizeof(ra));
	resolve_path(b, rb, sizeof(rb));
	return ra[0] && !strcmp(ra, rb);
}

int fileio_distinct(const struct fileio_named *f, int n, char *err,
		    size_t errlen)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			char pa[200], pb[200];
			if (!(f[i].output || f[j].output) || !f[i].path ||
			    !f[i].path[0] || !f[j].path || !f[j].path[0] ||
			    !fileio_same_file(f[i].path, f[j].path))
				continue;
			snprintf(
			    err, errlen,
			    "%s%s and %s%s name the same file; give each "
			    "its own path (an output must not write into "
			    "an input or another output)",
			    f[i].what, errmsg_brief(f[i].path, pa, sizeof(pa)),
			    f[j].what, errmsg_brief(f[j].path, pb, sizeof(pb)));
			return -1;
		}
	return 0;
}
