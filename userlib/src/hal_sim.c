/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The `sim` backend: one hardware context of the Verilator cluster simulator
 * (paranic-sim, sim/), attached over its UNIX socket.
 *
 * The process's "host memory" is a memfd it shares with the simulator's harness:
 * a control block and MMIO queue, the status block, the RX ring, the TX ring and a
 * heap for DMA buffers. The harness maps it into the node's DMA address space
 * (PN_SIM_DMA_BASE(ctx)), programs the context through the NIC's CSRs and answers
 * with the context id and the cluster's shape. Doorbells, PIO window stores and
 * register loads go through a lock-free single-producer queue in that memory and
 * reach the NIC's Wishbone bus after the PCIe latency; everything else (RX slots,
 * status block, descriptors) is plain memory, exactly as on real hardware.
 *
 * Socket: $PARANIC_SIM_SOCKET, else PN_SIM_RUN_DIR/sim-<cluster>.sock (PN_SIM_RUN_DIR:
 * $PARANIC_RUN_DIR, else the build tree's build/run). Host memory per process:
 * $PARANIC_SIM_MEM bytes (default 1 GiB, sparse). See docs/simulator.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "hal_backend.h"
#include "paranic/pn_sim.h"
#include "pn_sim_proto.h"
#include "pn_sim_shm.h"
#include "pn_trust.h"

#ifndef PN_SIM_RUN_DIR
#define PN_SIM_RUN_DIR "build/run"
#endif

#define SIM_QSIZE 4096u                    /* MMIO queue entries */
#define SIM_DEFAULT_MEM (1ull << 30)       /* memfd size: rings + DMA heap */
#define SIM_ATTACH_TIMEOUT_S 120

struct sim_blk {
	size_t off, len;
};

struct sim_be {
	int sock, memfd;
	int dead;                  /* the simulator went away */
	uint8_t *mem;
	size_t mem_bytes;
	struct pn_sim_ctl *ctl;
	struct pn_sim_op *queue;
	uint32_t qmask;
	uint64_t q_head;
	uint64_t rseq;
	uint64_t polls;            /* wait rounds, published in ctl->c_polls (sim_looked) */
	const struct pn_sim_global *g;
	size_t g_bytes;
	/* The global shm's shape, checked once at attach (pn_sim_check_global) and kept
	 * here: the simulator may rewrite the header, the client never re-reads it. */
	uint32_t g_nodes, g_n_ctx, g_clk_hz, g_trace_off, g_trace_stride, g_status_off, g_status_stride,
		g_status_period;
	uint64_t dma_base;
	uint8_t *heap;
	size_t heap_off, heap_bytes;
	uint32_t csr_dropped;
	/* DMA heap allocator: blocks in address order, top = high-water mark = window. */
	struct sim_blk *blk;
	int nblk, cap;
	size_t top, window;
};

static struct sim_be *BE(pn_hal_t *h)
{
	return (struct sim_be *)h->be;
}

/* ---- the MMIO queue ---------------------------------------------------------------------------- */

/* "I have looked": every wait round, after it looked at host memory (an RX valid word,
 * the status block, a read's answer), bumps the poll counter. The harness does not run
 * the clock more than a grace past something it made visible to this client until the
 * counter moved (docs/simulator.md, "The clock"). One store to a line only the client
 * writes; the harness reads it. */
static inline void sim_looked(struct sim_be *b)
{
	__atomic_store_n(&b->ctl->c_polls, ++b->polls, __ATOMIC_RELEASE);
}

static void sim_check_alive(struct sim_be *b)
{
	char c;
	ssize_t n = recv(b->sock, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		b->dead = 1;
}

static void sim_wake(struct sim_be *b)
{
	char c = 'w';
	if (send(b->sock, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		sim_check_alive(b);
}

static void sim_push(struct sim_be *b, uint32_t kind, uint32_t off, uint64_t value)
{
	struct pn_backoff bo = {0};
	struct pn_sim_op *e;

	if (b->dead)
		return;
	while (b->q_head - __atomic_load_n(&b->ctl->q_tail, __ATOMIC_ACQUIRE) > b->qmask) {
		if ((bo.n & 1023) == 1023) {
			sim_wake(b);
			sim_check_alive(b);
			if (b->dead)
				return;
		}
		pn_backoff_step(&bo);
	}
	e = &b->queue[b->q_head & b->qmask];
	e->kind = kind;
	e->off = off;
	e->value = value;
	__atomic_store_n(&b->ctl->q_head, ++b->q_head, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->g->sleeping, __ATOMIC_SEQ_CST))
		sim_wake(b);
}

static uint32_t sim_read(struct sim_be *b, uint32_t kind, uint32_t off)
{
	struct pn_backoff bo = {0};
	uint64_t seq = ++b->rseq;

	sim_push(b, kind, off, seq);
	while (!b->dead && __atomic_load_n(&b->ctl->r_seq, __ATOMIC_ACQUIRE) != seq) {
		sim_looked(b);   /* after the look: the answer was not there yet */
		if ((bo.n & 1023) == 1023) {
			sim_check_alive(b);
			if (__atomic_load_n(&b->g->sleeping, __ATOMIC_SEQ_CST))
				sim_wake(b);
		}
		pn_backoff_step(&bo);
	}
	if (b->dead)
		return 0xffffffffu;   /* like a device that fell off the bus */
	return (uint32_t)__atomic_load_n(&b->ctl->r_value, __ATOMIC_RELAXED);
}

/* The MMIO ops tell the common code at once when they found the simulator gone (a
 * store or load then does nothing / reads all-ones, as on a dead PCIe device). */
static void sim_mmio_write32(pn_hal_t *h, uint32_t off, uint32_t v)
{
	sim_push(BE(h), PN_SIM_OP_W32, off, v);
	if (BE(h)->dead)
		h->dead = -EIO;
}

static void sim_mmio_write64(pn_hal_t *h, uint32_t off, uint64_t v)
{
	sim_push(BE(h), PN_SIM_OP_W64, off, v);
	if (BE(h)->dead)
		h->dead = -EIO;
}

static uint32_t sim_mmio_read32(pn_hal_t *h, uint32_t off)
{
	uint32_t v = sim_read(BE(h), PN_SIM_OP_R32, off);
	if (BE(h)->dead)
		h->dead = -EIO;
	return v;
}

/* pn_alive: the simulator holds our end of the SEQPACKET socket open for as long as it
 * runs; when it exits (or is killed) the kernel closes it and recv sees end-of-file.
 * One non-blocking recv(MSG_PEEK): a system call of well under a microsecond. */
static int sim_alive(pn_hal_t *h)
{
	struct sim_be *b = BE(h);
	if (!b->dead)
		sim_check_alive(b);
	return b->dead ? -EIO : 0;
}

/* ---- DMA memory: a heap inside the shared memory; the window is its high-water mark ---- */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The DMA window follows the heap's high-water mark: the "driver" (the harness)
 * reprograms the context's window, in order with the MMIO queue. */
static void sim_set_window(struct sim_be *b)
{
	size_t top = b->nblk ? b->blk[b->nblk - 1].off + b->blk[b->nblk - 1].len : 0;
	b->top = top;
	if (top != b->window) {
		b->window = top;
		sim_push(b, PN_SIM_OP_WINDOW, 0, top);
	}
}

static int sim_dma_alloc(pn_hal_t *h, size_t len, void **va, uint64_t *dma)
{
	struct sim_be *b = BE(h);
	size_t align = len >= 4096 ? 4096 : 64, off = (size_t)-1, need = align_up(len, 64);
	int at = b->nblk;

	if (need < len || need > b->heap_bytes)
		return -ENOMEM;
	/* At the top (so the window ends right after the newest buffer), else first fit. */
	size_t t = align_up(b->top, align);
	if (t <= b->heap_bytes && need <= b->heap_bytes - t) {
		off = t;
	} else {
		size_t prev = 0;
		for (int i = 0; i <= b->nblk; i++) {
			size_t s = align_up(prev, align), e = i < b->nblk ? b->blk[i].off : b->heap_bytes;
			if (s <= e && need <= e - s) {
				off = s;
				at = i;
				break;
			}
			if (i < b->nblk)
				prev = b->blk[i].off + b->blk[i].len;
		}
		if (off == (size_t)-1)
			return -ENOMEM;
	}
	if (b->nblk == b->cap) {
		int nc = b->cap ? 2 * b->cap : 16;
		struct sim_blk *nb = realloc(b->blk, (size_t)nc * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		b->blk = nb;
		b->cap = nc;
	}
	memmove(&b->blk[at + 1], &b->blk[at], (size_t)(b->nblk - at) * sizeof(*b->blk));
	b->blk[at] = (struct sim_blk){off, need};
	b->nblk++;
	memset(b->heap + off, 0, len);
	*va = b->heap + off;
	*dma = b->dma_base + b->heap_off + off;
	sim_set_window(b);
	return 0;
}

static int sim_dma_free(pn_hal_t *h, void *va, size_t len)
{
	struct sim_be *b = BE(h);
	size_t off = (size_t)((uint8_t *)va - b->heap);
	(void)len;
	for (int i = 0; i < b->nblk; i++)
		if (b->blk[i].off == off) {
			memmove(&b->blk[i], &b->blk[i + 1], (size_t)(b->nblk - i - 1) * sizeof(*b->blk));
			b->nblk--;
			sim_set_window(b);
			return 0;
		}
	return -ENOENT;
}

/* Only memory inside the shared heap can be reached by the simulated NIC. */
static int sim_mem_register(pn_hal_t *h, void *va, size_t len, uint64_t *dma)
{
	struct sim_be *b = BE(h);
	uint8_t *p = va;
	if (p < b->heap || p > b->heap + b->heap_bytes || len > (size_t)(b->heap + b->heap_bytes - p))
		return -EFAULT;
	*dma = b->dma_base + b->heap_off + (uint64_t)(p - b->heap);
	return 0;
}

static int sim_mem_deregister(pn_hal_t *h, void *va, size_t len)
{
	(void)h;
	(void)va;
	(void)len;
	return 0;
}

/* ---- time, counters ---------------------------------------------------------------------------- */

static uint64_t sim_cycles(pn_hal_t *h)
{
	return __atomic_load_n(&BE(h)->g->cycle, __ATOMIC_ACQUIRE);
}

/* The HAL's wait loops call this after each look that found nothing (pn_recv_header,
 * the send side's and the barrier's wait rounds): the simulator has no work to do in the
 * client, only the poll counter to bump. */
static int sim_progress(pn_hal_t *h)
{
	sim_looked(BE(h));
	return 0;
}

static uint64_t sim_now_ns(pn_hal_t *h)
{
	const struct sim_be *b = BE(h);
	return sim_cycles(h) * 1000000000ull / b->g_clk_hz;
}

static uint64_t sim_deadline_ns(pn_hal_t *h)
{
	return __atomic_load_n(&BE(h)->g->work_ns, __ATOMIC_RELAXED);
}

static void sim_counters(pn_hal_t *h, pn_status_t *st)
{
	st->node_dropped = sim_read(BE(h), PN_SIM_OP_RCSR, BE(h)->csr_dropped);
}

/* ---- attach / detach ------------------------------------------------------------------------ */

static int valid_cluster(const char *s)
{
	size_t len = strlen(s);
	if (!len || len > 64)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
		      ch == '-' || ch == '.'))
			return 0;
	}
	return 1;
}

static int pow2_in(long v, long lo, long hi)
{
	return v >= lo && v <= hi && !(v & (v - 1));
}

static void sim_release(struct sim_be *b)
{
	if (b->sock >= 0)
		close(b->sock);
	if (b->mem)
		munmap(b->mem, b->mem_bytes);
	if (b->memfd >= 0)
		close(b->memfd);
	if (b->g)
		munmap((void *)b->g, b->g_bytes);
	free(b->blk);
	free(b);
}

/* The shared memory's shape (checked by pn_sim_check_global) is the one the welcome
 * announced: the same cluster, and our node and context inside it. */
static bool sim_global_matches(const struct pn_sim_global *g, const struct pn_sim_welcome *w)
{
	return g->hdr_bytes == sizeof(*g) && g->mtu == w->mtu && g->mtu % 8 == 0 && w->sim_nodes == g->nodes &&
	       w->n_ctx == g->n_ctx && w->node < g->nodes && w->ctx < w->n_ctx;
}

static int sim_connect(const pn_open_opts_t *o)
{
	struct sockaddr_un a;
	const char *p = getenv("PARANIC_SIM_SOCKET");
	const char *dir = getenv("PARANIC_RUN_DIR");
	char path[sizeof(a.sun_path) + 64];
	int fd, n;

	if (p && *p)
		n = snprintf(path, sizeof(path), "%s", p);
	else
		n = snprintf(path, sizeof(path), "%s/sim-%s.sock", dir && *dir ? dir : PN_SIM_RUN_DIR, o->cluster);
	if (n < 0 || (size_t)n >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, (size_t)n);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		/* No simulator there (no socket file, or a stale one). */
		return e == ENOENT ? -ECONNREFUSED : -e;
	}
	/* A simulator of another user would see our memory (the memfd we hand it). */
	if (pn_trust_peer(fd, NULL) < 0) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

static int sim_attach(pn_hal_t *h, const pn_open_opts_t *o, struct pn_hw_map *map)
{
	struct sim_be *b;
	struct pn_sim_hello hello;
	struct pn_sim_welcome w;
	long rx_slots = o->rx_slots ? o->rx_slots : PN_SW_DEFAULT_RX_SLOTS;
	long tx_entries = o->tx_entries ? o->tx_entries : PN_SW_DEFAULT_TX_ENTRIES;
	uint64_t mem = SIM_DEFAULT_MEM;
	const char *ms = getenv("PARANIC_SIM_MEM");
	int r, gfd = -1;

	if (!valid_cluster(o->cluster) || !pow2_in(rx_slots, 2, 1 << 16) || !pow2_in(tx_entries, 2, 1 << 16) ||
	    (o->mtu && (o->mtu < 8 || o->mtu > PN_MAX_MTU)) || o->contexts > PN_MAX_CONTEXTS || o->nodes > PN_MAX_NODES)
		return -EINVAL;
	if (ms && *ms) {
		char *end;
		errno = 0;
		mem = strtoull(ms, &end, 0);
		if (errno || *end || mem < (1u << 24) || mem > PN_SIM_MAX_MEM)
			return -EINVAL;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->sock = b->memfd = -1;

	/* Host memory: ctl + queue | status block | RX ring | TX ring | DMA heap. */
	size_t queue_off = 4096, status_off = align_up(queue_off + SIM_QSIZE * sizeof(struct pn_sim_op), 4096);
	size_t rx_off = status_off + 4096;
	/* The MTU is known only from the answer: room for slots of the largest MTU. */
	size_t tx_off = align_up(rx_off + (size_t)rx_slots * PN_RX_SLOT_BYTES(PN_MAX_MTU), 4096);
	size_t heap_off = align_up(tx_off + (size_t)tx_entries * PN_TX_DESC_BYTES, 65536);
	if (heap_off + (1u << 20) > mem) {
		free(b);
		return -EINVAL;
	}
	/* Sealed against shrinking: the harness maps it too and must never fault on it. */
	b->memfd = memfd_create("paranic-sim", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (b->memfd < 0 || ftruncate(b->memfd, (off_t)mem) < 0 ||
	    fcntl(b->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		r = -errno;
		sim_release(b);
		return r;
	}
	b->mem = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, b->memfd, 0);
	if (b->mem == MAP_FAILED) {
		b->mem = NULL;
		r = -errno;
		sim_release(b);
		return r;
	}
	b->mem_bytes = mem;
	b->ctl = (struct pn_sim_ctl *)b->mem;
	b->ctl->version = PN_SIM_VERSION;
	b->ctl->qsize = SIM_QSIZE;
	b->ctl->queue_off = queue_off;
	b->ctl->magic = PN_SIM_MAGIC_CTL;
	b->queue = (struct pn_sim_op *)(b->mem + queue_off);
	b->qmask = SIM_QSIZE - 1;
	b->heap = b->mem + heap_off;
	b->heap_off = heap_off;
	b->heap_bytes = mem - heap_off;

	if ((r = sim_connect(o)) < 0) {
		sim_release(b);
		return r;
	}
	b->sock = r;
	{
		struct timeval tv = {SIM_ATTACH_TIMEOUT_S, 0};
		setsockopt(b->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}

	memset(&hello, 0, sizeof(hello));
	hello.magic = PN_SIM_MAGIC_HELLO;
	hello.version = PN_SIM_VERSION;
	hello.node = o->node;
	hello.ctx = o->ctx;
	hello.nodes = o->nodes;
	hello.pid = (int32_t)getpid();
	hello.rx_log2 = (uint32_t)__builtin_ctzl((unsigned long)rx_slots);
	hello.tx_log2 = (uint32_t)__builtin_ctzl((unsigned long)tx_entries);
	hello.mem_bytes = mem;
	hello.status_off = status_off;
	hello.rx_off = rx_off;
	hello.tx_off = tx_off;
	hello.heap_off = heap_off;
	hello.heap_bytes = mem - heap_off;
	{
		struct iovec iov = {&hello, sizeof(hello)};
		struct msghdr mh;
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr *cm;
		memset(&mh, 0, sizeof(mh));
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &b->memfd, sizeof(int));
		if (sendmsg(b->sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(hello)) {
			r = errno ? -errno : -EIO;
			sim_release(b);
			return r;
		}
	}
	{
		struct iovec iov = {&w, sizeof(w)};
		struct msghdr mh;
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr *cm;
		ssize_t n;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		do
			n = recvmsg(b->sock, &mh, MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR);
		for (cm = CMSG_FIRSTHDR(&mh); n > 0 && cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
				memcpy(&gfd, CMSG_DATA(cm), sizeof(int));
		if (n <= 0) {
			r = n < 0 ? (errno == EAGAIN ? -ETIMEDOUT : -errno) : -ECONNRESET;
			if (gfd >= 0)
				close(gfd);
			sim_release(b);
			return r;
		}
	}
	/* The answer, checked before any of it is used (pn_sim_proto.c): a refusal's status,
	 * else a shape this memory was laid out for (slots of up to PN_MAX_MTU). */
	r = pn_sim_check_welcome(&w, sizeof(w), PN_MAX_MTU);
	if (!r && gfd < 0)
		r = -EPROTO;
	if (!r) {
		/* global_bytes is bounded by the welcome's check; the file must hold it (mapping
		 * past its end would fault). */
		struct stat gst;
		if (fstat(gfd, &gst) < 0 || !S_ISREG(gst.st_mode) || (uint64_t)gst.st_size < w.global_bytes)
			r = -EPROTO;
	}
	if (r) {
		if (gfd >= 0)
			close(gfd);
		sim_release(b);
		return r;
	}
	b->g = mmap(NULL, w.global_bytes, PROT_READ, MAP_SHARED, gfd, 0);
	close(gfd);
	if (b->g == MAP_FAILED) {
		b->g = NULL;
		r = -errno;
		sim_release(b);
		return r;
	}
	b->g_bytes = w.global_bytes;
	b->dma_base = w.dma_base;
	b->csr_dropped = w.csr_dropped;
	{
		struct pn_sim_global gc;
		memcpy(&gc, (const void *)b->g, sizeof(gc));   /* one snapshot, checked and kept */
		if (pn_sim_check_global(&gc, b->g_bytes) < 0 || !sim_global_matches(&gc, &w)) {
			sim_release(b);   /* closing the socket detaches */
			return -EPROTO;
		}
		b->g_nodes = gc.nodes;
		b->g_n_ctx = gc.n_ctx;
		b->g_clk_hz = gc.clk_hz;
		b->g_trace_off = gc.trace_off;
		b->g_trace_stride = gc.trace_stride;
		b->g_status_off = gc.status_off;
		b->g_status_stride = gc.status_stride;
		b->g_status_period = gc.status_period;
	}
	if ((o->mtu && (uint32_t)o->mtu != w.mtu) || (o->contexts && (uint32_t)o->contexts != w.n_ctx)) {
		sim_release(b);   /* a cluster of another shape */
		return -EBUSY;
	}
	/* From now on wake-ups must never block. */
	fcntl(b->sock, F_SETFL, fcntl(b->sock, F_GETFL) | O_NONBLOCK);

	memset(map, 0, sizeof(*map));
	map->ctx_page = NULL;   /* every window store goes through the queue */
	map->rx_ring = b->mem + rx_off;
	map->rx_slots = (uint32_t)rx_slots;
	map->rx_slot_bytes = PN_RX_SLOT_BYTES(w.mtu);
	map->tx_ring = b->mem + tx_off;
	map->tx_entries = (uint32_t)tx_entries;
	map->status = (volatile uint32_t *)(b->mem + status_off);
	map->mtu = w.mtu;
	map->node_id = w.node;
	map->num_nodes = w.nodes;
	map->ctx_id = w.ctx;
	map->num_ctx = w.n_ctx;
	h->be = b;
	return 0;
}

static void sim_detach(pn_hal_t *h)
{
	struct sim_be *b = BE(h);
	if (!b)
		return;
	/* Closing the socket detaches: the harness disables and resets the context and
	 * unmaps its view of our memory once the NIC can no longer reach it. */
	sim_release(b);
	h->be = NULL;
}

/* ---- extras (pn_sim.h) ------------------------------------------------------------------------- */

int pn_sim_trace(pn_hal_t *h, unsigned node, unsigned ctx, pn_sim_trace_t *out)
{
	const struct pn_sim_global *g;
	const struct pn_sim_trace *t;
	if (!h || !out)
		return -EINVAL;
	if (h->ops != &pn_backend_sim)
		return -ENOTSUP;
	g = BE(h)->g;
	if (node >= BE(h)->g_nodes || ctx >= BE(h)->g_n_ctx)
		return -EINVAL;
	t = (const struct pn_sim_trace *)((const uint8_t *)g + BE(h)->g_trace_off +
					   ((size_t)node * BE(h)->g_n_ctx + ctx) * BE(h)->g_trace_stride);
#define CP(f) out->f = __atomic_load_n(&t->f, __ATOMIC_ACQUIRE)
	CP(generation);
	CP(issue_cycle);
	CP(pio_doorbell_cycle);
	CP(tx_tail_cycle);
	CP(rx_valid_cycle);
	CP(rx_valid_count);
	CP(barrier_enter_cycle);
	CP(barrier_done_cycle);
	CP(barrier_done_count);
	CP(status_cycle);
	CP(pio_doorbells);
	CP(tx_tails);
	CP(rx_valids);
#undef CP
	return 0;
}

int pn_sim_info(pn_hal_t *h, pn_sim_info_t *out)
{
	const struct pn_sim_global *g;
	if (!h || !out)
		return -EINVAL;
	if (h->ops != &pn_backend_sim)
		return -ENOTSUP;
	g = BE(h)->g;
	memset(out, 0, sizeof(*out));
	out->nodes = BE(h)->g_nodes;
	out->topo_x = g->topo_x;
	out->topo_y = g->topo_y;
	out->clk_hz = BE(h)->g_clk_hz;
	out->mmio_write_cycles = g->mmio_write_cycles;
	out->mmio_read_cycles = g->mmio_read_cycles;
	out->dma_read_cycles = g->dma_read_cycles;
	out->dma_write_cycles = g->dma_write_cycles;
	out->cycle = __atomic_load_n(&g->cycle, __ATOMIC_ACQUIRE);
	out->dma_refused = __atomic_load_n(&g->dma_refused, __ATOMIC_RELAXED);
	return 0;
}

/* pn_cluster_status: the harness's status snapshot of each node (pn_sim_node_status in the
 * global shm, a seqlock; docs/simulator.md). Waits for a snapshot taken after the call
 * began: a CSR read now and then keeps the harness's clock at full speed meanwhile. */
static int sim_node_status(pn_hal_t *h, unsigned index, pn_node_status_t *out)
{
	struct sim_be *b = BE(h);
	const struct pn_sim_global *g = b->g;
	const struct pn_sim_node_status *st;
	struct pn_sim_node_status c;
	struct pn_backoff bo = {0};
	uint64_t want, limit, seq;
	unsigned p, k;

	if (!b->g_status_off || !b->g_status_stride || !b->g_status_period)
		return -ENOTSUP;   /* an older harness, or --status-period 0 */
	if (index >= b->g_nodes)
		return -ENOENT;
	st = (const struct pn_sim_node_status *)((const uint8_t *)g + b->g_status_off +
						 (size_t)index * b->g_status_stride);
	want = __atomic_load_n(&g->cycle, __ATOMIC_ACQUIRE);
	limit = want + 4ull * b->g_status_period + 100000;
	for (;;) {
		if ((bo.n & 255) == 0)
			(void)sim_read(b, PN_SIM_OP_RCSR, b->csr_dropped);   /* activity: clock runs */
		if (b->dead)
			return -EIO;
		seq = __atomic_load_n(&st->seq, __ATOMIC_ACQUIRE);
		if (!(seq & 1)) {
			memcpy(&c, (const void *)st, sizeof(c));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&st->seq, __ATOMIC_RELAXED) == seq &&
			    (c.cycle >= want || __atomic_load_n(&g->cycle, __ATOMIC_ACQUIRE) > limit))
				break;
		}
		pn_backoff_step(&bo);
	}
	if (!c.cycle)
		return -EIO;   /* never refreshed */
	out->node_id = c.node_id;
	out->dna = c.dna;
	out->cfg_node = c.cfg_node;
	out->cycle = c.cycle;
	pn_fill_fw_status(out, c.fw);
	out->n_links = c.n_links < PN_STATUS_LINKS ? c.n_links : PN_STATUS_LINKS;
	for (p = 0; p < out->n_links; p++) {
		pn_link_status_t *l = &out->links[p];
		uint32_t v[PN_SIM_LINK_FIELDS];
		for (k = 0; k < PN_SIM_LINK_FIELDS; k++)
			v[k] = c.link[k * PN_SIM_STATUS_LINKS + p];
		l->port = p + 1;
		l->state = v[PN_SIM_LINK_STATE];
		l->down_reason = v[PN_SIM_LINK_DOWN_REASON];
		l->downs = v[PN_SIM_LINK_DOWNS];
		l->tx_packets = v[PN_SIM_LINK_TX_PACKETS];
		l->rx_packets = v[PN_SIM_LINK_RX_PACKETS];
		l->crc_errors = v[PN_SIM_LINK_CRC_ERRORS];
		l->replays = v[PN_SIM_LINK_REPLAYS];
		l->timeouts = v[PN_SIM_LINK_TIMEOUTS];
		if ((c.have >> PN_SIM_LINK_DOWN_REASON & 1) && (c.have >> PN_SIM_LINK_DOWNS & 1))
			l->flags |= PN_LINK_HAVE_FAULTS;
	}
	return 0;
}

const struct pn_backend_ops pn_backend_sim = {
	.name = "sim",
	.attach = sim_attach,
	.detach = sim_detach,
	.mmio_write32 = sim_mmio_write32,
	.mmio_write64 = sim_mmio_write64,
	.mmio_read32 = sim_mmio_read32,
	.dma_alloc = sim_dma_alloc,
	.dma_free = sim_dma_free,
	.mem_register = sim_mem_register,
	.mem_deregister = sim_mem_deregister,
	.progress = sim_progress,
	.now_ns = sim_now_ns,
	.deadline_ns = sim_deadline_ns,
	.cycles = sim_cycles,
	.counters = sim_counters,
	.node_status = sim_node_status,
	.alive = sim_alive,
};
