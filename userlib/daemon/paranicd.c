/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd: one per node. Membership, job registry, attach checks, crash clean-up
 * (docs/paranicd.md).
 *
 *   paranicd [--cluster C] [--node N] [--nodes N] [--backend sw|sim] [--socket PATH]
 *            [--allow-uid U[,U..]] [--allow-gid G[,G..]] [--host NAME]
 *            [--hello-ms MS] [--down-ms MS] [--poll-ms MS] [--max-uid-conns N] [--idle-ms MS]
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
 *
 * This file: the command line, the set-up (the NIC context, the UNIX socket) and the
 * loop. The NIC side is in paranicd_nic.c, the socket clients in paranicd_clients.c,
 * the client commands in paranicd_cli.c (paranicd.h lists them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "paranicd.h"
#include "pn_trust.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

void dlog(const struct paranicd *d, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "paranicd[%s node %d]: ", d->cluster ? d->cluster : "?", d->node);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
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

static int open_nic(struct paranicd *d)
{
	pn_open_opts_t o;
	const char *e = getenv("PARANIC_CONTEXTS");
	int contexts = e && *e ? atoi(e) : PN_DEFAULT_CONTEXTS, r;

	setenv("PARANIC_DAEMON", "off", 1);   /* the daemon's own pn_open does not ask itself */
	for (int attempt = 0; attempt < 2; attempt++) {
		pn_open_opts_init(&o);
		o.backend = d->backend;
		o.cluster = d->cluster;
		o.node = d->node;
		o.nodes = d->nodes;
		o.ctx = PN_DAEMON_CTX(contexts);
		if ((r = pn_open(&d->h, &o)) < 0)
			return r;
		if (pn_ctx_id(d->h) == PN_DAEMON_CTX(pn_num_ctx(d->h)))
			break;
		contexts = pn_num_ctx(d->h);   /* a cluster of another shape: its last context */
		pn_close(d->h);
		d->h = NULL;
	}
	if (!d->h)
		return -EBUSY;
	d->ctx = pn_ctx_id(d->h);
	d->num_ctx = pn_num_ctx(d->h);
	d->nodes = pn_num_nodes(d->h);
	if (pn_pio_max(d->h) < (int)sizeof(struct pnd_hello))
		return -EMSGSIZE;
	return 0;
}

static int listen_socket(struct paranicd *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(d->sock)], *slash;
	int fd, probe, r;

	snprintf(dir, sizeof(dir), "%s", d->sock);
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
		/* The run directory holds the socket pn_open trusts: one another user made (or
		 * can write into, or a symlink) is never used (docs/paranicd.md, "Run directory"). */
		if ((r = pn_trust_dir(dir)) < 0) {
			dlog(d, "run directory %s is %s: refusing to use it", dir,
			     r == -ELOOP ? "a symbolic link" : r == -ENOTDIR ? "not a directory"
				: "another user's or writable by others");
			return r == -EACCES ? -EPERM : r;
		}
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	/* A socket that answers belongs to a running daemon; one that does not is stale. */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(d->sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	chmod(d->sock, 0666);   /* anyone may connect; SO_PEERCRED and the allow list decide */
	return fd;
}

static int serve(struct paranicd *d)
{
	uint64_t next_hello = 0;
	struct pollfd *pf = calloc(MAX_CLIENTS + 1, sizeof(*pf));
	int r;

	if (!pf)
		return 1;
	if ((r = open_nic(d)) < 0) {
		dlog(d, "cannot open context %d of node %d: %s", PN_DAEMON_CTX(PN_DEFAULT_CONTEXTS), d->node,
		     pn_strerror(r));
		return 1;
	}
	if (!(d->mem = calloc((size_t)d->nodes, sizeof(*d->mem)))) {
		pn_close(d->h);
		return 1;
	}
	if ((d->lfd = listen_socket(d)) < 0) {
		dlog(d, "cannot listen on %s: %s", d->sock, strerror(-d->lfd));
		pn_close(d->h);
		return 1;
	}
	dlog(d, "up: pid %d, context %d of %d, %d nodes, socket %s, host %s", (int)getpid(), d->ctx, d->num_ctx,
	     d->nodes, d->sock, d->host);
	while (!stop) {
		int np = 0;
		uint64_t now;
		pf[np++] = (struct pollfd){.fd = d->lfd, .events = POLLIN};
		for (int i = 0; i < d->ncl; i++)
			pf[np++] = (struct pollfd){.fd = d->cl[i]->fd, .events = POLLIN};
		poll(pf, (nfds_t)np, (int)d->poll_ms);
		if (pf[0].revents)
			accept_clients(d);
		for (int i = np - 2; i >= 0; i--) {   /* clients, backwards: client_gone moves the last */
			struct client *c;
			if (i >= d->ncl || !pf[i + 1].revents)
				continue;
			c = d->cl[i];
			if (c->fd != pf[i + 1].fd)
				continue;
			ssize_t k = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
				client_gone(d, i);
				continue;
			}
			if (k > 0) {
				c->in_len += (size_t)k;
				if (client_input(d, c) < 0)
					client_gone(d, i);
			}
		}
		now = now_ns();
		if (now >= next_hello) {
			send_hellos(d);
			next_hello = now + (uint64_t)d->hello_ms * 1000000ull;
		}
		idle_clients(d, now);
		nic_poll(d, now);
		membership(d, now);
		cleanups(d, now);
		out_flush(d);
	}
	dlog(d, "stopping");
	close(d->lfd);
	unlink(d->sock);
	{   /* the run directory goes when it is empty (the last daemon of the cluster) */
		char dir[sizeof(d->sock)], *slash;
		snprintf(dir, sizeof(dir), "%s", d->sock);
		if ((slash = strrchr(dir, '/')) && slash != dir) {
			*slash = 0;
			rmdir(dir);
		}
	}
	for (int i = d->ncl - 1; i >= 0; i--) {
		close(d->cl[i]->fd);
		free(d->cl[i]);
	}
	pn_close(d->h);
	free(d->mem);
	free(d->cu);
	free(pf);
	return 0;
}

