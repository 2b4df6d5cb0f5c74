/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's socket clients: framing, the requests (ATTACH with its checks, DETACH,
 * STATUS, PROCS, JOBS, JOB_START, JOB_END), and the clean-up after a process whose
 * connection dropped without DETACH (its context freed, PEER-DEAD sent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "paranicd.h"

/* ---- replies -------------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
		if (r < 0) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && poll(&pf, 1, 1000) > 0)
				continue;
			return -1;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

static int reply(struct client *c, uint16_t type, int status, uint32_t count, const void *a, size_t alen,
		 const void *b, size_t blen)
{
	struct pnd_frame f = {.magic = PND_MAGIC, .type = type, .version = PND_PROTO_VERSION, .status = status,
			      .count = count, .len = (uint32_t)(alen + blen)};
	if (write_all(c->fd, &f, sizeof(f)) < 0 || (alen && write_all(c->fd, a, alen) < 0) ||
	    (blen && write_all(c->fd, b, blen) < 0))
		return -1;
	return 0;
}

static int refuse(struct paranicd *d, struct client *c, uint16_t type, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int refuse(struct paranicd *d, struct client *c, uint16_t type, int err, const char *fmt, ...)
{
	char why[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	d->refused++;
	dlog(d, "refused pid %d uid %u: %s", (int)c->pid, (unsigned)c->uid, why);
	return reply(c, type, err, 0, why, strlen(why) + 1, NULL, 0);
}

/* ---- requests ------------------------------------------------------------------------------------ */

static int allowed(struct paranicd *d, const struct client *c)
{
	for (int i = 0; i < d->n_uid; i++)
		if (d->allow_uid[i] == c->uid)
			return 1;
	for (int i = 0; i < d->n_gid; i++)
		if (d->allow_gid[i] == c->gid)
			return 1;
	return 0;
}

static int on_attach(struct paranicd *d, struct client *c, const struct pnd_attach *a)
{
	uint32_t owner = 0;
	int r;

	if (c->attached)
		return refuse(d, c, PND_ATTACH, -EINVAL, "this connection has attached already");
	if (!allowed(d, c))
		return refuse(d, c, PND_ATTACH, -EACCES, "uid %u (gid %u) is not allowed on node %d", (unsigned)c->uid,
			      (unsigned)c->gid, d->node);
	if ((a->abi >> 16) != PN_ABI_VERSION_MAJOR)
		return refuse(d, c, PND_ATTACH, -EPROTO, "library ABI %u.%u, paranicd %u.%u: major versions differ",
			      a->abi >> 16, a->abi & 0xffff, PN_ABI_VERSION_MAJOR, PN_ABI_VERSION_MINOR);
	if (a->node != d->node || a->ctx < 0 || a->ctx >= d->num_ctx || a->ctx == d->ctx)
		return refuse(d, c, PND_ATTACH, -EACCES, "context %d.%d is not a user context of node %d", a->node,
			      a->ctx, d->node);
	r = pn_hal_ctx_owner(d->h, (uint32_t)a->ctx, &owner);
	if (r == 0 && owner != (uint32_t)c->pid)
		return refuse(d, c, PND_ATTACH, -EACCES, "context %d is owned by pid %u, not by the caller (pid %d)",
			      a->ctx, owner, (int)c->pid);
	/* One connection per context: attached connections are never shed by the limits
	 * (accept_clients), so there are at most as many as the node has contexts. */
	for (int i = 0; i < d->ncl; i++) {
		const struct client *x = d->cl[i];
		if (x != c && x->attached && !x->detached && x->ctx == a->ctx && x->pid == c->pid)
			return refuse(d, c, PND_ATTACH, -EBUSY, "context %d is attached on another connection", a->ctx);
	}
	c->attached = 1;
	c->ctx = a->ctx;
	c->abi = a->abi;
	memcpy(c->job, a->job, sizeof(c->job));
	c->job[sizeof(c->job) - 1] = 0;
	return reply(c, PND_ATTACH, 0, 0, NULL, 0, NULL, 0);
}

static int on_status(struct paranicd *d, struct client *c)
{
	pn_daemon_info_t info = {.node = d->node, .nodes = d->nodes, .ctx = d->ctx, .num_ctx = d->num_ctx,
				 .pid = (uint32_t)getpid(), .abi = PN_ABI_VERSION, .hello_ms = d->hello_ms,
				 .down_ms = d->down_ms, .hellos_sent = d->hellos_sent, .hellos_recv = d->hellos_recv,
				 .notices_sent = d->notices_sent, .cleanups = d->cleanups, .refused = d->refused};
	pn_daemon_node_t *nodes = calloc((size_t)d->nodes, sizeof(*nodes));
	uint64_t now = now_ns();
	int r;

	if (!nodes)
		return refuse(d, c, PND_STATUS, -ENOMEM, "out of memory");
	snprintf(info.cluster, sizeof(info.cluster), "%s", d->cluster);
	snprintf(info.backend, sizeof(info.backend), "%s", d->backend);
	snprintf(info.host, sizeof(info.host), "%s", d->host);
	membership(d, now);
	for (int n = 0; n < d->nodes; n++) {
		struct member *m = &d->mem[n];
		nodes[n].node = n;
		nodes[n].up = m->up;
		nodes[n].pid = n == d->node ? (uint32_t)getpid() : m->pid;
		nodes[n].addr = m->last_ns ? m->addr : sk_node_addr(&d->net, (unsigned)n);
		nodes[n].age_ms = n == d->node ? 0 : m->last_ns ? (int64_t)((now - m->last_ns) / 1000000u) : -1;
		memcpy(nodes[n].host, n == d->node ? d->host : m->host, sizeof(nodes[n].host));
	}
	r = reply(c, PND_STATUS, 0, (uint32_t)d->nodes, &info, sizeof(info), nodes, (size_t)d->nodes * sizeof(*nodes));
	free(nodes);
	return r;
}

static int on_procs(struct paranicd *d, struct client *c)
{
	pn_daemon_proc_t *p = calloc((size_t)d->ncl + 1, sizeof(*p));
	uint32_t n = 0;
	int r;
	if (!p)
		return refuse(d, c, PND_PROCS, -ENOMEM, "out of memory");
	for (int i = 0; i < d->ncl; i++) {
		struct client *x = d->cl[i];
		if (!x->attached || x->detached)
			continue;
		p[n].pid = (uint32_t)x->pid;
		p[n].uid = (uint32_t)x->uid;
		p[n].node = d->node;
		p[n].ctx = x->ctx;
		p[n].abi = x->abi;
		memcpy(p[n].job, x->job, sizeof(p[n].job));
		n++;
	}
	r = reply(c, PND_PROCS, 0, n, p, n * sizeof(*p), NULL, 0);
	free(p);
	return r;
}

static int job_find(struct paranicd *d, const char *id)
{
	for (int i = 0; i < d->njobs; i++)
		if (!strcmp(d->jobs[i].id, id))
			return i;
	return -1;
}

static int on_jobs(struct paranicd *d, struct client *c)
{
	for (int i = 0; i < d->njobs; i++) {
		d->jobs[i].procs = 0;
		for (int k = 0; k < d->ncl; k++)
			if (d->cl[k]->attached && !d->cl[k]->detached && !strcmp(d->cl[k]->job, d->jobs[i].id))
				d->jobs[i].procs++;
	}
	return reply(c, PND_JOBS, 0, (uint32_t)d->njobs, d->jobs, (size_t)d->njobs * sizeof(d->jobs[0]), NULL, 0);
}

static int on_job_start(struct paranicd *d, struct client *c, const pn_daemon_job_t *j)
{
	pn_daemon_job_t *n;
	struct timespec ts;
	if (!allowed(d, c))
		return refuse(d, c, PND_JOB_START, -EACCES, "uid %u is not allowed on node %d", (unsigned)c->uid,
			      d->node);
	if (!memchr(j->id, 0, sizeof(j->id)) || !j->id[0] || j->nodes < 1 || j->nodes > d->nodes || j->ppn < 1)
		return refuse(d, c, PND_JOB_START, -EINVAL, "bad job (id, nodes 1..%d, ppn >= 1)", d->nodes);
	if (job_find(d, j->id) >= 0)
		return refuse(d, c, PND_JOB_START, -EEXIST, "job %s is registered already", j->id);
	if (d->njobs >= PN_DAEMON_MAX_JOBS)
		return refuse(d, c, PND_JOB_START, -ENOSPC, "too many jobs");
	n = &d->jobs[d->njobs++];
	*n = *j;
	n->command[sizeof(n->command) - 1] = 0;
	n->uid = (uint32_t)c->uid;
	n->procs = 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	n->start_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	dlog(d, "job %s registered by uid %u: %d nodes x %d, %s", n->id, n->uid, n->nodes, n->ppn, n->command);
	return reply(c, PND_JOB_START, 0, 0, NULL, 0, NULL, 0);
}

static int on_job_end(struct paranicd *d, struct client *c, const char *id)
{
	int i = job_find(d, id);
	if (i < 0)
		return refuse(d, c, PND_JOB_END, -ENOENT, "no job %.*s", PN_DAEMON_NAME_MAX - 1, id);
	if (c->uid != 0 && c->uid != d->jobs[i].uid)
		return refuse(d, c, PND_JOB_END, -EACCES, "job %s belongs to uid %u", id, d->jobs[i].uid);
	dlog(d, "job %s ended", id);
	d->jobs[i] = d->jobs[--d->njobs];
	return reply(c, PND_JOB_END, 0, 0, NULL, 0, NULL, 0);
}

/* Handle the complete frames in c->in. -1: drop the client. */
int client_input(struct paranicd *d, struct client *c)
{
	for (;;) {
		struct pnd_frame f;
		size_t need;
		const void *pl = NULL;
		int r = 0, ok;
		/* Framing and payload checks: daemon_proto.c (fuzzed by tests/fuzz/fuzz_daemon.c). */
		long got = pnd_take_request(c->in, c->in_len, sizeof(c->in), &f, &pl);

		if (got < 0)
			return -1;
		if (got == 0)
			return 0;
		need = (size_t)got;
		ok = pnd_check_request(&f, pl) == 0;
		switch (f.type) {
		case PND_ATTACH:
			r = ok ? on_attach(d, c, pl) : refuse(d, c, f.type, -EPROTO, "bad ATTACH");
			break;
		case PND_DETACH:
			c->detached = 1;
			break;
		case PND_STATUS:
			r = on_status(d, c);
			break;
		case PND_PROCS:
			r = on_procs(d, c);
			break;
		case PND_JOBS:
			r = on_jobs(d, c);
			break;
		case PND_JOB_START:
			r = ok ? on_job_start(d, c, pl) : refuse(d, c, f.type, -EPROTO, "bad JOB_START");
			break;
		case PND_JOB_END:
			r = ok ? on_job_end(d, c, pl) : refuse(d, c, f.type, -EPROTO, "bad JOB_END");
			break;
		default:
			r = refuse(d, c, f.type, -EPROTO, "unknown request %u", f.type);
		}
		if (r < 0)
			return -1;
		c->last_ns = now_ns();
		memmove(c->in, c->in + need, c->in_len - need);
		c->in_len -= need;
	}
	return 0;
}

/* ---- connections, crash clean-up ----------------------------------------------------------------- */

void client_gone(struct paranicd *d, int i)
{
	struct client *c = d->cl[i];
	if (c->attached && !c->detached) {
		/* No DETACH: the process died (or dropped its connection). Clean up once it is gone. */
		if (d->ncu == d->cap_cu) {
			int cap = d->cap_cu ? d->cap_cu * 2 : 16;
			struct cleanup *n = realloc(d->cu, (size_t)cap * sizeof(*n));
			if (n) {
				d->cu = n;
				d->cap_cu = cap;
			}
		}
		if (d->ncu < d->cap_cu) {
			struct cleanup *u = &d->cu[d->ncu++];
			u->pid = c->pid;
			u->ctx = c->ctx;
			u->deadline = now_ns() + CLEANUP_WAIT_NS;
			memcpy(u->job, c->job, sizeof(u->job));
		}
	}
	close(c->fd);
	free(c);
	d->cl[i] = d->cl[--d->ncl];
}

void cleanups(struct paranicd *d, uint64_t now)
{
	for (int i = 0; i < d->ncu;) {
		struct cleanup *u = &d->cu[i];
		if (pn_pid_alive((uint32_t)u->pid)) {
			if (now < u->deadline) {
				i++;
				continue;
			}
			dlog(d, "pid %d dropped its connection but lives: context %d left to it", (int)u->pid, u->ctx);
		} else {
			int r;
			send_notices(d, u->ctx, u->pid);
			r = pn_hal_ctx_release(d->h, (uint32_t)u->ctx, (uint32_t)u->pid);
			d->cleanups++;
			dlog(d, "pid %d (job %s) died on context %d: %s; PEER-DEAD sent", (int)u->pid,
			     u->job[0] ? u->job : "-", u->ctx,
			     r == 0 ? "context freed"
				    : r == -ENOTSUP ? "context freed by the backend" : "context already reclaimed");
		}
		d->cu[i] = d->cu[--d->ncu];
	}
}

/* Does c count against its uid's limit (and may it be shed)? Only connections without
 * a context: an attached one holds a context and goes when its process does. */
static int sheddable(const struct client *c)
{
	return !c->attached || c->detached;
}

/* The index of uid's oldest sheddable connection (any uid's when all), or -1; *count:
 * uid's sheddable connections. */
static int oldest_of(const struct paranicd *d, uid_t uid, int any, int *count)
{
	int best = -1;
	*count = 0;
	for (int i = 0; i < d->ncl; i++) {
		const struct client *x = d->cl[i];
		if (!sheddable(x) || (!any && x->uid != uid))
			continue;
		++*count;
		if (best < 0 || x->last_ns < d->cl[best]->last_ns)
			best = i;
	}
	return best;
}

/* The table is full: the uid with the most sheddable connections gives up its oldest. */
static int busiest_oldest(const struct paranicd *d)
{
	int best = -1, best_n = 0;
	for (int i = 0; i < d->ncl; i++) {
		int n, k;
		if (!sheddable(d->cl[i]))
			continue;
		k = oldest_of(d, d->cl[i]->uid, 0, &n);
		if (n > best_n) {
			best_n = n;
			best = k;
		}
		if (best_n > MAX_CLIENTS / 2)
			break;   /* nobody else can have more */
	}
	return best;
}

static void log_shed(struct paranicd *d)
{
	uint64_t n = d->conns_shed + d->conns_idle;
	if (n != d->conns_logged && (n - d->conns_logged >= 64 || n < 64)) {
		dlog(d, "connections closed by the limits: %llu over a uid's %u, %llu idle for %u ms",
		     (unsigned long long)d->conns_shed, d->max_uid_conns, (unsigned long long)d->conns_idle, d->idle_ms);
		d->conns_logged = n;
	}
}

void accept_clients(struct paranicd *d)
{
	for (;;) {
		int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cr;
		socklen_t len = sizeof(cr);
		struct client *c;
		int n, k;
		if (fd < 0)
			break;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			close(fd);
			continue;
		}
		/* Room: a uid's connections without a context are limited (the oldest goes),
		 * so one user's idle connections never lock out another's pn_open. */
		k = oldest_of(d, cr.uid, 0, &n);
		if (n >= (int)d->max_uid_conns && k >= 0) {
			client_gone(d, k);
			d->conns_shed++;
		}
		if (d->ncl >= MAX_CLIENTS && (k = busiest_oldest(d)) >= 0) {
			client_gone(d, k);
			d->conns_shed++;
		}
		if (d->ncl >= MAX_CLIENTS || !(c = calloc(1, sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->gid = cr.gid;
		c->ctx = -1;
		c->last_ns = now_ns();
		d->cl[d->ncl++] = c;
	}
	log_shed(d);
}

void idle_clients(struct paranicd *d, uint64_t now)
{
	uint64_t limit = (uint64_t)d->idle_ms * 1000000ull;
	if (now < d->next_idle_check)
		return;
	d->next_idle_check = now + limit / 8 + 1000000ull;
	for (int i = d->ncl - 1; i >= 0; i--) {
		struct client *c = d->cl[i];
		if (!c->attached && now - c->last_ns > limit) {
			client_gone(d, i);
			d->conns_idle++;
		}
	}
	log_shed(d);
}
