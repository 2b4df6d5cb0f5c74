/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: TCP connections shared over fork (docs/sockets.md, "fork").
 *
 * A connection lives in one process's port, but a kernel socket inherited over fork is
 * one socket in two processes: accept-then-fork servers (socat's fork mode, sshd, inetd
 * style servers) accept in the parent and serve in the child. So a fork hands every open
 * connection over to whichever process uses it first:
 *
 *  1. Before the fork (the prepare handler) the parent sends PAUSE to each connection's
 *     peer. The peer's library (whatever call it is in) stops writing on it and answers
 *     PAUSED behind the data it had sent; the parent takes that data in (staged copies,
 *     which the child inherits with its memory) and waits until its own sends in flight
 *     are done: nothing of the connection is in flight at the fork. A peer that does not
 *     answer within PARANIC_SOCK_FORK_WAIT_MS leaves the connection the parent's (the
 *     child's copy is unusable, EBADF, as before); its late PAUSED is answered RESUME.
 *  2. Parent and child then hold it, recorded in a shared page (struct sk_fslot): which
 *     pid took it (none yet) and the pids that hold an fd of it.
 *  3. The first process to read, write, poll it ... (sk_tcp_claim) takes it: a child
 *     opens a port of its own, gives the connection a channel there and sends RESUME
 *     (its node, context, connection id, pid) to the peer, which writes there from then
 *     on; the parent taking it back sends RESUME with its own. The other holders' copies
 *     become unusable (EBADF) at their next use.
 *  4. Closing an fd of it before anyone took it only lets go of it, unless this was the
 *     last holder alive: then it takes it and closes it (RESUME, CLOSE), so the peer
 *     sees EOF when the last process closes, as with the kernel.
 */
#include "sock_tcp.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SK_FS_HOLDERS 60

/* Shared by the processes that hold a connection since a fork (MAP_SHARED, anonymous). */
struct sk_fslot {
	int32_t owner;                    /* the pid that took it over; 0: nobody yet */
	int32_t held;                     /* fds' processes that have not let go */
	int32_t holders[SK_FS_HOLDERS];   /* their pids (a dead one does not count) */
};

/* A process that holds it: its pid in the list (the count is raised by the fork's
 * prepare handler, before the child exists, so a parent closing at once is not last). */
