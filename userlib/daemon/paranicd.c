/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd: one per node. Membership, job registry, attach checks, crash clean-up
 * (docs/paranicd.md).
 *
 *   paranicd [--cluster C] [--node N] [--nodes N] [--backend sw|sim] [--socket PATH]
 *            [--allow-uid U[,U..]] [--allow-gid G[,G..]] [--host NAME]
 *            [--hello-ms MS] [--down-ms MS] [--poll-ms MS]
 *   paranicd status|procs|jobs [--socket PATH | --cluster C --node N] [--json]
 *   paranicd job-start --id ID --nodes N [--ppn P] [--command CMD] [--socket ...]
 *   paranicd job-end --id ID [--socket ...]
 *
 * The server opens its node's last context (PN_DAEMON_CTX) with the HAL, listens on a
 * UNIX socket (pn_daemon_socket_path) and runs one loop: socket clients (attach,
 * detach, queries), HELLOs to and from the other daemons over the NIC, clean-up of
 * processes whose connection dropped without DETACH (their context freed, PEER-DEAD
 * sent to every context of every node). Nothing it sends over the NIC ever waits: the
 * packets go through an outbox that is flushed while the PIO window is free.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proto.h"
#include "hal_backend.h"
#include "paranic/pn_daemon.h"
#include "ports_wire.h"
#include "sock_wire.h"

#define MAX_CLIENTS 1024
#define MAX_ALLOW 32
#define OUTBOX 8192                  /* packets (power of two) */
#define CLEANUP_WAIT_NS 3000000000ull /* a dropped connection's process must be gone by then */

struct client {
	int fd;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int attached;        /* an ATTACH was accepted on this connection */
	int detached;        /* DETACH received: a normal close */
	int32_t ctx;
	uint32_t abi;
	char job[PN_DAEMON_NAME_MAX];
	uint8_t in[sizeof(struct pnd_frame) + sizeof(pn_daemon_job_t)];
	size_t in_len;
};

struct cleanup {
	pid_t pid;
	int32_t ctx;
	uint64_t deadline;
	char job[PN_DAEMON_NAME_MAX];
};

struct member {
	uint64_t last_ns;    /* 0: never heard */
	uint32_t pid, addr, abi;
	int up;
	char host[PN_DAEMON_NAME_MAX];
};

struct outpkt {
	uint16_t node;
	uint8_t ctx;
	uint8_t len;
	uint64_t tag;
	uint8_t data[sizeof(struct pnd_hello)];
};

static struct {
	/* configuration */
	const char *cluster, *backend;
	char sock[108];
	int node, nodes;
	uid_t allow_uid[MAX_ALLOW];
	gid_t allow_gid[MAX_ALLOW];
	int n_uid, n_gid;
	unsigned hello_ms, down_ms, poll_ms;
	char host[PN_DAEMON_NAME_MAX];
	struct sk_net net;
	/* state */
	pn_hal_t *h;
	int ctx, num_ctx;
	int lfd;
	struct client *cl[MAX_CLIENTS];
	int ncl;
	struct cleanup *cu;
	int ncu, cap_cu;
	struct member *mem;
	pn_daemon_job_t jobs[PN_DAEMON_MAX_JOBS];
	int njobs;
	struct outpkt out[OUTBOX];
	uint32_t out_head, out_tail;
	uint64_t hellos_sent, hellos_recv, notices_sent, cleanups, refused, out_lost;
} D;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "paranicd[%s node %d]: ", D.cluster ? D.cluster : "?", D.node);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

static uint64_t now_ns(void)
{
	return pn_monotonic_ns();
}


/* ---- the NIC: outbox, hellos, notices ------------------------------------------------------- */

static void out_push(unsigned node, unsigned ctx, uint64_t tag, const void *data, size_t len)
{
	struct outpkt *o;
	if (D.out_tail - D.out_head >= OUTBOX) {
		D.out_lost++;
		return;
	}
	o = &D.out[D.out_tail++ & (OUTBOX - 1)];
	o->node = (uint16_t)node;
	o->ctx = (uint8_t)ctx;
	o->len = (uint8_t)len;
	o->tag = tag;
	memcpy(o->data, data, len);
}