/* ---- command line -------------------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: paranicd [--cluster C] [--node N] [--nodes N] [--backend sw|sim] [--socket PATH]\n"
		"                [--allow-uid U,..] [--allow-gid G,..] [--host NAME] [--hello-ms MS]\n"
		"                [--down-ms MS] [--poll-ms MS] [--max-uid-conns N] [--idle-ms MS]\n"
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
	static struct paranicd daemon_state;   /* large (the outbox): not on the stack */
	struct paranicd *d = &daemon_state;

	if (argc > 1 && argv[1][0] != '-')
		cmd = argv[a++];
	d->cluster = getenv("PARANIC_CLUSTER");
	d->backend = getenv("PARANIC_BACKEND");
	d->node = (e = getenv("PARANIC_NODE")) && *e ? atoi(e) : 0;
	d->nodes = (e = getenv("PARANIC_NODES")) && *e ? atoi(e) : 0;
	d->hello_ms = 200;
	d->down_ms = 1500;
	d->poll_ms = 5;
	d->max_uid_conns = DEFAULT_UID_CONNS;
	d->idle_ms = DEFAULT_IDLE_MS;
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
			d->cluster = v;
		else if (!strcmp(o, "--node"))
			d->node = atoi(v);
		else if (!strcmp(o, "--nodes"))
			d->nodes = job.nodes = atoi(v);
		else if (!strcmp(o, "--backend"))
			d->backend = v;
		else if (!strcmp(o, "--socket"))
			sock = v;
		else if (!strcmp(o, "--allow-uid")) {
			if (parse_ids(v, (unsigned *)d->allow_uid, &d->n_uid) < 0)
				usage();
		} else if (!strcmp(o, "--allow-gid")) {
			if (parse_ids(v, (unsigned *)d->allow_gid, &d->n_gid) < 0)
				usage();
		} else if (!strcmp(o, "--host"))
			snprintf(d->host, sizeof(d->host), "%s", v);
		else if (!strcmp(o, "--hello-ms"))
			d->hello_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--down-ms"))
			d->down_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--poll-ms"))
			d->poll_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--max-uid-conns"))
			d->max_uid_conns = (unsigned)atoi(v);
		else if (!strcmp(o, "--idle-ms"))
			d->idle_ms = (unsigned)atoi(v);
		else if (!strcmp(o, "--id"))
			snprintf(job.id, sizeof(job.id), "%s", v);
		else if (!strcmp(o, "--ppn"))
			job.ppn = atoi(v);
		else if (!strcmp(o, "--command"))
			snprintf(job.command, sizeof(job.command), "%s", v);
		else
			usage();
	}
	if (!d->cluster || !*d->cluster)
		d->cluster = "default";
	if (!d->backend || !*d->backend)
		d->backend = "sw";
	if (d->node < 0 || d->nodes < 0 || d->hello_ms < 1 || d->down_ms <= d->hello_ms || d->poll_ms > 1000 ||
	    d->max_uid_conns < 1 || d->max_uid_conns > MAX_CLIENTS || d->idle_ms < 10 || d->idle_ms > 3600000)
		usage();
	if (sock)
		snprintf(d->sock, sizeof(d->sock), "%s", sock);
	else if ((r = pn_daemon_socket_path(d->cluster, d->node, d->sock, sizeof(d->sock))) < 0) {
		fprintf(stderr, "paranicd: socket path: %s\n", strerror(-r));
		return 2;
	}
	if (cmd)
		return client_cmd(cmd, d->sock, json, &job);

	if (!d->n_uid && !d->n_gid) {   /* default: the daemon's own user and root */
		d->allow_uid[d->n_uid++] = getuid();
		if (getuid() != 0)
			d->allow_uid[d->n_uid++] = 0;
	}
	if (!d->host[0] && gethostname(d->host, sizeof(d->host) - 1) < 0)
		snprintf(d->host, sizeof(d->host), "node%d", d->node);
	e = getenv("PARANIC_SOCK_NET");
	if (sk_net_parse(e && *e ? e : SK_DEFAULT_NET, &d->net) < 0) {
		fprintf(stderr, "paranicd: bad PARANIC_SOCK_NET=%s\n", e);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	return serve(d);
}
