/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the per-node port directory.
 *
 * Every process of a node opens its own socket port on any free context, so a
 * connector must learn which context serves (node, protocol, port number). Each node
 * keeps a directory, a small shared-memory segment named from the cluster and the node
 * (SK_DIR_NAME_FMT, sock_wire.h): entries (protocol, port number) -> (context, owner
 * pid). A process adds an entry when a socket binds or listens on the cluster
 * (EADDRINUSE when a live process of the node has it) and removes it at close and at
 * exit; entries whose owner died are ignored and taken over. The last process of a
 * node to leave removes the segment (marking it dead first, so a process that mapped
 * it meanwhile maps a fresh one).
 *
 * The segment is 0600; one found under the name is mapped only when it is ours (or
 * root's) and open to nobody else (pn_trust_fd): another user cannot plant a directory
 * that sends our connections to their contexts. Entries are checked when read (a
 * context within PN_MAX_CONTEXTS).
 *
 * A forked child that uses a UDP socket it inherited (bound on the cluster) takes the
 * entry over (sk_dir_claim): the entry then names the child and remembers the previous
 * owner, which gets it back when the child closes the socket or dies, or takes it back
 * by using the socket itself (docs/sockets.md, "fork and exec").
 *
 * On sw and sim every node of a job runs on one host: a connector maps the target
 * node's directory and reads it (sk_dir_lookup). On a real cluster that lookup becomes
 * a request to the target node's paranicd; sk_dir_lookup is the one function to swap.
 */
#include "sock_int.h"
#include "pn_trust.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SK_DIR_MAGIC 0x52444b53u   /* "SKDR" */
#define SK_DIR_ENTRIES 1024

struct sk_dirent {
	uint16_t port;
	uint8_t proto;     /* 0: free, else SK_PROTO_TCP / SK_PROTO_UDP */
	uint8_t pad;
	uint16_t ctx;
	uint16_t prev_ctx;
	int32_t pid;
	uint32_t inst;     /* the owner's library instance: an entry of a pid that has exec'd is stale */
	int32_t prev_pid;  /* 0, or the owner it was taken over from (a UDP socket shared over fork) */
	uint32_t prev_inst;
};

struct sk_dir {
	uint32_t magic;    /* set by whoever maps it first (the segment starts zeroed) */
	uint32_t lock;     /* pid of the holder */
	uint32_t dead;     /* unlinked: map a fresh one */
	uint32_t pad;
	struct sk_dirent e[SK_DIR_ENTRIES];
};

/* Mappings of the nodes' directories (ours and the ones looked up). */
static struct sk_dir *dirs[PN_MAX_NODES];
static uint32_t inst;   /* this library instance (a new one after exec, and in a fork's child) */

static uint32_t my_inst(void)
{
	static int32_t for_pid;
	if (for_pid != getpid()) {
		for_pid = getpid();
		inst = (uint32_t)(pn_monotonic_ns() * 2654435761ull) ^ (uint32_t)for_pid;
		inst |= 1;
	}
	return inst;
}

static int dir_name(unsigned node, char *out, size_t n)
{
	const char *cl = getenv("PARANIC_CLUSTER");
	if (!cl || !*cl)
		cl = "default";
	if (strchr(cl, '/') || strlen(cl) > 64)
		return -EINVAL;
	snprintf(out, n, SK_DIR_NAME_FMT, cl, node);
	return 0;
}

static struct sk_dir *dir_map(unsigned node, int create)
{
	char name[128];
	struct stat st;
	struct sk_dir *d;
	int fd;

	if (node >= PN_MAX_NODES || dir_name(node, name, sizeof(name)) < 0)
		return NULL;
	fd = shm_open(name, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	if (fd < 0)
		return NULL;
	if (pn_trust_fd(fd, &st) < 0 ||
	    (st.st_size < (off_t)sizeof(*d) && (!create || ftruncate(fd, sizeof(*d)) < 0))) {
		REAL(close)(fd);
		return NULL;
	}
	d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REAL(close)(fd);
	if (d == MAP_FAILED)
		return NULL;
	if (!__atomic_load_n(&d->magic, __ATOMIC_ACQUIRE))
		__atomic_store_n(&d->magic, SK_DIR_MAGIC, __ATOMIC_RELEASE);
	return d;
}

static int alive(int32_t pid)
{
	return pid > 0 && (pid == getpid() || !(kill(pid, 0) < 0 && errno == ESRCH));
}

static void dir_lock(struct sk_dir *d)
{
	uint32_t me = (uint32_t)getpid(), cur;
	struct pn_backoff b = {0};
	for (;;) {
		cur = 0;
		if (__atomic_compare_exchange_n(&d->lock, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		if ((b.n & 255) == 255 && !alive((int32_t)cur) &&
		    __atomic_compare_exchange_n(&d->lock, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		pn_backoff_step(&b);
	}
}

static void dir_unlock(struct sk_dir *d)
{
	__atomic_store_n(&d->lock, 0, __ATOMIC_RELEASE);
}

static int live_owner(int32_t pid, uint32_t in)
{
	return alive(pid) && !(pid == (int32_t)getpid() && in != my_inst());
}

/* Under the lock: an owner that died (or exec'd since) gives the entry back to the
 * previous owner, if that one lives, else the entry is free; a dead previous owner is
 * forgotten. */
static void ent_fix(struct sk_dirent *e)
{
	if (!e->proto)
		return;
	if (e->prev_pid && !live_owner(e->prev_pid, e->prev_inst))
		e->prev_pid = 0;
	if (live_owner(e->pid, e->inst))
		return;
	if (!e->prev_pid) {
		__atomic_store_n(&e->proto, 0, __ATOMIC_RELEASE);
		return;
	}
	e->ctx = e->prev_ctx;
	e->inst = e->prev_inst;
	__atomic_store_n(&e->pid, e->prev_pid, __ATOMIC_RELEASE);
	e->prev_pid = 0;
}

/* Under the lock: this process lets go of the entry (close, exit). */
static void ent_release(struct sk_dirent *e, int32_t me)
{
	if (!e->proto)
		return;
	if (e->prev_pid == me)
		e->prev_pid = 0;
	if (e->pid != me)
		return;
	e->pid = 0;   /* not alive: the previous owner, if any, has it again */
	ent_fix(e);
}

/* A live mapping of node's directory (a fresh one when the mapped one was removed). */
static struct sk_dir *dir_get(unsigned node, int create)
{
	struct sk_dir *d = node < PN_MAX_NODES ? dirs[node] : NULL;
	if (d && __atomic_load_n(&d->dead, __ATOMIC_ACQUIRE)) {
		munmap(d, sizeof(*d));
		dirs[node] = d = NULL;
	}
	if (!d && node < PN_MAX_NODES)
		dirs[node] = d = dir_map(node, create);
	return d;
}

int sk_dir_add(unsigned proto, uint16_t port, unsigned ctx)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct sk_dir *d = dir_get(G.node, 1);
		struct sk_dirent *freee = NULL;
		int r = 0;
		if (!d)
			return -ENOMEM;
		dir_lock(d);
		if (d->dead) {   /* removed under us: map the new one */
			dir_unlock(d);
			continue;
		}
		for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
			struct sk_dirent *e = &d->e[i];
			ent_fix(e);   /* its owner died (or this pid exec'd since): reclaimed */
			if (!e->proto) {
				if (!freee)
					freee = e;
				continue;
			}
			if (e->proto == proto && e->port == port) {
				r = e->pid == (int32_t)getpid() ? 1 : -EADDRINUSE;   /* 1: ours already */
				break;
			}
		}
		if (r == 1) {
			dir_unlock(d);
			return 1;
		}
		if (!r && !freee)
			r = -ENOBUFS;
		if (!r) {
			freee->port = port;
			freee->ctx = (uint16_t)ctx;
			freee->pid = (int32_t)getpid();
			freee->inst = my_inst();
			freee->prev_pid = 0;
			__atomic_store_n(&freee->proto, (uint8_t)proto, __ATOMIC_RELEASE);
		}
		dir_unlock(d);
		return r;
	}
	return -EAGAIN;
}

void sk_dir_del(unsigned proto, uint16_t port)
{
	struct sk_dir *d = dir_get(G.node, 0);
	int32_t me = (int32_t)getpid();
	if (!d)
		return;
	dir_lock(d);
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
		struct sk_dirent *e = &d->e[i];
		if (e->proto == proto && e->port == port &&
		    ((e->pid == me && e->inst == my_inst()) || (e->prev_pid == me && e->prev_inst == my_inst())))
			ent_release(e, me);
	}
	dir_unlock(d);
}

/* Make this process the owner of (proto, port) on its node, the live owner it takes it
 * from becoming the entry's previous owner (an inherited UDP socket, docs/sockets.md).
 * *slot: a hint where the entry is (checked without the lock: ours already is the
 * common case). 1: taken over from another live process, 0: ours already (or added
 * afresh), negative errno. */
int sk_dir_claim(unsigned proto, uint16_t port, unsigned ctx, int *slot)
{
	int32_t me = (int32_t)getpid();
	struct sk_dir *d = dir_get(G.node, 1);
	struct sk_dirent *e, *freee = NULL;
	int r = 0;

	if (!d)
		return -ENOMEM;
	if (*slot >= 0 && *slot < SK_DIR_ENTRIES) {
		e = &d->e[*slot];
		if (__atomic_load_n(&e->proto, __ATOMIC_ACQUIRE) == proto && e->port == port &&
		    __atomic_load_n(&e->pid, __ATOMIC_ACQUIRE) == me && e->inst == my_inst() && !d->dead)
			return 0;
	}
	dir_lock(d);
	if (d->dead) {   /* removed under us: add to the new one */
		dir_unlock(d);
		r = sk_dir_add(proto, port, ctx);
		return r < 0 ? r : 0;
	}
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
		e = &d->e[i];
		ent_fix(e);
		if (!e->proto) {
			if (!freee)
				freee = e;
			continue;
		}
		if (e->proto != proto || e->port != port)
			continue;
		*slot = (int)i;
		if (e->pid == me && e->inst == my_inst()) {
			dir_unlock(d);
			return 0;
		}
		e->prev_pid = e->pid;   /* live (ent_fix) */
		e->prev_inst = e->inst;
		e->prev_ctx = e->ctx;
		e->ctx = (uint16_t)ctx;
		e->inst = my_inst();
		__atomic_store_n(&e->pid, me, __ATOMIC_RELEASE);
		dir_unlock(d);
		return 1;
	}
	if (!freee) {
		r = -ENOBUFS;
	} else {   /* nobody has it any more (the owner closed it or died): ours */
		*slot = (int)(freee - d->e);
		freee->port = port;
		freee->ctx = (uint16_t)ctx;
		freee->pid = me;
		freee->inst = my_inst();
		freee->prev_pid = 0;
		__atomic_store_n(&freee->proto, (uint8_t)proto, __ATOMIC_RELEASE);
	}
	dir_unlock(d);
	return r;
}

int sk_dir_lookup(unsigned node, unsigned proto, uint16_t port, unsigned *ctx, int32_t *pid)
{
	struct sk_dir *d = dir_get(node, 0);
	if (!d)
		return -ECONNREFUSED;
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
		const struct sk_dirent *e = &d->e[i];
		if (__atomic_load_n(&e->proto, __ATOMIC_ACQUIRE) == proto && e->port == port) {
			int32_t p = __atomic_load_n(&e->pid, __ATOMIC_ACQUIRE), pp = e->prev_pid;
			unsigned c = e->ctx, pc = e->prev_ctx;
			if (e->proto != proto || e->port != port || c >= PN_MAX_CONTEXTS || pc >= PN_MAX_CONTEXTS)
				continue;
			if (!alive(p)) {   /* the owner died: the one it took the entry from, if alive */
				if (!pp || !alive(pp))
					continue;
				p = pp;
				c = pc;
			}
			*ctx = c;
			if (pid)
				*pid = p;
			return 0;
		}
	}
	return -ECONNREFUSED;
}

/* At exit: this process's entries are freed (or given back to their previous owners). */
void sk_dir_fini(void)
{
	struct sk_dir *d = dir_get(G.node, 0);
	int32_t me = (int32_t)getpid();
	int live = 0;
	char name[128];

	if (!d)
		return;
	dir_lock(d);
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
		struct sk_dirent *e = &d->e[i];
		ent_release(e, me);
		ent_fix(e);
		live += e->proto != 0;
	}
	if (!live && !d->dead && dir_name(G.node, name, sizeof(name)) == 0) {
		d->dead = 1;
		shm_unlink(name);
	}
	dir_unlock(d);
}