static void out_flush(void)
{
	pn_progress(D.h);
	while (D.out_head != D.out_tail && pn_hal_pio_free(D.h)) {
		struct outpkt *o = &D.out[D.out_head++ & (OUTBOX - 1)];
		int r = pn_send_pio(D.h, o->node, o->ctx, o->tag, o->data, o->len);
		if (r < 0)
			logf_("send to %u.%u: %s", o->node, o->ctx, pn_strerror(r));
		pn_progress(D.h);
	}
}

static void send_hellos(void)
{
	struct pnd_hello hello = {.magic = PND_HELLO_MAGIC, .pid = (uint32_t)getpid(),
				  .addr = sk_node_addr(&D.net, (unsigned)D.node), .abi = PN_ABI_VERSION};
	snprintf(hello.host, sizeof(hello.host), "%s", D.host);
	for (int n = 0; n < D.nodes; n++) {
		if (n == D.node)
			continue;
		hello.seq = ++D.hellos_sent;
		out_push((unsigned)n, (unsigned)D.ctx, PND_TAG_HELLO, &hello, sizeof(hello));
	}
}

/* PEER-DEAD {node, ctx} to every other context of every node. */
static void send_notices(int32_t ctx, pid_t pid)
{
	struct pw_dead d = {.node = (uint32_t)D.node, .ctx = (uint32_t)ctx, .pid = (uint32_t)pid};
	for (int n = 0; n < D.nodes; n++)
		for (int c = 0; c < D.num_ctx; c++) {
			if (c == D.ctx || (n == D.node && c == ctx))
				continue;
			out_push((unsigned)n, (unsigned)c, PW_TAG(PW_PEER_DEAD, 0, 0), &d, sizeof(d));
			D.notices_sent++;
		}
}

static void nic_poll(uint64_t now)
{
	pn_header_t hd;
	for (int k = 0; k < 256 && pn_recv_header(D.h, &hd) > 0; k++) {
		struct pnd_hello w;
		if (hd.tag != PND_TAG_HELLO || hd.src_ctx != D.ctx || hd.src_node >= D.nodes ||
		    hd.length != sizeof(w)) {
			pn_recv_skip(D.h);
			continue;
		}
		pn_recv_body(D.h, &w, sizeof(w));
		if (w.magic != PND_HELLO_MAGIC)
			continue;
		struct member *m = &D.mem[hd.src_node];
		w.host[sizeof(w.host) - 1] = 0;
		if (m->pid != w.pid)
			logf_("node %u: daemon pid %u on %s", hd.src_node, w.pid, w.host);
		if ((w.abi >> 16) != PN_ABI_VERSION_MAJOR && m->abi != w.abi)
			logf_("node %u runs ABI %u.%u, this daemon %u.%u", hd.src_node, w.abi >> 16, w.abi & 0xffff,
			      PN_ABI_VERSION_MAJOR, PN_ABI_VERSION_MINOR);
		m->last_ns = now;
		m->pid = w.pid;
		m->addr = w.addr;
		m->abi = w.abi;
		memcpy(m->host, w.host, sizeof(m->host));
		D.hellos_recv++;
	}
}

static void membership(uint64_t now)
{
	for (int n = 0; n < D.nodes; n++) {
		struct member *m = &D.mem[n];
		int up = n == D.node || (m->last_ns && now - m->last_ns < (uint64_t)D.down_ms * 1000000ull);
		if (up != m->up)
			logf_("node %d %s", n, up ? "up" : "down");
		m->up = up;
	}
}

/* ---- clients -------------------------------------------------------------------------------- */

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

