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
 * On sw and sim every node of a job runs on one host: a connector maps the target
 * node's directory and reads it (sk_dir_lookup). On a real cluster that lookup becomes
 * a request to the target node's paranicd; sk_dir_lookup is the one function to swap.
 */
#include "sock_int.h"

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
	uint16_t pad2;
	int32_t pid;
	uint32_t inst;     /* the owner's library instance: an entry of a pid that has exec'd is stale */
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
	if (fstat(fd, &st) < 0 || (st.st_size < (off_t)sizeof(*d) && (!create || ftruncate(fd, sizeof(*d)) < 0))) {
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
			if (e->proto && (!alive(e->pid) || (e->pid == (int32_t)getpid() && e->inst != my_inst())))
				e->proto = 0;   /* its owner died (or this pid exec'd since): reclaimed */
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
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++)
		if (d->e[i].proto == proto && d->e[i].port == port && d->e[i].pid == me && d->e[i].inst == my_inst())
			__atomic_store_n(&d->e[i].proto, 0, __ATOMIC_RELEASE);
	dir_unlock(d);
}

int sk_dir_lookup(unsigned node, unsigned proto, uint16_t port, unsigned *ctx, int32_t *pid)
{
	struct sk_dir *d = dir_get(node, 0);
	if (!d)
		return -ECONNREFUSED;
	for (unsigned i = 0; i < SK_DIR_ENTRIES; i++) {
		const struct sk_dirent *e = &d->e[i];
		if (__atomic_load_n(&e->proto, __ATOMIC_ACQUIRE) == proto && e->port == port) {
			int32_t p = e->pid;
			unsigned c = e->ctx;
			if (e->proto != proto || e->port != port || !alive(p))
				continue;
			*ctx = c;
			if (pid)
				*pid = p;
			return 0;
		}
	}
	return -ECONNREFUSED;
}

/* After fork the child owns none of the parent's entries; its mappings stay valid. */
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
		if (e->proto && (e->pid == me || !alive(e->pid)))
			e->proto = 0;
		live += e->proto != 0;
	}
	if (!live && !d->dead && dir_name(G.node, name, sizeof(name)) == 0) {
		d->dead = 1;
		shm_unlink(name);
	}
	dir_unlock(d);
}