static void fs_register(struct sk_fslot *f, int32_t pid)
{
	for (int i = 0; i < SK_FS_HOLDERS; i++) {
		int32_t z = 0;
		if (__atomic_compare_exchange_n(&f->holders[i], &z, pid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return;
	}
}

/* Let go; 1 when no other process holds it any more: none left, or the others all
 * registered and dead. */
static int fs_unhold(struct sk_fslot *f, int32_t pid)
{
	int left = __atomic_sub_fetch(&f->held, 1, __ATOMIC_ACQ_REL), reg = 0, alive = 0;
	for (int i = 0; i < SK_FS_HOLDERS; i++) {
		int32_t p = __atomic_load_n(&f->holders[i], __ATOMIC_ACQUIRE);
		if (p == pid) {
			__atomic_compare_exchange_n(&f->holders[i], &p, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		} else if (p > 0) {
			reg++;
			alive += pn_pid_alive((uint32_t)p) != 0;
		}
	}
	return left <= 0 || (!alive && reg >= left);
}

static void send_move(struct conn *c, unsigned kind)
{
	struct sk_move *m = calloc(1, sizeof(*m));
	if (!m)
		return;
	m->magic = SK_WIRE_MAGIC;
	m->conn = c->id;
	m->pid = (int32_t)getpid();
	memcpy(m->boot, G.boot, sizeof(G.boot));
	sk_detached_send(c->peer_node, c->peer_ctx, SK_CHAN_CTL, SK_TAG(kind, c->peer_id), m, sizeof(*m));
}

/* Our connection goes on here (the parent's late PAUSED, or a takeover). */
static void resume_here(struct conn *c)
{
	c->pausing = 0;
	send_move(c, SK_T_RESUME);
}

void sk_tcp_paused_msg(struct conn *c)
{
	if (G.forking && c->pausing)
		c->pause_acked = 1;
	else if (!c->fs)
		resume_here(c);   /* the fork did not wait for it: the connection stays ours */
}

static int pausable(const struct conn *c)
{
	return c->sk && !c->closed && c->state == CS_OPEN && !c->error && !c->reading && !c->fs && !c->paused;
}

/* Before fork, in the parent: pause every open connection, take in what the peers had
 * sent, finish our sends; the ones that made it are shared (c->fs) with the child. */
void sk_tcp_fork_prepare(void)
{
	struct pn_backoff b = {0};
	uint64_t t0;
	int n = 0;

	/* connections shared since an earlier fork and still held here: the child holds them too */
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (s && s->type == SK_CONN && s->c && s->c->fs && !s->stale && s->c->sk == s) {
			__atomic_add_fetch(&s->c->fs->held, 1, __ATOMIC_ACQ_REL);
			s->c->sk = NULL;   /* once per socket (dups share it) */
		}
	}
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (s && s->type == SK_CONN && s->c && s->c->fs)
			s->c->sk = s;
	}
	if (!G.port)
		return;
	for (struct conn *c = G.conns; c; c = c->next)
		if (pausable(c)) {
			c->pausing = 1;
			c->pause_acked = 0;
			send_move(c, SK_T_PAUSE);
			n++;
		}
	if (!n)
		return;
	G.forking = 1;
	t0 = pn_monotonic_ns();
	for (;;) {
		int todo = 0;
		sk_service(1);
		for (struct conn *c = G.conns; c; c = c->next) {
			if (!c->pausing)
				continue;
			sk_conn_reap(c);
			for (int i = 0; i < 64 && !c->pause_acked && !c->error; i++) {
				int got;
				sk_conn_poll_msg(c, NULL, 0, &got);   /* data is staged: the child gets a copy */
				if (!got)
					break;
			}
			todo |= !c->error && (!c->pause_acked || c->ph);
		}
		if (!todo || pn_monotonic_ns() - t0 >= G.fork_wait_ns)
			break;
		sk_pause(&b);
	}
	G.forking = 0;
	for (struct conn *c = G.conns; c; c = c->next) {
		struct sk_fslot *f;
		if (!c->pausing)
			continue;
		if (!c->pause_acked)
			continue;   /* still pausing: its PAUSED, when it comes, resumes it here */
		if (c->ph || c->error ||
		    (f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED) {
			if (!c->error)
				resume_here(c);
			continue;
		}
		memset(f, 0, sizeof(*f));
		f->held = 2;   /* this process and the child to be */
		fs_register(f, (int32_t)getpid());
		c->fs = f;
		c->pausing = 0;
		G.stat[SK_ST_FORK_PAUSED]++;
		if (G.debug)
			sk_warn("connection %08x paused for a fork: shared with the child", c->id);
	}
}

/* In the child: it holds the shared connections too (the others are stale: sock_fork.c). */
void sk_tcp_fork_child(void)
{
	int32_t me = (int32_t)getpid();
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (s && s->type == SK_CONN && s->c && s->c->fs && !s->stale && s->c->sk == s) {
			fs_register(s->c->fs, me);
			s->c->sk = NULL;   /* once per socket (dups share it) */
		}
	}
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (s && s->type == SK_CONN && s->c && s->c->fs)
			s->c->sk = s;
	}
}

/* This process's copy of a connection another process goes on with: forgotten, no
 * message (the parent's: out of its list, its channel free). */
static void forget(struct sock *s)
{
	struct conn *c = s->c;
	munmap(c->fs, sizeof(struct sk_fslot));
	c->fs = NULL;
	if (c->home_pid == (int32_t)getpid() && G.port)
		sk_conn_unlink(c);
	while (c->sh) {
		struct chunk *k = c->sh;
		c->sh = k->next;
		free(k);
	}
	free(c);
	s->c = NULL;
}