static int refuse(struct client *c, uint16_t type, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int refuse(struct client *c, uint16_t type, int err, const char *fmt, ...)
{
	char why[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	D.refused++;
	logf_("refused pid %d uid %u: %s", (int)c->pid, (unsigned)c->uid, why);
	return reply(c, type, err, 0, why, strlen(why) + 1, NULL, 0);
}

static int allowed(const struct client *c)
{
	for (int i = 0; i < D.n_uid; i++)
		if (D.allow_uid[i] == c->uid)
			return 1;
	for (int i = 0; i < D.n_gid; i++)
		if (D.allow_gid[i] == c->gid)
			return 1;
	return 0;
}

static int on_attach(struct client *c, const struct pnd_attach *a)
{
	uint32_t owner = 0;
	int r;

	if (c->attached)
		return refuse(c, PND_ATTACH, -EINVAL, "this connection has attached already");
	if (!allowed(c))
		return refuse(c, PND_ATTACH, -EACCES, "uid %u (gid %u) is not allowed on node %d", (unsigned)c->uid,
			      (unsigned)c->gid, D.node);
	if ((a->abi >> 16) != PN_ABI_VERSION_MAJOR)
		return refuse(c, PND_ATTACH, -EPROTO, "library ABI %u.%u, paranicd %u.%u: major versions differ",
			      a->abi >> 16, a->abi & 0xffff, PN_ABI_VERSION_MAJOR, PN_ABI_VERSION_MINOR);
	if (a->node != D.node || a->ctx < 0 || a->ctx >= D.num_ctx || a->ctx == D.ctx)
		return refuse(c, PND_ATTACH, -EACCES, "context %d.%d is not a user context of node %d", a->node,
			      a->ctx, D.node);
	r = pn_hal_ctx_owner(D.h, (uint32_t)a->ctx, &owner);
	if (r == 0 && owner != (uint32_t)c->pid)
		return refuse(c, PND_ATTACH, -EACCES, "context %d is owned by pid %u, not by the caller (pid %d)",
			      a->ctx, owner, (int)c->pid);
	c->attached = 1;
	c->ctx = a->ctx;
	c->abi = a->abi;
	memcpy(c->job, a->job, sizeof(c->job));
	c->job[sizeof(c->job) - 1] = 0;
	return reply(c, PND_ATTACH, 0, 0, NULL, 0, NULL, 0);
}

static int on_status(struct client *c)
{
	pn_daemon_info_t info = {.node = D.node, .nodes = D.nodes, .ctx = D.ctx, .num_ctx = D.num_ctx,
				 .pid = (uint32_t)getpid(), .abi = PN_ABI_VERSION, .hello_ms = D.hello_ms,
				 .down_ms = D.down_ms, .hellos_sent = D.hellos_sent, .hellos_recv = D.hellos_recv,
				 .notices_sent = D.notices_sent, .cleanups = D.cleanups, .refused = D.refused};
	pn_daemon_node_t *nodes = calloc((size_t)D.nodes, sizeof(*nodes));
	uint64_t now = now_ns();
	int r;

	if (!nodes)
		return refuse(c, PND_STATUS, -ENOMEM, "out of memory");
	snprintf(info.cluster, sizeof(info.cluster), "%s", D.cluster);
	snprintf(info.backend, sizeof(info.backend), "%s", D.backend);
	snprintf(info.host, sizeof(info.host), "%s", D.host);
	membership(now);
	for (int n = 0; n < D.nodes; n++) {
		struct member *m = &D.mem[n];
		nodes[n].node = n;
		nodes[n].up = m->up;
		nodes[n].pid = n == D.node ? (uint32_t)getpid() : m->pid;
		nodes[n].addr = m->last_ns ? m->addr : sk_node_addr(&D.net, (unsigned)n);
		nodes[n].age_ms = n == D.node ? 0 : m->last_ns ? (int64_t)((now - m->last_ns) / 1000000u) : -1;
		memcpy(nodes[n].host, n == D.node ? D.host : m->host, sizeof(nodes[n].host));
	}
	r = reply(c, PND_STATUS, 0, (uint32_t)D.nodes, &info, sizeof(info), nodes, (size_t)D.nodes * sizeof(*nodes));
	free(nodes);
	return r;
}

static int on_procs(struct client *c)
{
	pn_daemon_proc_t *p = calloc((size_t)D.ncl + 1, sizeof(*p));
	uint32_t n = 0;
	int r;
	if (!p)
		return refuse(c, PND_PROCS, -ENOMEM, "out of memory");
	for (int i = 0; i < D.ncl; i++) {
		struct client *x = D.cl[i];
		if (!x->attached || x->detached)
			continue;
		p[n].pid = (uint32_t)x->pid;
		p[n].uid = (uint32_t)x->uid;
		p[n].node = D.node;
		p[n].ctx = x->ctx;
		p[n].abi = x->abi;
		memcpy(p[n].job, x->job, sizeof(p[n].job));
		n++;
	}
	r = reply(c, PND_PROCS, 0, n, p, n * sizeof(*p), NULL, 0);
	free(p);
	return r;
}

static int job_find(const char *id)
{
	for (int i = 0; i < D.njobs; i++)
		if (!strcmp(D.jobs[i].id, id))
			return i;
	return -1;
}

static int on_jobs(struct client *c)
{
	for (int i = 0; i < D.njobs; i++) {
		D.jobs[i].procs = 0;
		for (int k = 0; k < D.ncl; k++)
			if (D.cl[k]->attached && !D.cl[k]->detached && !strcmp(D.cl[k]->job, D.jobs[i].id))
				D.jobs[i].procs++;
	}
	return reply(c, PND_JOBS, 0, (uint32_t)D.njobs, D.jobs, (size_t)D.njobs * sizeof(D.jobs[0]), NULL, 0);
}

static int on_job_start(struct client *c, const pn_daemon_job_t *j)
{
	pn_daemon_job_t *n;
	struct timespec ts;
	if (!allowed(c))
		return refuse(c, PND_JOB_START, -EACCES, "uid %u is not allowed on node %d", (unsigned)c->uid, D.node);
	if (!memchr(j->id, 0, sizeof(j->id)) || !j->id[0] || j->nodes < 1 || j->nodes > D.nodes || j->ppn < 1)
		return refuse(c, PND_JOB_START, -EINVAL, "bad job (id, nodes 1..%d, ppn >= 1)", D.nodes);
	if (job_find(j->id) >= 0)
		return refuse(c, PND_JOB_START, -EEXIST, "job %s is registered already", j->id);
	if (D.njobs >= PN_DAEMON_MAX_JOBS)
		return refuse(c, PND_JOB_START, -ENOSPC, "too many jobs");
	n = &D.jobs[D.njobs++];
	*n = *j;
	n->command[sizeof(n->command) - 1] = 0;
	n->uid = (uint32_t)c->uid;
	n->procs = 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	n->start_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	logf_("job %s registered by uid %u: %d nodes x %d, %s", n->id, n->uid, n->nodes, n->ppn, n->command);
	return reply(c, PND_JOB_START, 0, 0, NULL, 0, NULL, 0);
}

static int on_job_end(struct client *c, const char *id)
{
	int i = job_find(id);
	if (i < 0)
		return refuse(c, PND_JOB_END, -ENOENT, "no job %.*s", PN_DAEMON_NAME_MAX - 1, id);
	if (c->uid != 0 && c->uid != D.jobs[i].uid)
		return refuse(c, PND_JOB_END, -EACCES, "job %s belongs to uid %u", id, D.jobs[i].uid);
	logf_("job %s ended", id);
	D.jobs[i] = D.jobs[--D.njobs];
	return reply(c, PND_JOB_END, 0, 0, NULL, 0, NULL, 0);
}

/* Handle the complete frames in c->in. -1: drop the client. */
static int client_input(struct client *c)
{
	while (c->in_len >= sizeof(struct pnd_frame)) {
		struct pnd_frame f;
		size_t need;
		const uint8_t *pl;
		int r = 0;

		memcpy(&f, c->in, sizeof(f));
		if (f.magic != PND_MAGIC || f.version != PND_PROTO_VERSION ||
		    f.len > sizeof(c->in) - sizeof(f))
			return -1;
		need = sizeof(f) + f.len;
		if (c->in_len < need)
			return 0;
		pl = c->in + sizeof(f);
		switch (f.type) {
		case PND_ATTACH:
			r = f.len == sizeof(struct pnd_attach) ? on_attach(c, (const void *)pl)
							       : refuse(c, f.type, -EPROTO, "bad ATTACH");
			break;
		case PND_DETACH:
			c->detached = 1;
			break;
		case PND_STATUS:
			r = on_status(c);
			break;
		case PND_PROCS:
			r = on_procs(c);
			break;
		case PND_JOBS:
			r = on_jobs(c);
			break;
		case PND_JOB_START:
			r = f.len == sizeof(pn_daemon_job_t) ? on_job_start(c, (const void *)pl)
							      : refuse(c, f.type, -EPROTO, "bad JOB_START");
			break;
		case PND_JOB_END:
			r = f.len == PN_DAEMON_NAME_MAX && memchr(pl, 0, f.len) ? on_job_end(c, (const char *)pl)
										 : refuse(c, f.type, -EPROTO, "bad JOB_END");
			break;
		default:
			r = refuse(c, f.type, -EPROTO, "unknown request %u", f.type);
		}
		if (r < 0)
			return -1;
		memmove(c->in, c->in + need, c->in_len - need);
		c->in_len -= need;
	}
	return 0;
}

static void client_gone(int i)
{
	struct client *c = D.cl[i];
	if (c->attached && !c->detached) {
		/* No DETACH: the process died (or dropped its connection). Clean up once it is gone. */
		if (D.ncu == D.cap_cu) {
			int cap = D.cap_cu ? D.cap_cu * 2 : 16;
			struct cleanup *n = realloc(D.cu, (size_t)cap * sizeof(*n));
			if (n) {
				D.cu = n;
				D.cap_cu = cap;
			}
		}
		if (D.ncu < D.cap_cu) {
			struct cleanup *u = &D.cu[D.ncu++];
			u->pid = c->pid;
			u->ctx = c->ctx;
			u->deadline = now_ns() + CLEANUP_WAIT_NS;
			memcpy(u->job, c->job, sizeof(u->job));
		}
	}
	close(c->fd);
	free(c);
	D.cl[i] = D.cl[--D.ncl];
}

static void cleanups(uint64_t now)
{
	for (int i = 0; i < D.ncu;) {
		struct cleanup *u = &D.cu[i];
		if (pn_pid_alive((uint32_t)u->pid)) {
			if (now < u->deadline) {
				i++;
				continue;
			}
			logf_("pid %d dropped its connection but lives: context %d left to it", (int)u->pid, u->ctx);
		} else {
			int r;
			send_notices(u->ctx, u->pid);
			r = pn_hal_ctx_release(D.h, (uint32_t)u->ctx, (uint32_t)u->pid);
			D.cleanups++;
			logf_("pid %d (job %s) died on context %d: %s; PEER-DEAD sent", (int)u->pid,
			      u->job[0] ? u->job : "-", u->ctx,
			      r == 0 ? "context freed"
				     : r == -ENOTSUP ? "context freed by the backend" : "context already reclaimed");
		}
		D.cu[i] = D.cu[--D.ncu];
	}
}

static void accept_clients(void)
{
	for (;;) {
		int fd = accept4(D.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cr;
		socklen_t len = sizeof(cr);
		struct client *c;
		if (fd < 0)
			return;
		if (D.ncl >= MAX_CLIENTS || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
		    !(c = calloc(1, sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->gid = cr.gid;
		c->ctx = -1;
		D.cl[D.ncl++] = c;
	}
}

/* ---- setup ---------------------------------------------------------------------------------- */

static int parse_ids(const char *s, unsigned *ids, int *n)
{
	char *dup = strdup(s), *save = NULL;
	if (!dup)
		return -1;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long v = strtoul(t, &end, 10);
		if (*end || *n >= MAX_ALLOW) {
			free(dup);
			return -1;
		}
		ids[(*n)++] = (unsigned)v;
	}
	free(dup);
	return 0;
}

static int open_nic(void)
{
	pn_open_opts_t o;
	const char *e = getenv("PARANIC_CONTEXTS");
	int contexts = e && *e ? atoi(e) : PN_DEFAULT_CONTEXTS, r;

	setenv("PARANIC_DAEMON", "off", 1);   /* the daemon's own pn_open does not ask itself */
	for (int attempt = 0; attempt < 2; attempt++) {
		pn_open_opts_init(&o);
		o.backend = D.backend;
		o.cluster = D.cluster;
		o.node = D.node;
		o.nodes = D.nodes;
		o.ctx = PN_DAEMON_CTX(contexts);
		if ((r = pn_open(&D.h, &o)) < 0)
			return r;
		if (pn_ctx_id(D.h) == PN_DAEMON_CTX(pn_num_ctx(D.h)))
			break;
		contexts = pn_num_ctx(D.h);   /* a cluster of another shape: its last context */
		pn_close(D.h);
		D.h = NULL;
	}
	if (!D.h)
		return -EBUSY;
	D.ctx = pn_ctx_id(D.h);
	D.num_ctx = pn_num_ctx(D.h);
	D.nodes = pn_num_nodes(D.h);
	if (pn_pio_max(D.h) < (int)sizeof(struct pnd_hello))
		return -EMSGSIZE;
	return 0;
}

static int listen_socket(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(D.sock)], *slash;
	int fd, probe;

	snprintf(dir, sizeof(dir), "%s", D.sock);
	if ((slash = strrchr(dir, '/')) && slash != dir) {   /* mkdir -p of the run directory */
		*slash = 0;
		for (char *p = dir + 1;; p++) {
			if (*p == '/' || !*p) {
				char ch = *p;
				*p = 0;
				if (mkdir(dir, 0755) < 0 && errno != EEXIST)
					return -errno;
				*p = ch;
				if (!ch)
					break;
			}
		}
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", D.sock);
	/* A socket that answers belongs to a running daemon; one that does not is stale. */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(D.sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	chmod(D.sock, 0666);   /* anyone may connect; SO_PEERCRED and the allow list decide */
	return fd;
}

static int serve(void)
{
	uint64_t next_hello = 0;
	struct pollfd *pf = calloc(MAX_CLIENTS + 1, sizeof(*pf));
	int r;

	if (!pf)
		return 1;
	if ((r = open_nic()) < 0) {
		logf_("cannot open context %d of node %d: %s", PN_DAEMON_CTX(PN_DEFAULT_CONTEXTS), D.node, pn_strerror(r));
		return 1;
	}
	if (!(D.mem = calloc((size_t)D.nodes, sizeof(*D.mem)))) {
		pn_close(D.h);
		return 1;
	}
	if ((D.lfd = listen_socket()) < 0) {
		logf_("cannot listen on %s: %s", D.sock, strerror(-D.lfd));
		pn_close(D.h);
		return 1;
	}
	logf_("up: pid %d, context %d of %d, %d nodes, socket %s, host %s", (int)getpid(), D.ctx, D.num_ctx, D.nodes,
	      D.sock, D.host);
	while (!stop) {
		int np = 0;
		uint64_t now;
		pf[np++] = (struct pollfd){.fd = D.lfd, .events = POLLIN};
		for (int i = 0; i < D.ncl; i++)
			pf[np++] = (struct pollfd){.fd = D.cl[i]->fd, .events = POLLIN};
		poll(pf, (nfds_t)np, (int)D.poll_ms);
		if (pf[0].revents)
			accept_clients();
		for (int i = np - 2; i >= 0; i--) {   /* clients, backwards: client_gone moves the last */
			struct client *c;
			if (i >= D.ncl || !pf[i + 1].revents)
				continue;
			c = D.cl[i];
			if (c->fd != pf[i + 1].fd)
				continue;
			ssize_t k = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
				client_gone(i);
				continue;
			}
			if (k > 0) {
				c->in_len += (size_t)k;
				if (client_input(c) < 0)
					client_gone(i);
			}
		}
		now = now_ns();
		if (now >= next_hello) {
			send_hellos();
			next_hello = now + (uint64_t)D.hello_ms * 1000000ull;
		}
		nic_poll(now);
		membership(now);
		cleanups(now);
		out_flush();
	}
	logf_("stopping");
	close(D.lfd);
	unlink(D.sock);
	{   /* the run directory goes when it is empty (the last daemon of the cluster) */
		char dir[sizeof(D.sock)], *slash;
		snprintf(dir, sizeof(dir), "%s", D.sock);
		if ((slash = strrchr(dir, '/')) && slash != dir) {
			*slash = 0;
			rmdir(dir);
		}
	}
	for (int i = D.ncl - 1; i >= 0; i--) {
		close(D.cl[i]->fd);
		free(D.cl[i]);
	}
	pn_close(D.h);
	free(D.mem);
	free(D.cu);
	free(pf);
	return 0;
}

/* ---- client mode ---------------------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static const char *ip4(uint32_t a, char *buf)
{
	sprintf(buf, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
	return buf;
}

static int client_cmd(const char *cmd, const char *sock, int json, pn_daemon_job_t *job)
{
	int r;
	char ip[20];

	if (!strcmp(cmd, "status")) {
		pn_daemon_info_t in;
		pn_daemon_node_t *nodes = calloc(PN_MAX_NODES, sizeof(*nodes));
		if (!nodes)
			return 1;
		if ((r = pn_daemon_status(sock, &in, nodes, PN_MAX_NODES)) < 0)
			goto fail;
		if (json) {
			printf("{\"node\": %d, \"nodes\": %d, \"ctx\": %d, \"num_ctx\": %d, \"pid\": %u, \"abi\": %u, "
			       "\"hello_ms\": %u, \"down_ms\": %u, \"hellos_sent\": %llu, \"hellos_recv\": %llu, "
			       "\"notices_sent\": %llu, \"cleanups\": %llu, \"refused\": %llu, \"cluster\": ",
			       in.node, in.nodes, in.ctx, in.num_ctx, in.pid, in.abi, in.hello_ms, in.down_ms,
			       (unsigned long long)in.hellos_sent, (unsigned long long)in.hellos_recv,
			       (unsigned long long)in.notices_sent, (unsigned long long)in.cleanups,
			       (unsigned long long)in.refused);
			json_str(in.cluster);
			printf(", \"backend\": ");
			json_str(in.backend);
			printf(", \"members\": [");
			for (int i = 0; i < r && i < PN_MAX_NODES; i++) {
				printf("%s{\"node\": %d, \"state\": \"%s\", \"pid\": %u, \"addr\": \"%s\", \"age_ms\": %lld, "
				       "\"host\": ", i ? ", " : "", nodes[i].node, nodes[i].up ? "up" : "down", nodes[i].pid,
				       ip4(nodes[i].addr, ip), (long long)nodes[i].age_ms);
				json_str(nodes[i].host);
				printf("}");
			}
			printf("]}\n");
		} else {
			printf("cluster %s (%s), seen from node %d (paranicd pid %u, context %d)\n", in.cluster, in.backend,
			       in.node, in.pid, in.ctx);
			printf("%-5s %-16s %-15s %-5s %-8s %s\n", "node", "host", "address", "state", "pid", "heard");
			for (int i = 0; i < r && i < PN_MAX_NODES; i++) {
				char age[32];
				if (nodes[i].age_ms < 0)
					snprintf(age, sizeof(age), "never");
				else
					snprintf(age, sizeof(age), "%lld ms ago", (long long)nodes[i].age_ms);
				printf("%-5d %-16s %-15s %-5s %-8u %s\n", nodes[i].node, nodes[i].host[0] ? nodes[i].host : "-",
				       ip4(nodes[i].addr, ip), nodes[i].up ? "up" : "down", nodes[i].pid, age);
			}
		}
		free(nodes);
		return 0;
	fail:
		free(nodes);
	} else if (!strcmp(cmd, "procs")) {
		pn_daemon_proc_t p[PN_MAX_CONTEXTS];
		if ((r = pn_daemon_procs(sock, p, PN_MAX_CONTEXTS)) < 0)
			goto fail2;
		if (json)
			printf("[");
		else
			printf("%-5s %-4s %-8s %-6s %s\n", "node", "ctx", "pid", "uid", "job");
		for (int i = 0; i < r && i < PN_MAX_CONTEXTS; i++) {
			if (json) {
				printf("%s{\"node\": %d, \"ctx\": %d, \"pid\": %u, \"uid\": %u, \"abi\": %u, \"job\": ",
				       i ? ", " : "", p[i].node, p[i].ctx, p[i].pid, p[i].uid, p[i].abi);
				json_str(p[i].job);
				printf("}");
			} else {
				printf("%-5d %-4d %-8u %-6u %s\n", p[i].node, p[i].ctx, p[i].pid, p[i].uid,
				       p[i].job[0] ? p[i].job : "-");
			}
		}
		if (json)
			printf("]\n");
		return 0;
	} else if (!strcmp(cmd, "jobs")) {
		pn_daemon_job_t j[PN_DAEMON_MAX_JOBS];
		if ((r = pn_daemon_jobs(sock, j, PN_DAEMON_MAX_JOBS)) < 0)
			goto fail2;
		if (json)
			printf("[");
		else
			printf("%-20s %-6s %-5s %-4s %-5s %s\n", "job", "uid", "nodes", "ppn", "procs", "command");
		for (int i = 0; i < r && i < PN_DAEMON_MAX_JOBS; i++) {
			if (json) {
				printf("%s{\"id\": ", i ? ", " : "");
				json_str(j[i].id);
				printf(", \"uid\": %u, \"nodes\": %d, \"ppn\": %d, \"procs\": %d, \"start_unix_ms\": %llu, "
				       "\"command\": ",
				       j[i].uid, j[i].nodes, j[i].ppn, j[i].procs, (unsigned long long)j[i].start_unix_ms);
				json_str(j[i].command);
				printf("}");
			} else {
				printf("%-20s %-6u %-5d %-4d %-5d %s\n", j[i].id, j[i].uid, j[i].nodes, j[i].ppn, j[i].procs,
				       j[i].command);
			}
		}
		if (json)
			printf("]\n");
		return 0;
	} else if (!strcmp(cmd, "job-start")) {
		if ((r = pn_daemon_job_start(sock, job)) < 0)
			goto fail2;
		return 0;
	} else if (!strcmp(cmd, "job-end")) {
		if ((r = pn_daemon_job_end(sock, job->id)) < 0)
			goto fail2;
		return 0;
	} else {
		fprintf(stderr, "paranicd: unknown command %s\n", cmd);
		return 2;
	}
fail2:
	fprintf(stderr, "paranicd %s: %s%s%s\n", cmd, pn_strerror(r), pn_daemon_last_reason()[0] ? ": " : "",
		pn_daemon_last_reason());
	return r == -ENOTCONN ? 3 : 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: paranicd [--cluster C] [--node N] [--nodes N] [--backend sw|sim] [--socket PATH]\n"
		"                [--allow-uid U,..] [--allow-gid G,..] [--host NAME] [--hello-ms MS]\n"
		"                [--down-ms MS] [--poll-ms MS]\n"
		"       paranicd status|procs|jobs [--socket PATH | --cluster C --node N] [--json]\n"
		"       paranicd job-start --id ID --nodes N [--ppn P] [--command CMD] [--socket ...]\n"
		"       paranicd job-end --id ID [--socket ...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *cmd = NULL, *sock = NULL, *e;
	pn_daemon_job_t job = {.ppn = 1};
	int json = 0, a = 1, r;

	if (argc > 1 && argv[1][0] != '-')
		cmd = argv[a++];
	D.cluster = getenv("PARANIC_CLUSTER");
	D.backend = getenv("PARANIC_BACKEND");
	D.node = (e = getenv("PARANIC_NODE")) && *e ? atoi(e) : 0;
	D.nodes = (e = getenv("PARANIC_NODES")) && *e ? atoi(e) : 0;
	D.hello_ms = 200;
	D.down_ms = 1500;
	D.poll_ms = 5;
	for (; a < argc; a++) {
		const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
		if (!strcmp(o, "--json")) {
			json = 1;
			continue;
		}
		if (!v)
			usage();
		a++;
		if (!strcmp(o, "--cluster"))
			D.cluster = v;
		else if (!strcmp(o, "--node"))
			D.node = atoi(v);
		else if (!strcmp(o, "--nodes"))
			D.nodes = job.nodes = atoi(v);
		else if (!strcmp(o, "--backend"))
			D.backend = v;
		else if (!strcmp(o, "--socket"))
			sock = v;
		else if (!strcmp(o, "--allow-uid")) {
			if (parse_ids(v, (unsigned *)D.allow_uid, &D.n_uid) < 0)
				usage();
		} else if (!strcmp(o, "--allow-gid")) {
			if (parse_ids(v, (unsigned *)D.allow_gid, &D.n_gid) < 0)
				usage();
		} else if (!strcmp(o, "--host"))
			snprintf(D.host, sizeof(D.host), "%s", v);
		else if (!strcmp(o, "--hello-ms"))
			D.hello_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--down-ms"))
			D.down_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--poll-ms"))
			D.poll_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--id"))
			snprintf(job.id, sizeof(job.id), "%s", v);
		else if (!strcmp(o, "--ppn"))
			job.ppn = atoi(v);
		else if (!strcmp(o, "--command"))
			snprintf(job.command, sizeof(job.command), "%s", v);
		else
			usage();
	}
	if (!D.cluster || !*D.cluster)
		D.cluster = "default";
	if (!D.backend || !*D.backend)
		D.backend = "sw";
	if (D.node < 0 || D.nodes < 0 || D.hello_ms < 1 || D.down_ms <= D.hello_ms || D.poll_ms > 1000)
		usage();
	if (sock)
		snprintf(D.sock, sizeof(D.sock), "%s", sock);
	else if ((r = pn_daemon_socket_path(D.cluster, D.node, D.sock, sizeof(D.sock))) < 0) {
		fprintf(stderr, "paranicd: socket path: %s\n", strerror(-r));
		return 2;
	}
	if (cmd)
		return client_cmd(cmd, D.sock, json, &job);

	if (!D.n_uid && !D.n_gid) {   /* default: the daemon's own user and root */
		D.allow_uid[D.n_uid++] = getuid();
		if (getuid() != 0)
			D.allow_uid[D.n_uid++] = 0;
	}
	if (!D.host[0] && gethostname(D.host, sizeof(D.host) - 1) < 0)
		snprintf(D.host, sizeof(D.host), "node%d", D.node);
	e = getenv("PARANIC_SOCK_NET");
	if (sk_net_parse(e && *e ? e : SK_DEFAULT_NET, &D.net) < 0) {
		fprintf(stderr, "paranicd: bad PARANIC_SOCK_NET=%s\n", e);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	return serve();
}
