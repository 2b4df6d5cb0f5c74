/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic's side of paranicd (docs/paranicd.md): the ATTACH/DETACH that pn_open and
 * pn_close make, and the query API of pn_daemon.h.
 *
 * Every system call here goes through syscall(2): libparanic is also linked into the
 * LD_PRELOAD socket library (libparanic_sock.so), which interposes socket, connect,
 * read, write, close ...; the daemon's connection must never pass through it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon_proto.h"
#include "hal_backend.h"
#include "pn_trust.h"

_Static_assert(PN_ABI_VERSION == ((PN_ABI_VERSION_MAJOR << 16) | PN_ABI_VERSION_MINOR), "PN_ABI_VERSION");

#define PND_IO_TIMEOUT_MS 5000

static _Thread_local char last_reason[256];

const char *pn_daemon_last_reason(void)
{
	return last_reason;
}

static void set_reason(const char *s)
{
	snprintf(last_reason, sizeof(last_reason), "%s", s ? s : "");
}

/* ---- raw I/O ------------------------------------------------------------------------------ */

static void sys_close(int fd)
{
	if (fd >= 0)
		syscall(SYS_close, fd);
}

static int io_wait(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	for (;;) {
		long r = syscall(SYS_poll, &p, 1, ms);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		long r = syscall(SYS_sendto, fd, p, len, MSG_NOSIGNAL, NULL, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int w = io_wait(fd, POLLOUT, PND_IO_TIMEOUT_MS);
				if (w < 0)
					return w;
				continue;
			}
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		int w = io_wait(fd, POLLIN, PND_IO_TIMEOUT_MS);
		long r;
		if (w < 0)
			return w;
		r = syscall(SYS_recvfrom, fd, p, len, MSG_DONTWAIT, NULL, NULL);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENOTCONN;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* ---- paths, connecting -------------------------------------------------------------------- */

int pn_daemon_socket_path(const char *cluster, int node, char *buf, size_t len)
{
	const char *s = getenv("PARANIC_DAEMON_SOCKET"), *dir;
	int n;

	if (!buf || !len)
		return -EINVAL;
	if (s && *s) {
		n = snprintf(buf, len, "%s", s);
	} else {
		if (!cluster)
			cluster = getenv("PARANIC_CLUSTER");
		if (!cluster || !*cluster)
			cluster = "default";
		if (node < 0) {
			const char *e = getenv("PARANIC_NODE");
			node = e && *e ? atoi(e) : 0;
			if (node < 0)
				return -EINVAL;
		}
		dir = getenv("PARANIC_DAEMON_DIR");
		if (!dir || !*dir)
			dir = "/tmp";
		n = snprintf(buf, len, "%s/paranic-%s/node%d.sock", dir, cluster, node);
	}
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (syscall(SYS_connect, fd, &sa, sizeof(sa)) < 0) {
		int e = errno;
		sys_close(fd);
		return e == ENOENT || e == ECONNREFUSED ? -ENOTCONN : -e;
	}
	return fd;
}

/* One request, its reply's frame; the reply payload (if any) into buf (at most cap
 * bytes kept, the rest read and dropped). A successful reply must be a head of `head`
 * bytes and `count` records of `rec` bytes (pnd_check_records), its strings are
 * NUL-terminated. Returns the reply's status or an I/O error; *count = the reply's
 * count. A refusal's reason goes to last_reason. */
static int transact(int fd, uint16_t type, const void *req, uint32_t req_len, void *buf, size_t cap,
		    size_t head, size_t rec, uint32_t *count)
{
	struct pnd_frame f = {.magic = PND_MAGIC, .type = type, .version = PND_PROTO_VERSION, .len = req_len};
	char drop[256];
	int r;

	if ((r = write_full(fd, &f, sizeof(f))) < 0 || (req_len && (r = write_full(fd, req, req_len)) < 0))
		return r == -EPIPE || r == -ECONNRESET ? -ENOTCONN : r;
	if ((r = read_full(fd, &f, sizeof(f))) < 0)
		return r;
	if (pnd_check_reply(&f, type) < 0 || (f.status >= 0 && pnd_check_records(&f, head, rec) < 0)) {
		set_reason("paranicd answered out of protocol");
		return -EPROTO;
	}
	if (f.status < 0) {
		char reason[128] = "";
		uint32_t n = f.len < sizeof(reason) - 1 ? f.len : (uint32_t)sizeof(reason) - 1;
		if ((r = read_full(fd, reason, n)) < 0)
			return r;
		for (uint32_t left = f.len - n; left;) {
			uint32_t k = left < sizeof(drop) ? left : (uint32_t)sizeof(drop);
			if ((r = read_full(fd, drop, k)) < 0)
				return r;
			left -= k;
		}
		set_reason(reason);
		return f.status;
	}
	{
		size_t keep = f.len < cap ? f.len : cap;
		if (keep && (r = read_full(fd, buf, keep)) < 0)
			return r;
		for (size_t left = f.len - keep; left;) {
			size_t k = left < sizeof(drop) ? left : sizeof(drop);
			if ((r = read_full(fd, drop, k)) < 0)
				return r;
			left -= k;
		}
		pnd_terminate_reply(type, buf, keep, f.count);
	}
	if (count)
		*count = f.count;
	return 0;
}

/* ---- pn_open / pn_close ------------------------------------------------------------------- */

/* Where is paranicd for this context, and may we trust what we find there? The run
 * directory (the socket's directory) decides: none at all is development mode (no
 * daemon on this node, unless PARANIC_DAEMON=require); one that exists must be ours or
 * root's and writable by nobody else, and then the daemon's socket must be in it and
 * answer, from a daemon of our uid or root. A directory without the socket, or with a
 * socket nobody answers on, is an error: the checks are never skipped because a file
 * is missing (docs/paranicd.md, "Attach"). 1: connect to path; 0: development mode;
 * <0: refused (reason set). */
static int locate(const char *path, int node, int require)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], *slash;
	int r;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	r = pn_trust_dir(dir);
	if (r == -ENOENT) {
		if (!require)
			return 0;   /* development mode: no daemon on this node */
		set_reason("no paranicd for this node and PARANIC_DAEMON=require");
		return -ENOTCONN;
	}
	if (r < 0) {
		snprintf(last_reason, sizeof(last_reason), "paranicd's run directory %.60s is %s", dir,
			 r == -ELOOP ? "a symbolic link" : r == -ENOTDIR ? "not a directory"
				: "another user's or writable by others");
		return -EACCES;
	}
	r = pn_trust_socket(path);
	if (r == -ENOENT) {
		snprintf(last_reason, sizeof(last_reason),
			 "paranicd's run directory %.60s has no socket for node %d (a daemon died? start it again, "
			 "or remove the directory to run without one)", dir, node);
		return -ENOTCONN;
	}
	if (r < 0) {
		snprintf(last_reason, sizeof(last_reason), "paranicd's socket %.80s is %s", path,
			 r == -ELOOP ? "a symbolic link" : r == -ENOTSOCK ? "not a socket" : "another user's");
		return -EACCES;
	}
	return 1;
}