/* Take s's connection over; held: this process still counts among the holders. */
static int claim(struct sock *s, int held)
{
	struct conn *c = s->c;
	struct sk_fslot *f = c ? c->fs : NULL;
	int32_t me = (int32_t)getpid(), z = 0;
	int moved;

	if (!f)
		return 0;
	if (!__atomic_compare_exchange_n(&f->owner, &z, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && z != me) {
		if (held)
			fs_unhold(f, me);
		forget(s);
		s->stale = 1;
		G.stat[SK_ST_FORK_STALE]++;
		return -EBADF;   /* another process took it */
	}
	moved = c->home_pid != me;
	if (moved && (!sk_port() || sk_conn_adopt(c) < 0)) {
		__atomic_store_n(&f->owner, 0, __ATOMIC_RELEASE);   /* could not: leave it to the others */
		if (held)
			fs_unhold(f, me);
		forget(s);
		s->stale = 1;
		G.stat[SK_ST_FORK_STALE]++;
		return -EBADF;
	}
	resume_here(c);
	if (held)
		fs_unhold(f, me);
	munmap(f, sizeof(*f));
	c->fs = NULL;
	if (moved)
		G.stat[SK_ST_FORK_MOVED]++;
	if (G.debug)
		sk_warn("connection %08x taken over after a fork%s", c->id, moved ? " (moved to this process's port)" : "");
	return 0;
}

int sk_tcp_claim(struct sock *s)
{
	return claim(s, 1);
}

int sk_tcp_release(struct sock *s)
{
	struct conn *c = s->c;
	struct sk_fslot *f = c ? c->fs : NULL;
	if (!f)
		return 0;
	if (fs_unhold(f, (int32_t)getpid()) && __atomic_load_n(&f->owner, __ATOMIC_ACQUIRE) == 0)
		return claim(s, 0) == 0 ? 0 : 1;   /* the last: take it, then close it as usual */
	forget(s);
	return 1;
}

void sk_tcp_fork_exit(void)
{
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (s && s->type == SK_CONN && s->c && s->c->fs && !s->stale && sk_tcp_release(s) == 1)
			s->stale = 1;
	}
}

/* The next well-formed control message of `kind` (SK_T_RESUME, SK_T_PAUSE) into *m and
 * *st: 1, or 0 when none is waiting; malformed ones are taken and skipped. */
static int recv_move(unsigned kind, struct sk_move *m, pn_port_status_t *st)
{
	for (;;) {
		struct sk_move buf;
		int r = pn_port_recv(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(kind, 0), SK_KIND_MASK,
				     &buf, sizeof(buf), st, 0);
		if (r < 0)
			return 0;
		if (sk_parse_move(&buf, (size_t)r, m) == 0)
			return 1;
	}
}

/* PAUSE and RESUME from peers that fork (or took a connection over); at most 64 of each
 * per call. */
void sk_tcp_fork_ctl(uint64_t now)
{
	struct sk_move m;
	pn_port_status_t st;

	/* RESUMEs first: a process that took a connection over pauses it only after its RESUME */
	for (int i = 0; i < 64 && recv_move(SK_T_RESUME, &m, &st); i++) {
		struct conn *c = sk_conn_find((uint32_t)st.tag);
		if (!c || c->peer_node != (unsigned)st.src_node)
			continue;
		c->peer_ctx = (unsigned)st.src_ctx;
		c->peer_id = m.conn;
		c->peer_pid = m.pid;
		c->pid_ok = G.local_pids && !memcmp(m.boot, G.boot, sizeof(G.boot));
		c->paused = 0;
		c->moves++;
		c->live_at = now + SK_LIVE_NS;
		c->dead_at = 0;
		if (G.debug)
			sk_warn("connection %08x: the peer goes on from context %u (pid %d)", c->id, c->peer_ctx, (int)m.pid);
		if (c->defer_fin && !c->error)
			sk_conn_isend(c, SK_T_FIN, NULL, 0, NULL);
		if (c->defer_close && !c->error)
			sk_conn_isend(c, SK_T_CLOSE, NULL, 0, NULL);
		c->defer_fin = c->defer_close = 0;
	}
	for (int i = 0; i < 64 && recv_move(SK_T_PAUSE, &m, &st); i++) {
		struct conn *c = sk_conn_find((uint32_t)st.tag);
		if (c && c->peer_node == (unsigned)st.src_node && c->peer_ctx == (unsigned)st.src_ctx && !c->error &&
		    (c->state == CS_OPEN || c->state == CS_CONNECTING)) {
			c->paused = 1;   /* nothing more is written until RESUME */
			/* connecting: the listener accepted and forks before its ACK was taken here;
			 * nothing was sent yet, so the answer needs no order */
			if (c->state == CS_OPEN && sk_conn_isend(c, SK_T_PAUSED, NULL, 0, NULL) == 0)
				continue;
		}
		/* gone or broken here: answer anyway, so the fork does not wait */
		sk_detached_send((unsigned)st.src_node, (unsigned)st.src_ctx, (int)(m.conn & 0xffff),
				 SK_TAG(SK_T_PAUSED, m.conn), NULL, 0);
	}
}
