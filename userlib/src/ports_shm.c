/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the intra-node path. Ports of one node (same node id, other contexts) send
 * their packets through shared memory instead of the NIC: per receiver an inbox segment
 * (created by the receiver at open), per sender -> receiver a single-producer,
 * single-consumer ring segment created by the sender and announced in the receiver's
 * inbox. Layouts and names: ports_wire.h; design: docs/ports.md "Intra-node path".
 *
 * Source authenticity: a record carries no source; the receiver takes (node, context)
 * from the ring it read, and a ring is created only by the port that holds the
 * sender context (the HAL gives each context to one process at a time) and checked
 * (node, contexts, incarnation) when mapped. Segments are created O_EXCL and 0600:
 * processes of other users cannot open them; one found under a name is mapped only
 * when it is ours (or root's) and open to nobody else (pn_trust_fd), so another user
 * cannot plant an inbox or a ring. Processes of the same user are trusted as on the
 * host (they could as well ptrace each other).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal_backend.h"   /* pn_pid_alive */
#include "ports_shm.h"
#include "ports_wire.h"
#include "pn_trust.h"

_Static_assert(PN_MAX_CONTEXTS <= 64, "the inbox has 64 sender slots");
_Static_assert((PW_SHM_RING_BYTES & (PW_SHM_RING_BYTES - 1)) == 0, "ring size is a power of two");

#define REC ((uint32_t)sizeof(struct pw_shm_rec))

struct rx_ring {
	struct pw_shm_ring *r;
	uint8_t *data;
	uint64_t size, mask, tail, head;   /* tail: ours; head: the last value read */
	uint64_t inc;                      /* the incarnation mapped (or given up) */
};

struct pn_shm {
	struct pn_shm_rxq q;               /* first: pn_shm_idle (ports_shm.h) reads it */
	char cluster[72];
	unsigned node, ctx, nctx;
	uint32_t epoch, pid, ring_seq;
	int enabled;
	struct pw_shm_inbox *in;
	size_t in_bytes;
	struct rx_ring rx[PN_MAX_CONTEXTS];
	unsigned active[PN_MAX_CONTEXTS], rr;
	int cur;                           /* context of the record pn_shm_next returned, -1 */
	uint64_t cur_bytes;
};
_Static_assert(offsetof(struct pn_shm, q) == 0, "pn_shm_idle reads the first member");

struct pn_shm_link {
	unsigned ctx;
	struct pw_shm_inbox *in;           /* the receiver's inbox */
	size_t in_bytes;
	uint32_t pid;
	struct pw_shm_ring *r;             /* our ring to it (NULL until the first record) */
	uint8_t *data;
	uint64_t size, mask, head, head0, tail;
	char name[200];
};

static size_t inbox_bytes(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	return (sizeof(struct pw_shm_inbox) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
}

static void inbox_name(char *out, size_t n, const char *cluster, unsigned node, unsigned ctx)
{
	snprintf(out, n, "/paranic-%s:n%u:c%u", cluster, node, ctx);
}

static void ring_name(char *out, size_t n, const char *cluster, unsigned node, unsigned src, unsigned dst,
		      uint64_t inc)
{
	snprintf(out, n, "/paranic-%s:n%u:c%u-c%u:%016llx", cluster, node, src, dst, (unsigned long long)inc);
}


static void *map_fd(int fd, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

/* ---- the port's own side ---------------------------------------------------------------- */

int pn_shm_open(struct pn_shm **out, const char *cluster, unsigned node, unsigned ctx, unsigned nctx,
		uint32_t epoch, int enabled)
{
	char name[160];
	struct pn_shm *s;
	int fd, e;

	*out = NULL;
	if (!cluster || strlen(cluster) >= sizeof(s->cluster) || ctx >= PN_MAX_CONTEXTS || nctx > PN_MAX_CONTEXTS)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->cluster, sizeof(s->cluster), "%s", cluster);
	s->node = node;
	s->ctx = ctx;
	s->nctx = nctx;
	s->epoch = epoch;
	s->pid = (uint32_t)getpid();
	s->enabled = enabled;
	s->cur = -1;
	s->in_bytes = inbox_bytes();
	inbox_name(name, sizeof(name), cluster, node, ctx);
	/* We hold the context (the HAL's claim): an inbox under its name is a dead port's. */
	shm_unlink(name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = -errno;
		free(s);
		return e;
	}
	if (ftruncate(fd, (off_t)s->in_bytes) < 0 || !(s->in = map_fd(fd, s->in_bytes))) {
		e = -errno;
		close(fd);
		shm_unlink(name);
		free(s);
		return e ? e : -ENOMEM;
	}
	close(fd);
	s->q.change = &s->in->change;
	s->q.seen = 0;   /* the new inbox's counter */
	s->in->version = PW_SHM_VERSION;
	s->in->node = node;
	s->in->ctx = ctx;
	s->in->nctx = nctx;
	s->in->owner_pid = s->pid;
	s->in->epoch = epoch;
	s->in->enabled = (uint32_t)(enabled != 0);
	__atomic_store_n(&s->in->magic, PW_SHM_INBOX_MAGIC, __ATOMIC_RELEASE);
	*out = s;
	return 0;
}

int pn_shm_enabled(const struct pn_shm *s)
{
	return s && s->enabled;
}

static void rx_unmap(struct rx_ring *x)
{
	if (x->r)
		munmap(x->r, PW_SHM_HDR_BYTES + x->size);
	x->r = NULL;
	x->data = NULL;
}

void pn_shm_close(struct pn_shm *s)
{
	char name[200];
	if (!s)
		return;
	if (s->in) {
		/* Peers see us gone (pid 0) before the name goes. */
		__atomic_store_n(&s->in->owner_pid, 0, __ATOMIC_RELEASE);
		for (unsigned c = 0; c < PN_MAX_CONTEXTS; c++) {
			uint64_t inc = __atomic_load_n(&s->in->inc[c], __ATOMIC_ACQUIRE);
			if (inc && inc != s->rx[c].inc) {   /* announced, never mapped: nobody else removes it */
				ring_name(name, sizeof(name), s->cluster, s->node, c, s->ctx, inc);
				shm_unlink(name);
			}
		}
		inbox_name(name, sizeof(name), s->cluster, s->node, s->ctx);
		shm_unlink(name);
		munmap(s->in, s->in_bytes);
	}
	for (unsigned c = 0; c < PN_MAX_CONTEXTS; c++)
		rx_unmap(&s->rx[c]);
	free(s);
}

/* ---- a peer as the sender sees it ------------------------------------------------------- */

int pn_shm_link_open(struct pn_shm *s, unsigned ctx, struct pn_shm_link **out)
{
	char name[160];
	struct pw_shm_inbox *in;
	struct pn_shm_link *l;
	struct stat sb;
	size_t len = inbox_bytes();
	int fd;

	*out = NULL;
	if (!s || ctx >= PN_MAX_CONTEXTS || ctx == s->ctx)
		return -EINVAL;
	inbox_name(name, sizeof(name), s->cluster, s->node, ctx);
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (pn_trust_fd(fd, &sb) < 0) {
		close(fd);
		return -EACCES;   /* planted by another user: the peer goes over the NIC */
	}
	if ((size_t)sb.st_size < len || !(in = map_fd(fd, len))) {
		close(fd);
		return -EAGAIN;   /* being created */
	}
	close(fd);
	if (__atomic_load_n(&in->magic, __ATOMIC_ACQUIRE) != PW_SHM_INBOX_MAGIC || in->version != PW_SHM_VERSION ||
	    in->node != s->node || in->ctx != ctx || !pn_pid_alive(__atomic_load_n(&in->owner_pid, __ATOMIC_ACQUIRE))) {
		munmap(in, len);
		return -EAGAIN;
	}
	if (!in->enabled || !s->enabled) {
		munmap(in, len);
		return 0;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		munmap(in, len);
		return -ENOMEM;
	}
	l->ctx = ctx;
	l->in = in;
	l->in_bytes = len;
	l->pid = in->owner_pid;
	*out = l;
	return 1;
}

uint32_t pn_shm_link_epoch(const struct pn_shm_link *l)
{
	return l->in->epoch;
}

int pn_shm_link_alive(const struct pn_shm_link *l)
{
	uint32_t pid = __atomic_load_n(&l->in->owner_pid, __ATOMIC_ACQUIRE);
	return pid == l->pid && pn_pid_alive(pid);
}

void pn_shm_link_close(struct pn_shm *s, struct pn_shm_link *l, int keep)
{
	(void)s;
	if (!l)
		return;
	if (l->r) {
		if (!keep || __atomic_load_n(&l->r->rx_mapped, __ATOMIC_ACQUIRE) || !pn_shm_link_alive(l))
			shm_unlink(l->name);
		munmap(l->r, PW_SHM_HDR_BYTES + l->size);
	}
	munmap(l->in, l->in_bytes);
	free(l);
}

static int ring_create(struct pn_shm *s, struct pn_shm_link *l)
{
	uint64_t inc = ((uint64_t)s->epoch << 32) | ++s->ring_seq;
	size_t len = PW_SHM_HDR_BYTES + PW_SHM_RING_BYTES;
	struct pw_shm_ring *r;
	int fd, e;

	ring_name(l->name, sizeof(l->name), s->cluster, s->node, s->ctx, l->ctx, inc);
	fd = shm_open(l->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0 || !(r = map_fd(fd, len))) {
		e = -errno;
		close(fd);
		shm_unlink(l->name);
		return e ? e : -ENOMEM;
	}
	close(fd);
	r->version = PW_SHM_VERSION;
	r->node = s->node;
	r->src_ctx = s->ctx;
	r->dst_ctx = l->ctx;
	r->owner_pid = s->pid;
	r->epoch = s->epoch;
	r->inc = inc;
	r->size = PW_SHM_RING_BYTES;
	__atomic_store_n(&r->magic, PW_SHM_RING_MAGIC, __ATOMIC_RELEASE);
	l->r = r;
	l->data = (uint8_t *)r + PW_SHM_HDR_BYTES;
	l->size = PW_SHM_RING_BYTES;
	l->mask = l->size - 1;
	l->head = l->head0 = l->tail = 0;
	/* Announce: the slot first, then the change count the receiver watches. */
	__atomic_store_n(&l->in->inc[s->ctx], inc, __ATOMIC_RELEASE);
	__atomic_fetch_add(&l->in->change, 1, __ATOMIC_RELEASE);
	return 0;
}

int pn_shm_begin(struct pn_shm *s, struct pn_shm_link *l)
{
	int r;
	if (!l->r && (r = ring_create(s, l)) < 0)
		return r;
	l->head0 = l->head;
	return 0;
}

static inline uint64_t rec_bytes(uint32_t len)
{
	return pw_shm_rec_bytes(len);
}

/* Bytes a record of len takes at the current head (padding to the ring's end included). */
static uint64_t need_at(const struct pn_shm_link *l, uint64_t head, uint32_t len)
{
	uint64_t rb = rec_bytes(len), pos = head & l->mask;
	return pos + rb > l->size ? rb + (l->size - pos) : rb;
}

static int fits(struct pn_shm_link *l, uint64_t need)
{
	if (l->size - (l->head - l->tail) >= need)
		return 1;
	l->tail = __atomic_load_n(&l->r->tail, __ATOMIC_ACQUIRE);
	return l->size - (l->head - l->tail) >= need;
}

int pn_shm_room(struct pn_shm_link *l, uint32_t len)
{
	if (!l->r)
		return 1;
	return fits(l, need_at(l, l->head, len));
}

void *pn_shm_put(struct pn_shm_link *l, uint64_t tag, uint32_t len, uint16_t flags)
{
	uint64_t pos = l->head & l->mask;
	struct pw_shm_rec *h;

	if (len > PW_SHM_REC_MAX || !fits(l, need_at(l, l->head, len)))
		return NULL;
	if (pos + rec_bytes(len) > l->size) {   /* pad to the end, start over at 0 */
		h = (struct pw_shm_rec *)(l->data + pos);
		h->kind = PW_SHM_WRAP;
		h->len = (uint32_t)(l->size - pos - REC);
		h->tag = 0;
		h->flags = 0;
		l->head += l->size - pos;
		pos = 0;
	}
	h = (struct pw_shm_rec *)(l->data + pos);
	h->tag = tag;
	h->len = len;
	h->flags = flags;
	h->kind = PW_SHM_PKT;
	l->head += rec_bytes(len);
	return h + 1;
}

void pn_shm_rollback(struct pn_shm_link *l)
{
	l->head = l->head0;
}

void pn_shm_publish(struct pn_shm_link *l)
{
	if (l->head != l->head0)
		__atomic_store_n(&l->r->head, l->head, __ATOMIC_RELEASE);
	l->head0 = l->head;
}

uint64_t pn_shm_backlog(const struct pn_shm_link *l)
{
	return l->r ? l->head - __atomic_load_n(&l->r->tail, __ATOMIC_ACQUIRE) : 0;
}

/* ---- receiving ------------------------------------------------------------------------- */

static void active_set(struct pn_shm *s)
{
	s->q.nactive = 0;
	for (unsigned c = 0; c < PN_MAX_CONTEXTS; c++)
		if (s->rx[c].r)
			s->active[s->q.nactive++] = c;
	s->rr = 0;
}

/* Map the rings announced since the last look (a sender's new ring replaces its old one
 * once the old one is drained: nothing it published is lost). */
static void scan(struct pn_shm *s)
{
	uint64_t ch = __atomic_load_n(&s->in->change, __ATOMIC_ACQUIRE);
	int changed = 0;
	char name[200];

	s->q.seen = ch;
	s->q.rescan = 0;
	for (unsigned c = 0; c < s->nctx && c < PN_MAX_CONTEXTS; c++) {
		struct rx_ring *x = &s->rx[c];
		uint64_t inc = __atomic_load_n(&s->in->inc[c], __ATOMIC_ACQUIRE);
		struct pw_shm_ring *r;
		struct stat sb;
		size_t len = PW_SHM_HDR_BYTES + PW_SHM_RING_BYTES;
		int fd;

		if (!inc || inc == x->inc || c == s->ctx)
			continue;
		if (x->r && (s->cur == (int)c || x->tail != __atomic_load_n(&x->r->head, __ATOMIC_ACQUIRE))) {
			s->q.rescan = 1;   /* read the old one to its end first */
			continue;
		}
		rx_unmap(x);
		changed = 1;
		x->inc = inc;
		ring_name(name, sizeof(name), s->cluster, s->node, c, s->ctx, inc);
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0)
			continue;   /* replaced or removed meanwhile: a newer announcement follows */
		if (pn_trust_fd(fd, &sb) < 0 || (size_t)sb.st_size != len || !(r = map_fd(fd, len))) {
			close(fd);
			continue;
		}
		close(fd);
		if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) != PW_SHM_RING_MAGIC || r->version != PW_SHM_VERSION ||
		    r->node != s->node || r->src_ctx != c || r->dst_ctx != s->ctx || r->inc != inc ||
		    r->size != PW_SHM_RING_BYTES) {
			munmap(r, len);
			continue;
		}
		__atomic_store_n(&r->rx_mapped, 1, __ATOMIC_RELEASE);
		shm_unlink(name);   /* mapped: the name is no longer needed */
		x->r = r;
		x->data = (uint8_t *)r + PW_SHM_HDR_BYTES;
		x->size = r->size;
		x->mask = x->size - 1;
		x->tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		x->head = x->tail;
	}
	if (changed)
		active_set(s);
}