int pn_daemon_attach(pn_hal_t *h, const pn_open_opts_t *o)
{
	const char *mode = getenv("PARANIC_DAEMON"), *job = getenv("PARANIC_JOB"), *fake;
	struct pnd_attach a = {.abi = PN_ABI_VERSION, .node = (int32_t)h->map.node_id, .ctx = (int32_t)h->map.ctx_id};
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int require = 0, fd, r;

	h->daemon_fd = -1;
	set_reason("");
	if (mode && (!strcmp(mode, "off") || !strcmp(mode, "0")))
		return 0;
	require = mode && !strcmp(mode, "require");
	if ((r = pn_daemon_socket_path(o->cluster, (int)h->map.node_id, path, sizeof(path))) < 0)
		return r;
	if ((r = locate(path, (int)h->map.node_id, require)) <= 0)
		return r;
	fd = connect_to(path);
	if (fd < 0) {
		set_reason(fd == -ENOTCONN ? "paranicd does not answer on its socket (it died? start it again, or "
					     "remove its run directory to run without one)" : "cannot reach paranicd");
		return fd;
	}
	if (pn_trust_peer(fd, NULL) < 0) {
		sys_close(fd);
		set_reason("the process on paranicd's socket runs as another user");
		return -EACCES;
	}
	/* Test hooks: pretend to be another library version, or to hold another context. */
	if ((fake = getenv("PARANIC_DAEMON_FAKE_ABI")) && *fake)
		a.abi = (uint32_t)strtoul(fake, NULL, 0);
	if ((fake = getenv("PARANIC_DAEMON_FAKE_CTX")) && *fake)
		a.ctx = atoi(fake);
	if (job)
		snprintf(a.job, sizeof(a.job), "%s", job);
	r = transact(fd, PND_ATTACH, &a, sizeof(a), NULL, 0, 0, 0, NULL);
	if (r < 0) {
		sys_close(fd);
		return r == -EACCES || r == -EPROTO || r == -EBUSY ? r : -ENOTCONN;
	}
	h->daemon_fd = fd;
	return 0;
}