int pn_shm_next(struct pn_shm *s, pn_header_t *hd, const void **payload)
{
	if (!s || !s->in)
		return 0;
	if (s->q.rescan || __atomic_load_n(s->q.change, __ATOMIC_ACQUIRE) != s->q.seen)
		scan(s);
	for (unsigned k = 0; k < s->q.nactive; k++) {
		unsigned i = (s->rr + k) % s->q.nactive, c = s->active[i];
		struct rx_ring *x = &s->rx[c];
		for (;;) {
			struct pw_shm_rec h;
			uint64_t adv;
			if (x->tail == x->head) {
				x->head = __atomic_load_n(&x->r->head, __ATOMIC_ACQUIRE);
				if (x->tail == x->head)
					break;
			}
			if (!pw_shm_rec_at(x->data, x->size, x->tail, &h, &adv)) {   /* WRAP */
				x->tail += adv;
				__atomic_store_n(&x->r->tail, x->tail, __ATOMIC_RELEASE);
				continue;
			}
			memset(hd, 0, sizeof(*hd));
			hd->dst_node = (uint16_t)s->node;
			hd->dst_ctx = (uint8_t)s->ctx;
			hd->src_node = (uint16_t)s->node;   /* the ring says who sent it */
			hd->src_ctx = (uint8_t)c;
			hd->type = PN_TYPE_DATA;
			hd->flags = (uint8_t)h.flags;
			hd->length = h.len;   /* clamped to the ring by pw_shm_rec_at */
			hd->tag = h.tag;
			*payload = x->data + (x->tail & x->mask) + REC;
			s->cur = (int)c;
			s->cur_bytes = adv;
			s->rr = (i + 1) % s->q.nactive;
			return 1;
		}
	}
	return 0;
}

void pn_shm_release(struct pn_shm *s)
{
	struct rx_ring *x;
	if (!s || s->cur < 0)
		return;
	x = &s->rx[s->cur];
	x->tail += s->cur_bytes;
	__atomic_store_n(&x->r->tail, x->tail, __ATOMIC_RELEASE);
	s->cur = -1;
}

int pn_shm_pending(const struct pn_shm *s, unsigned ctx)
{
	const struct rx_ring *x;
	if (!s || ctx >= PN_MAX_CONTEXTS)
		return 0;
	x = &s->rx[ctx];
	return x->r && x->tail != __atomic_load_n(&x->r->head, __ATOMIC_ACQUIRE);
}