void pn_daemon_detach(pn_hal_t *h)
{
	struct pnd_frame f = {.magic = PND_MAGIC, .type = PND_DETACH, .version = PND_PROTO_VERSION};
	if (!h || h->daemon_fd < 0)
		return;
	write_full(h->daemon_fd, &f, sizeof(f));
	sys_close(h->daemon_fd);
	h->daemon_fd = -1;
}

/* ---- queries ------------------------------------------------------------------------------ */

static int query(const char *sock, uint16_t type, const void *req, uint32_t req_len, void *buf, size_t cap,
		 size_t head, size_t rec, uint32_t *count)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int fd, r;

	if (!sock) {
		if ((r = pn_daemon_socket_path(NULL, -1, path, sizeof(path))) < 0)
			return r;
		sock = path;
	}
	if ((fd = connect_to(sock)) < 0)
		return fd;
	r = transact(fd, type, req, req_len, buf, cap, head, rec, count);
	sys_close(fd);
	return r;
}

int pn_daemon_status(const char *sock, pn_daemon_info_t *info, pn_daemon_node_t *nodes, int max)
{
	size_t cap = sizeof(pn_daemon_info_t) + (size_t)(max > 0 ? max : 0) * sizeof(pn_daemon_node_t);
	uint32_t count = 0;
	char *buf;
	int r;

	if (max < 0 || (max && !nodes))
		return -EINVAL;
	if (!(buf = malloc(cap)))
		return -ENOMEM;
	r = query(sock, PND_STATUS, NULL, 0, buf, cap, sizeof(pn_daemon_info_t), sizeof(pn_daemon_node_t), &count);
	if (r == 0) {
		if (info)
			memcpy(info, buf, sizeof(*info));
		if (max)
			memcpy(nodes, buf + sizeof(pn_daemon_info_t),
			       (count < (uint32_t)max ? count : (uint32_t)max) * sizeof(*nodes));
		r = (int)count;
	}
	free(buf);
	return r;
}

int pn_daemon_procs(const char *sock, pn_daemon_proc_t *procs, int max)
{
	uint32_t count = 0;
	int r;
	if (max < 0 || (max && !procs))
		return -EINVAL;
	r = query(sock, PND_PROCS, NULL, 0, procs, (size_t)max * sizeof(*procs), 0, sizeof(*procs), &count);
	return r < 0 ? r : (int)count;
}

int pn_daemon_jobs(const char *sock, pn_daemon_job_t *jobs, int max)
{
	uint32_t count = 0;
	int r;
	if (max < 0 || (max && !jobs))
		return -EINVAL;
	r = query(sock, PND_JOBS, NULL, 0, jobs, (size_t)max * sizeof(*jobs), 0, sizeof(*jobs), &count);
	return r < 0 ? r : (int)count;
}

int pn_daemon_job_start(const char *sock, const pn_daemon_job_t *job)
{
	pn_daemon_job_t j;
	if (!job || !job->id[0] || !memchr(job->id, 0, sizeof(job->id)) || job->nodes < 1 || job->ppn < 1)
		return -EINVAL;
	j = *job;
	j.command[sizeof(j.command) - 1] = 0;
	return query(sock, PND_JOB_START, &j, sizeof(j), NULL, 0, 0, 0, NULL);
}

int pn_daemon_job_end(const char *sock, const char *id)
{
	char buf[PN_DAEMON_NAME_MAX] = "";
	if (!id || !*id || strlen(id) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, id);
	return query(sock, PND_JOB_END, buf, sizeof(buf), NULL, 0, 0, 0, NULL);
}
