/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_guest: the ParaNIC QEMU guest's tool (static; docs/driver.md "QEMU").
 *   pn_guest info [DEV]                      GET_INFO of a fresh context
 *   pn_guest setnode NODE NODES X Y [DEV]    SET_NODE_ID (needs CAP_NET_ADMIN)
 *   pn_guest bad [DEV]                       bad input: random ioctls, mmap out of
 *                                            bounds, no privilege, double close
 *   pn_guest killdma [DEV]                   a process killed while its 1 MiB DMA messages
 *                                            to a receiver in the guest run: the context is
 *                                            reclaimed, its DMA pages are not reused before
 *                                            the NIC is done, the next owner works
 *   pn_guest handover [DEV]                  a new owner of a context can neither read nor
 *                                            send the previous owner's PIO bytes
 *   pn_guest deregbusy [DEV]                 MEM_DEREGISTER with a DMA pending: -EBUSY while
 *                                            mapped, and after munmap it returns only once
 *                                            the NIC is done with the window
 *   pn_guest dead CFG [DEV]                  the device falls off the bus (a write to config
 *                                            register CFG: pn_proxydev --model --remove-at): open,
 *                                            sysfs, kernel send, deregistration fail with
 *                                            -ENODEV at once; close and rmmod do not hang
 * Every case prints "ok CASE ..." or "FAIL CASE: ..."; the exit status is the number
 * of failures (0: all passed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "paranic/pn_hal.h"
#include "uapi/paranic.h"

static const char *dev = "/dev/paranic0";
static int fails;

#define CHECK(cond, name, ...)                                          \
	do {                                                            \
		if (cond) {                                             \
			printf("ok %s\n", name);                        \
		} else {                                                \
			printf("FAIL %s: ", name);                      \
			printf(__VA_ARGS__);                            \
			printf("\n");                                   \
			fails++;                                        \
		}                                                       \
		fflush(stdout);                                         \
	} while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Contexts in use, from sysfs ("used total"). */
static int ctx_used(void)
{
	char path[128], buf[64];
	const char *base = strrchr(dev, '/');
	snprintf(path, sizeof(path), "/sys/class/misc/%s/contexts", base ? base + 1 : dev);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int used = -1;
	if (fgets(buf, sizeof(buf), f))
		used = atoi(buf);
	fclose(f);
	return used;
}

static int wait_ctx_used(int want, int ms)
{
	int u = ctx_used();
	for (int i = 0; i < ms / 10 && u != want; i++) {
		usleep(10000);
		u = ctx_used();
	}
	return u;
}

static int cmd_info(void)
{
	int fd = open(dev, O_RDWR);
	if (fd < 0) {
		printf("FAIL open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	struct paranic_info in;
	memset(&in, 0, sizeof(in));
	if (ioctl(fd, PARANIC_IOC_GET_INFO, &in) < 0) {
		printf("FAIL GET_INFO: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	printf("info abi %u node %u nodes %u n_ctx %u mtu %u ctx %u rx_slots %u tx %u links %u irq %u "
	       "window_max %u map %llx\n",
	       in.abi_version, in.node_id, in.num_nodes, in.n_ctx, in.mtu, in.ctx_id, in.rx_slots, in.tx_entries,
	       in.link_ports, in.irq_vectors, in.window_max, (unsigned long long)in.csr_map_id);
	close(fd);
	return 0;
}

static int cmd_setnode(unsigned node, unsigned nodes, unsigned x, unsigned y)
{
	int fd = open(dev, O_RDWR);
	if (fd < 0) {
		printf("FAIL open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	struct paranic_node n;
	memset(&n, 0, sizeof(n));
	n.node_id = node;
	n.num_nodes = nodes;
	n.topo_x = x;
	n.topo_y = y;
	int r = ioctl(fd, PARANIC_IOC_SET_NODE_ID, &n);
	CHECK(r == 0, "setnode", "%s", strerror(errno));
	close(fd);
	return r != 0;
}

/* Every errno a refused call may give. */
static int errno_ok(int e)
{
	return e == ENOTTY || e == EINVAL || e == EFAULT || e == EPERM || e == EBUSY || e == E2BIG ||
	       e == EOPNOTSUPP || e == EAGAIN || e == EMSGSIZE || e == ENOMEM || e == ENOENT || e == EACCES ||
	       e == ETIMEDOUT;   /* the register model never finishes a PIO packet */
}

/* Random ioctls, as an unprivileged user (so no random route or node id lands). */
static void bad_ioctls(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(100);
		int fd = open(dev, O_RDWR);
		if (fd < 0) {
			printf("  open %s as uid 65534: %s\n", dev, strerror(errno));
			_exit(101);
		}
		static uint8_t buf[8192] __attribute__((aligned(64)));
		int bad = 0, okcalls = 0, refused = 0;
		for (int i = 0; i < 20000; i++) {
			unsigned long cmd;
			switch (i % 4) {
			case 0:   /* anything */
				cmd = (unsigned long)rnd() & 0xffffffffu;
				break;
			case 1:   /* our magic, any number, any size and direction */
				cmd = _IOC(rnd() % 4, PARANIC_IOC_MAGIC, rnd() % 16, rnd() % 256);
				break;
			default: { /* a real command with a random argument */
				static const unsigned long cmds[] = {
					PARANIC_IOC_GET_INFO, PARANIC_IOC_SET_NODE_ID, PARANIC_IOC_LOAD_ROUTES,
					PARANIC_IOC_MEM_REGISTER, PARANIC_IOC_MEM_DEREGISTER, PARANIC_IOC_BARRIER_CONFIG,
					PARANIC_IOC_SEND, PARANIC_IOC_DOORBELL};
				cmd = cmds[rnd() % 8];
				break;
			}
			}
			void *arg;
			switch (rnd() % 4) {
			case 0:
				arg = NULL;
				break;
			case 1:
				arg = (void *)(uintptr_t)(rnd() | 0xffff000000000000ull);   /* kernel space */
				break;
			default:
				for (size_t k = 0; k < 256; k += 8) {
					uint64_t v = rnd();
					if (rnd() % 2)
						v &= 0xffff;   /* small numbers reach deeper checks */
					memcpy(buf + k, &v, 8);
				}
				arg = buf;
				break;
			}
			/* Never a DOORBELL or SEND with a real-looking argument to TX_TAIL etc.: they
			 * are checked too, but a random TX_TAIL is refused by the NIC, not the driver;
			 * both are fine and count as ok. */
			errno = 0;
			long r = ioctl(fd, cmd, arg);
			if (r >= 0) {
				okcalls++;
				if (cmd == PARANIC_IOC_MEM_REGISTER) {   /* undo, so later calls go deeper again */
					struct paranic_mem m;
					memcpy(&m, buf, sizeof(m));
					ioctl(fd, PARANIC_IOC_MEM_DEREGISTER, &m);
				}
			} else if (errno_ok(errno)) {
				refused++;
			} else {
				if (bad < 5)
					printf("  ioctl %#lx arg %p: unexpected errno %d (%s)\n", cmd, arg, errno,
					       strerror(errno));
				bad++;
			}
		}
		printf("  random ioctls: %d refused, %d accepted, %d with an unexpected errno\n", refused, okcalls,
		       bad);
		close(fd);
		_exit(bad ? 1 : 0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "random-ioctls", "child status %#x", st);
}

static void bad_mmaps(void)
{
	int fd = open(dev, O_RDWR);
	if (fd < 0) {
		CHECK(0, "mmap-open", "%s", strerror(errno));
		return;
	}
	struct paranic_info in;
	memset(&in, 0, sizeof(in));
	ioctl(fd, PARANIC_IOC_GET_INFO, &in);
	long pg = 4096;
	size_t rx = ((size_t)in.rx_slots * in.rx_slot_bytes + pg - 1) & ~(size_t)(pg - 1);
	size_t tx = ((size_t)in.tx_entries * 32 + pg - 1) & ~(size_t)(pg - 1);
	struct {
		const char *name;
		off_t off;
		size_t len;
		int prot;
		int ok;
	} cases[] = {
		{"ctx-page", PARANIC_MMAP_CTX_PAGE, PN_CTX_PAGE_BYTES, PROT_READ | PROT_WRITE, 1},
		{"ctx-page+1", PARANIC_MMAP_CTX_PAGE, 2 * PN_CTX_PAGE_BYTES, PROT_READ | PROT_WRITE, 0},
		{"ctx-page@next", PARANIC_MMAP_CTX_PAGE + PN_CTX_PAGE_BYTES, PN_CTX_PAGE_BYTES,
		 PROT_READ | PROT_WRITE, 0},
		{"ctx-page@64k", PARANIC_MMAP_CTX_PAGE + 65536, PN_CTX_PAGE_BYTES, PROT_READ, 0},
		{"ctx-page@csr", PARANIC_MMAP_CTX_PAGE + PN_BAR0_CSR_OFFSET, PN_CTX_PAGE_BYTES, PROT_READ, 0},
		{"rx-ring", PARANIC_MMAP_RX_RING, rx, PROT_READ, 1},
		{"rx-ring-write", PARANIC_MMAP_RX_RING, rx, PROT_READ | PROT_WRITE, 0},
		{"rx-ring+1", PARANIC_MMAP_RX_RING, rx + pg, PROT_READ, 0},
		{"tx-ring", PARANIC_MMAP_TX_RING, tx, PROT_READ | PROT_WRITE, 1},
		{"tx-ring+1", PARANIC_MMAP_TX_RING, tx + pg, PROT_READ | PROT_WRITE, 0},
		{"status", PARANIC_MMAP_STATUS, 4096, PROT_READ, 1},
		{"status-write", PARANIC_MMAP_STATUS, 4096, PROT_READ | PROT_WRITE, 0},
		{"status+1", PARANIC_MMAP_STATUS, 8192, PROT_READ, 0},
		{"window-none", PARANIC_MMAP_WINDOW, 4096, PROT_READ, 0},
		{"region-5", 5ll << PARANIC_MMAP_REGION_SHIFT, 4096, PROT_READ, 0},
		{"region-15", 15ll << PARANIC_MMAP_REGION_SHIFT, 4096, PROT_READ, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *p = mmap(NULL, cases[i].len, cases[i].prot, MAP_SHARED, fd, cases[i].off);
		int e = errno;
		char name[64];
		snprintf(name, sizeof(name), "mmap-%s", cases[i].name);
		if (cases[i].ok)
			CHECK(p != MAP_FAILED, name, "refused: %s", strerror(e));
		else
			CHECK(p == MAP_FAILED && (e == EINVAL || e == EACCES || e == EPERM || e == ENXIO), name,
			      "%s", p == MAP_FAILED ? strerror(e) : "mapped");
		if (p != MAP_FAILED)
			munmap(p, cases[i].len);
	}
	/* mprotect cannot add write access to the read-only RX ring later. */
	void *p = mmap(NULL, rx, PROT_READ, MAP_SHARED, fd, PARANIC_MMAP_RX_RING);
	if (p != MAP_FAILED) {
		int r = mprotect(p, rx, PROT_READ | PROT_WRITE);
		CHECK(r < 0 && errno == EACCES, "mprotect-rx-write", "%s", r ? strerror(errno) : "allowed");
		munmap(p, rx);
	}
	close(fd);
}

static void bad_privilege(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(100);
		int fd = open(dev, O_RDWR);
		if (fd < 0) {
			printf("  open %s as uid 65534: %s\n", dev, strerror(errno));
			_exit(101);
		}
		int bad = 0;
		struct paranic_node n = {.node_id = 1, .num_nodes = 2, .topo_x = 2, .topo_y = 1};
		uint8_t ports[2] = {0, 0};
		struct paranic_routes rt = {.first = 0, .count = 2, .ports = (uintptr_t)ports};
		struct paranic_barrier b = {.nodes = 2, .radix_log2 = 1, .mode = 1};
		if (ioctl(fd, PARANIC_IOC_SET_NODE_ID, &n) != -1 || errno != EPERM)
			bad |= 1;
		if (ioctl(fd, PARANIC_IOC_LOAD_ROUTES, &rt) != -1 || errno != EPERM)
			bad |= 2;
		if (ioctl(fd, PARANIC_IOC_BARRIER_CONFIG, &b) != -1 || errno != EPERM)
			bad |= 4;
		close(fd);
		_exit(bad);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "no-cap-net-admin", "status %#x (bits: node, routes, barrier)",
	      st);
}

static void bad_close(void)
{
	int before = ctx_used();
	int fd = open(dev, O_RDWR);
	int during = ctx_used();
	int r1 = close(fd);
	int r2 = close(fd);
	int e2 = errno;
	int after = wait_ctx_used(before, 2000);
	CHECK(fd >= 0 && r1 == 0 && r2 == -1 && e2 == EBADF && during == before + 1 && after == before,
	      "double-close", "fd %d close %d/%d (%s) contexts %d -> %d -> %d", fd, r1, r2, strerror(e2), before,
	      during, after);
	/* All contexts at once, then one more: -EBUSY; all come back. */
	struct paranic_info in;
	memset(&in, 0, sizeof(in));
	int fds[64], n = 0, busy_errno = 0;
	for (; n < 64; n++) {
		fds[n] = open(dev, O_RDWR);
		if (fds[n] < 0) {
			busy_errno = errno;
			break;
		}
	}
	if (n > 0)
		ioctl(fds[0], PARANIC_IOC_GET_INFO, &in);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	CHECK(n == (int)in.n_ctx - before && busy_errno == EBUSY && wait_ctx_used(before, 2000) == before,
	      "all-contexts-busy", "opened %d of %u (errno %s), %d in use after", n, in.n_ctx, strerror(busy_errno),
	      ctx_used());
	/* A mapping outlives close(): the context is released only after munmap. */
	fd = open(dev, O_RDWR);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, PARANIC_MMAP_CTX_PAGE);
	close(fd);
	int held = ctx_used();
	if (p != MAP_FAILED)
		munmap(p, 4096);
	CHECK(p != MAP_FAILED && held == before + 1 && wait_ctx_used(before, 2000) == before, "close-then-munmap",
	      "held %d, after %d", held, ctx_used());
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A line from a child's pipe (at most n-1 bytes), "" on EOF. */
static void read_line(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got + 1 < n) {
		ssize_t r = read(fd, buf + got, 1);
		if (r <= 0 || buf[got] == '\n')
			break;
		got++;
	}
	buf[got] = 0;
}

/* An open through libparanic's pci backend, any free context. */
static pn_hal_t *pci_open(void)
{
	pn_hal_t *h;
	setenv("PARANIC_BACKEND", "pci", 1);
	setenv("PARANIC_DEVICE", dev, 1);
	return pn_open(&h, NULL) < 0 ? NULL : h;
}

/* The payloads of the kill-during-DMA case: 64-bit word i of a message from the killed
 * sender (tag KD_TAG_S) and from the context's next owner (KD_TAG_N). */
#define KD_TAG_S 0x51ull
#define KD_TAG_N 0x52ull
#define KD_MSG (1u << 20)       /* the killed sender's messages */
#define KD_NEXT_MSG (64u << 10) /* the next owner's */
#define KD_NEXT_K 3
static uint64_t kd_word(uint64_t tag, uint64_t i)
{
	return (tag == KD_TAG_S ? 0x53454e4445520000ull : 0x4e4558544f574e00ull) ^ (i * 0x9e3779b1ull);
}

static void kd_fill(uint64_t tag, void *buf, size_t len)
{
	for (size_t i = 0; i < len / 8; i++) {
		uint64_t w = kd_word(tag, i);
		memcpy((uint8_t *)buf + 8 * i, &w, 8);
	}
}

/* The receiver: every packet of the killed sender's messages must carry the sender's
 * bytes at its offset (were the sender's pages freed and reused while the NIC still
 * read them, the next owner's bytes would show up here); it ends once the next owner's
 * KD_NEXT_K messages arrived whole. Summary on out: "s_pkts s_bad n_msgs n_bad other". */
static void kd_receiver(int out)
{
	pn_hal_t *h = pci_open();
	if (!h) {
		dprintf(out, "E open\n");
		_exit(1);
	}
	dprintf(out, "R %d\n", pn_ctx_id(h));
	unsigned s_pkts = 0, s_bad = 0, n_pkts = 0, n_bad = 0, n_msgs = 0, other = 0;
	size_t off[2] = {0, 0};
	double end = now_ms() + 60000;
	while (n_msgs < KD_NEXT_K && now_ms() < end) {
		pn_header_t hd;
		const void *pl;
		if (pn_recv_wait(h, &hd, 500000000ll) != 1)
			continue;
		int r = pn_recv_payload(h, &pl);
		int k = hd.tag == KD_TAG_S ? 0 : hd.tag == KD_TAG_N ? 1 : -1;
		if (k < 0 || r < 0) {
			other++;
			pn_recv_skip(h);
			continue;
		}
		if (hd.flags & PN_FLAG_SOM)
			off[k] = 0;
		int bad = hd.length % 8 != 0;
		for (size_t i = 0; !bad && i < hd.length / 8; i++) {
			uint64_t w;
			memcpy(&w, (const uint8_t *)pl + 8 * i, 8);
			bad = w != kd_word(hd.tag, off[k] / 8 + i);
		}
		off[k] += hd.length;
		if (k == 0) {
			s_pkts++;
			s_bad += bad;
		} else {
			n_pkts++;
			n_bad += bad;
			n_msgs += !!(hd.flags & PN_FLAG_EOM);
		}
		pn_recv_skip(h);
	}
	dprintf(out, "%u %u %u %u %u\n", s_pkts, s_bad, n_msgs, n_bad, other);
	pn_close(h);
	_exit(0);
}

/* A sender of the kill-during-DMA case: an open, a KD_MSG DMA buffer filled with the
 * words of tag, its bus address; on failure "E open" on out and exit 1. */
static pn_hal_t *kd_open(int out, uint64_t tag, void **buf, uint64_t *dma)
{
	pn_hal_t *h = pci_open();
	*dma = 0;
	if (!h || pn_dma_alloc(h, KD_MSG, buf) < 0 || pn_mem_dma_addr(h, *buf, KD_MSG, dma) < 0) {
		dprintf(out, "E open\n");
		_exit(1);
	}
	kd_fill(tag, *buf, KD_MSG);
	return h;
}

/* The sender that is killed: 1 MiB DMA messages to the receiver, for ever. */
static void kd_sender(int out, unsigned rctx)
{
	void *buf;
	uint64_t dma;
	pn_hal_t *h = kd_open(out, KD_TAG_S, &buf, &dma);
	for (int started = 0;;) {
		int r = pn_send_dma(h, (unsigned)pn_node_id(h), rctx, KD_TAG_S, buf, KD_MSG);
		if (r < 0 && r != -EAGAIN && r != -ENOBUFS)
			_exit(3);
		if (!started) {
			dprintf(out, "S %d %llx\n", pn_ctx_id(h), (unsigned long long)dma);
			started = 1;
		}
	}
}

/* The context's next owner: its heap filled with its own bytes at once (the killed
 * sender's pages, if the driver handed them out again), then KD_NEXT_K messages. */
static void kd_next(int out, unsigned rctx)
{
	void *buf;
	uint64_t dma;
	pn_hal_t *h = kd_open(out, KD_TAG_N, &buf, &dma);
	dprintf(out, "N %d %llx\n", pn_ctx_id(h), (unsigned long long)dma);
	for (int k = 0; k < KD_NEXT_K; k++)
		if (pn_send_dma(h, (unsigned)pn_node_id(h), rctx, KD_TAG_N, buf, KD_NEXT_MSG) < 0)
			_exit(3);
	_exit(pn_tx_wait(h) < 0 ? 4 : 0);
}

/* A process SIGKILLed while its 1 MiB DMA messages to a receiver (another context of this
 * guest) run. The driver reclaims the context only after the NIC is done with it, so the
 * process's pages are not handed out while the NIC reads them; the next owner gets the
 * same context and works. */
static void kill_during_dma(void)
{
	int before = ctx_used();
	int rp[2], sp[2], np[2];
	char rl[64] = "", sl[64] = "", nl[64] = "", res[96] = "";
	if (pipe(rp) || pipe(sp) || pipe(np))
		return;
	pid_t rpid = fork();
	if (rpid == 0)
		kd_receiver(rp[1]);
	read_line(rp[0], rl, sizeof(rl));
	unsigned rctx = 0;
	int rok = sscanf(rl, "R %u", &rctx) == 1;
	pid_t spid = fork();
	if (spid == 0)
		kd_sender(sp[1], rctx);
	close(sp[1]);
	read_line(sp[0], sl, sizeof(sl));
	close(sp[0]);
	unsigned sctx = 99, nctx = 98;
	unsigned long long sdma = 0, ndma = 1;
	int sok = rok && sscanf(sl, "S %u %llx", &sctx, &sdma) == 2;
	if (sok)
		usleep(300000);   /* let DMA run */
	int during = ctx_used();
	kill(spid, SIGKILL);
	double t0 = now_ms();
	int st = 0;
	waitpid(spid, &st, 0);   /* the process's files are released before it is reaped */
	double release_ms = now_ms() - t0;
	int after = wait_ctx_used(before + 1, 90000);
	CHECK(sok && WIFSIGNALED(st) && during == before + 2 && after == before + 1, "kill-during-dma",
	      "receiver said '%s', sender '%s', status %#x, contexts %d -> %d -> %d", rl, sl, st, before, during,
	      after);
	printf("  sender (context %u) killed during DMA; its file released in %.0f ms\n", sctx, release_ms);
	/* The next owner, at once. */
	pid_t npid = fork();
	if (npid == 0)
		kd_next(np[1], rctx);
	close(np[1]);
	read_line(np[0], nl, sizeof(nl));
	close(np[0]);
	int nok = sscanf(nl, "N %u %llx", &nctx, &ndma) == 2;
	int nst = 0;
	waitpid(npid, &nst, 0);
	close(rp[1]);
	read_line(rp[0], res, sizeof(res));
	close(rp[0]);
	int rst = 0;
	waitpid(rpid, &rst, 0);
	unsigned s_pkts = 0, s_bad = 9999, n_msgs = 0, n_bad = 9999, other = 9999;
	int rres = sscanf(res, "%u %u %u %u %u", &s_pkts, &s_bad, &n_msgs, &n_bad, &other) == 5;
	CHECK(rres && s_pkts > 0 && s_bad == 0 && other == 0, "dma-pages-not-reused",
	      "receiver: '%s' (packets of the killed sender, of them with other bytes, next owner's messages, "
	      "bad packets, others)", res);
	printf("  receiver got %u packets of the killed sender's messages, %u with other bytes; the next owner's "
	       "heap is at bus %#llx, the killed sender's was at %#llx (%s pages)\n", s_pkts, s_bad, ndma, sdma,
	       ndma == sdma ? "the same" : "other");
	CHECK(nok && nctx == sctx && WIFEXITED(nst) && WEXITSTATUS(nst) == 0 && rres && n_msgs == KD_NEXT_K &&
	      n_bad == 0, "next-owner-works", "next owner '%s' status %#x, receiver '%s'", nl, nst, res);
	int fin = wait_ctx_used(before, 10000);
	int fd = open(dev, O_RDWR);
	CHECK(fd >= 0 && fin == before, "reopen-after-kill", "%s, contexts %d", fd < 0 ? strerror(errno) : "open",
	      fin);
	if (fd >= 0)
		close(fd);
}

/* ---- hand-over: the previous owner's PIO bytes ------------------------------------------- */

/* Word k of the first owner's PIO payload: "SECR" in the high half, 0x5a5a00kk low. */
#define HO_HI 0x53454352u
#define HO_LEN 1000
static uint64_t ho_word(unsigned k)
{
	return (uint64_t)HO_HI << 32 | (0x5a5a0000u + k);
}

/* 32-bit words of buf that are halves of the first owner's words. */
static unsigned ho_leaks(const uint32_t *w, size_t nwords)
{
	unsigned n = 0;
	for (size_t i = 0; i < nwords; i++)
		n += w[i] == HO_HI || (w[i] & 0xffffff00u) == 0x5a5a0000u;
	return n;
}

/* A first owner stages HO_LEN bytes of PIO to itself and exits; a second process that
 * opens the same context can neither read those bytes from its page's PIO window (the
 * window is write-only: this holds with or without the buffer clear, and guards against
 * a read path) nor send them with a header of length HO_LEN and no payload staged (the
 * check that needs the staged-word rule and the clear at ctx_reset). */
static void handover(void)
{
	int before = ctx_used();
	int pfd[2];
	char line[64] = "";
	if (pipe(pfd))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		pn_hal_t *h = pci_open();
		uint64_t pay[HO_LEN / 8];
		pn_header_t hd;
		if (!h) {
			dprintf(pfd[1], "E open\n");
			_exit(1);
		}
		for (unsigned k = 0; k < HO_LEN / 8; k++)
			pay[k] = ho_word(k);
		int r = pn_send_pio(h, (unsigned)pn_node_id(h), (unsigned)pn_ctx_id(h), 0x5ec, pay, HO_LEN);
		int got = r == 0 && pn_recv_wait(h, &hd, 10000000000ll) == 1 && hd.length == HO_LEN;
		dprintf(pfd[1], "A %d %d\n", pn_ctx_id(h), got);
		_exit(0);   /* no pn_close: the kernel closes the file */
	}
	close(pfd[1]);
	read_line(pfd[0], line, sizeof(line));
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	unsigned actx = 99;
	int sent = 0;
	int aok = sscanf(line, "A %u %d", &actx, &sent) == 2 && sent == 1;
	int free_again = wait_ctx_used(before, 90000) == before;

	/* Read: the new owner's PIO window through its mapped page (write-only: zeros). */
	int fd = open(dev, O_RDWR);
	struct paranic_info in;
	memset(&in, 0, sizeof(in));
	unsigned leaked_read = 9999;
	if (fd >= 0 && ioctl(fd, PARANIC_IOC_GET_INFO, &in) == 0) {
		volatile uint32_t *pg = mmap(NULL, PN_CTX_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
					     PARANIC_MMAP_CTX_PAGE);
		if (pg != MAP_FAILED) {
			uint32_t win[PN_PIO_WINDOW_BYTES / 4];
			for (size_t i = 0; i < PN_PIO_WINDOW_BYTES / 4; i++)
				win[i] = pg[PN_PIO_WINDOW_OFFSET / 4 + i];
			leaked_read = ho_leaks(win, PN_PIO_WINDOW_BYTES / 4);
			munmap((void *)pg, PN_CTX_PAGE_BYTES);
		}
	}
	if (fd >= 0)
		close(fd);
	CHECK(aok && free_again && in.ctx_id == actx && leaked_read == 0, "handover-pio-read",
	      "first owner '%s', second owner's context %u, %u of its PIO window's words are the first owner's",
	      line, in.ctx_id, leaked_read);

	/* Send: a header of length HO_LEN, no payload staged, to itself. */
	wait_ctx_used(before, 90000);
	pn_hal_t *h = pci_open();
	unsigned leaked_sent = 9999, got = 0;
	uint32_t refused = 0;
	if (h) {
		uint64_t hdr[2] = {0, 0};
		pn_status_t s0, s1;
		pn_header_t hd;
		const void *pl;
		PN_SET(hdr, PN_HDR_DST_NODE, (unsigned)pn_node_id(h));
		PN_SET(hdr, PN_HDR_DST_CTX, (unsigned)pn_ctx_id(h));
		PN_SET(hdr, PN_HDR_TYPE, PN_TYPE_DATA);
		PN_SET(hdr, PN_HDR_LENGTH, HO_LEN);
		PN_SET(hdr, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
		PN_SET(hdr, PN_HDR_TAG, 0x5ed);
		pn_status(h, &s0);
		int r = pn_pio_raw(h, hdr, NULL, 0);
		leaked_sent = 0;
		if (r == 0 && pn_recv_wait(h, &hd, 5000000000ll) == 1 && pn_recv_payload(h, &pl) >= 0) {
			got = hd.length;
			leaked_sent = ho_leaks(pl, hd.length / 4);
			pn_recv_skip(h);
		}
		pn_status(h, &s1);
		refused = s1.errors - s0.errors;
		CHECK(pn_ctx_id(h) == (int)actx && leaked_sent == 0, "handover-pio-send",
		      "context %d (first owner's %u): a %u-byte packet went out, %u of its words the first owner's "
		      "(NIC errors +%u)", pn_ctx_id(h), actx, got, leaked_sent, refused);
		printf("  the unstaged %u-byte PIO packet: %s\n", HO_LEN,
		       !got ? (refused ? "refused by the NIC" : "not received")
			    : leaked_sent ? "sent WITH the first owner's bytes" : "sent without the first owner's bytes");
		pn_close(h);
	} else {
		CHECK(0, "handover-pio-send", "open failed");
	}
}

/* ---- deregistration while the NIC reads the window ------------------------------------ */

/* A raw context: a 1 MiB window (MEM_ALLOC) and DB_N 1 MiB DMA descriptors from it to a
 * context nobody opened (the NIC drops those packets, so nothing holds it back).
 * MEM_DEREGISTER while the window is mapped and the DMA pending: -EBUSY. After munmap it
 * returns only once the NIC is done with every descriptor (tx_done in the status block:
 * sent, or refused for lying outside the shrunk window). */
#define DB_N 4
static void dereg_busy(void)
{
	int fd = open(dev, O_RDWR);
	struct paranic_info in;
	memset(&in, 0, sizeof(in));
	if (fd < 0 || ioctl(fd, PARANIC_IOC_GET_INFO, &in) < 0) {
		CHECK(0, "dereg-busy", "open/GET_INFO: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t txb = ((size_t)in.tx_entries * 32 + 4095) & ~(size_t)4095;
	volatile uint8_t *page = mmap(NULL, PN_CTX_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				      PARANIC_MMAP_CTX_PAGE);
	volatile uint64_t *tx = mmap(NULL, txb, PROT_READ | PROT_WRITE, MAP_SHARED, fd, PARANIC_MMAP_TX_RING);
	volatile uint32_t *sts = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, PARANIC_MMAP_STATUS);
	struct paranic_mem m;
	memset(&m, 0, sizeof(m));
	m.len = KD_MSG;
	m.flags = PARANIC_MEM_ALLOC;
	void *win = MAP_FAILED;
	if (page != MAP_FAILED && tx != MAP_FAILED && sts != MAP_FAILED &&
	    ioctl(fd, PARANIC_IOC_MEM_REGISTER, &m) == 0)
		win = mmap(NULL, KD_MSG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)m.mmap_offset);
	if (win == MAP_FAILED) {
		CHECK(0, "dereg-busy", "setup: %s", strerror(errno));
		close(fd);
		return;
	}
	memset(win, 0x77, KD_MSG);
	uint64_t d[4] = {0, 0, 0, 0};
	PN_SET(d, PN_DESC_ADDR, m.dma);
	PN_SET(d, PN_DESC_LENGTH, KD_MSG);
	PN_SET(d, PN_DESC_DST_NODE, in.node_id);
	PN_SET(d, PN_DESC_DST_CTX, in.n_ctx - 1);   /* never opened here: dropped on arrival */
	PN_SET(d, PN_DESC_TYPE, PN_TYPE_DATA);
	PN_SET(d, PN_DESC_TAG, 0xde);
	/* DB_N descriptors: the NIC is still busy with them when the calls below run, even
	 * if this process loses the CPU for a while (each takes about a second here). */
	for (unsigned k = 0; k < DB_N; k++) {
		PN_SET(d, PN_DESC_COOKIE, k);
		for (int i = 0; i < 4; i++)
			tx[4 * k + i] = d[i];
	}
	__sync_synchronize();
	*(volatile uint32_t *)(page + PN_REG_TX_TAIL) = DB_N;
	uint32_t done0 = sts[PN_STS_TX_DONE_WORD];
	int r1 = ioctl(fd, PARANIC_IOC_MEM_DEREGISTER, &m);
	int e1 = errno;
	uint32_t done1 = sts[PN_STS_TX_DONE_WORD];
	CHECK(r1 == -1 && e1 == EBUSY, "dereg-busy", "MEM_DEREGISTER of a mapped window with DMA pending: %d (%s)",
	      r1, r1 ? strerror(e1) : "accepted");
	munmap(win, KD_MSG);
	uint32_t done2 = sts[PN_STS_TX_DONE_WORD];
	double t0 = now_ms();
	int r2 = ioctl(fd, PARANIC_IOC_MEM_DEREGISTER, &m);
	int e2 = errno;
	double ms = now_ms() - t0;
	uint32_t done3 = sts[PN_STS_TX_DONE_WORD];
	CHECK(r2 == 0 && done3 == DB_N, "dereg-waits-for-dma",
	      "MEM_DEREGISTER after munmap: %d (%s); tx_done %u before, %u after", r2, r2 ? strerror(e2) : "ok",
	      done2, done3);
	printf("  deregistration: tx_done %u/%u while mapped, %u at the call, %u of %u on return after %.0f ms "
	       "(the DMA was %s when it was called)\n", done0, done1, done2, done3, DB_N, ms,
	       done2 < DB_N ? "still pending" : "already done");
	munmap((void *)page, PN_CTX_PAGE_BYTES);
	munmap((void *)tx, txb);
	munmap((void *)sts, 4096);
	close(fd);
}

/* ---- the device falls off the bus ------------------------------------------------------ */

static int sysfs_read(const char *attr, char *buf, size_t n)
{
	char path[160];
	const char *base = strrchr(dev, '/');
	snprintf(path, sizeof(path), "/sys/class/misc/%s/%s", base ? base + 1 : dev, attr);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	ssize_t r = read(fd, buf, n - 1);
	int e = errno;
	close(fd);
	if (r < 0)
		return -e;
	buf[r] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* A kernel send (write()) of 8 bytes to this node's context 0. */
static int ksend(int fd)
{
	struct {
		struct paranic_send s;
		uint64_t pay;
	} __attribute__((packed)) m;
	memset(&m, 0, sizeof(m));
	m.s.dst_ctx = 0;
	m.s.length = 8;
	m.pay = 0x1234;
	return write(fd, &m, sizeof(m)) < 0 ? -errno : 0;
}

static int cmd_dead(unsigned long remove_at)
{
	char buf[64], path[160];
	const char *base = strrchr(dev, '/');
	/* Before: a file for kernel sends, one with a registered window. */
	int kfd = open(dev, O_RDWR);
	int wfd = open(dev, O_RDWR);
	struct paranic_mem m;
	memset(&m, 0, sizeof(m));
	m.len = 65536;
	m.flags = PARANIC_MEM_ALLOC;
	int rr = wfd >= 0 ? ioctl(wfd, PARANIC_IOC_MEM_REGISTER, &m) : -1;
	int r0 = kfd >= 0 ? ksend(kfd) : -1;
	int c0 = sysfs_read("counters/host_rx_packets", buf, sizeof(buf));
	CHECK(kfd >= 0 && wfd >= 0 && rr == 0 && r0 == 0, "dead-setup", "open %d/%d register %d send %d", kfd, wfd,
	      rr, r0);
	/* The device goes: a write to the register model's removal register (config space,
	 * through sysfs; the BAR itself is the driver's). */
	snprintf(path, sizeof(path), "/sys/class/misc/%s/device/config", base ? base + 1 : dev);
	int cfd = open(path, O_RDWR);
	uint32_t one = 1, id = 0;
	int wr = cfd >= 0 ? (int)pwrite(cfd, &one, 4, (off_t)remove_at) : -1;
	int rdc = cfd >= 0 ? (int)pread(cfd, &id, 4, 0) : -1;
	if (cfd >= 0)
		close(cfd);
	CHECK(wr == 4 && rdc == 4 && id == 0xffffffffu, "dead-remove", "%s: write %d read %d, ids read %#x", path, wr,
	      rdc, id);
	/* sysfs: an all-ones counter is the device gone, not a count. */
	int c1 = sysfs_read("counters/host_rx_packets", buf, sizeof(buf));
	CHECK(c0 == 0 && (c1 == -ENODEV || c1 == -EIO), "dead-sysfs", "counters/host_rx_packets: %s",
	      c1 ? strerror(-c1) : buf);
	/* open: the hand-over reads all-ones: -ENODEV at once (no wait, no -EBUSY). */
	double t0 = now_ms();
	int fd = open(dev, O_RDWR);
	int e = errno;
	double open_ms = now_ms() - t0;
	CHECK(fd < 0 && e == ENODEV, "dead-open", "%s", fd >= 0 ? "opened" : strerror(e));
	if (fd >= 0)
		close(fd);
	/* kernel send: the PIO window never frees; -ENODEV, not a wait of quiesce_ms. */
	t0 = now_ms();
	int rs = 0;
	for (int i = 0; i < 3 && rs == 0; i++)
		rs = ksend(kfd);
	double send_ms = now_ms() - t0;
	CHECK(rs == -ENODEV, "dead-send", "kernel send: %s", rs ? strerror(-rs) : "accepted three times");
	/* deregistration: the quiesce reads all-ones. */
	t0 = now_ms();
	int rd = ioctl(wfd, PARANIC_IOC_MEM_DEREGISTER, &m);
	e = errno;
	double dereg_ms = now_ms() - t0;
	CHECK(rd == -1 && e == ENODEV, "dead-deregister", "%s", rd ? strerror(e) : "accepted");
	t0 = now_ms();
	close(kfd);
	close(wfd);
	double close_ms = now_ms() - t0;
	printf("  dead device: open %.1f ms, kernel send %.1f ms, deregister %.1f ms, two closes %.1f ms\n", open_ms,
	       send_ms, dereg_ms, close_ms);
	printf("%s %d\n", fails ? "FAILED" : "PASS", fails);
	return fails;
}

/* pn_cluster_status through the pci backend (the driver's sysfs): one line for this
 * board, one per link; index 1 must be -ENOENT (a board sees itself only). */
static int cmd_status(void)
{
	pn_open_opts_t o;
	pn_node_status_t st;
	pn_hal_t *h;
	unsigned p;
	int r;

	pn_open_opts_init(&o);
	o.backend = "pci";
	setenv("PARANIC_DEVICE", dev, 1);
	r = pn_open(&h, &o);
	if (r) {
		printf("FAIL status open: %s\n", pn_strerror(r));
		return 1;
	}
	r = pn_cluster_status(h, 0, &st);
	if (r) {
		printf("FAIL status: %s\n", pn_strerror(r));
		pn_close(h);
		return 1;
	}
	printf("PN-STATUS node %u dna 0x%016llx cfg_node %u fw_state %u fw_error %u epoch %u flags %u n_links %u\n",
	       st.node_id, (unsigned long long)st.dna, st.cfg_node, st.fw_state, st.fw_error, st.epoch, st.flags,
	       st.n_links);
	for (p = 0; p < st.n_links; p++)
		printf("PN-STATUS-LINK %u port %u state %u flags %u tx %u rx %u crc %u\n", p, st.links[p].port,
		       st.links[p].state, st.links[p].flags, st.links[p].tx_packets, st.links[p].rx_packets,
		       st.links[p].crc_errors);
	r = pn_cluster_status(h, 1, &st);
	printf("PN-STATUS index1 %d\n", r);
	pn_close(h);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: pn_guest info|status|setnode N NODES X Y|bad|killdma|handover|deregbusy|dead CFG [DEV]\n");
		return 2;
	}
	const char *cmd = argv[1];
	int nargs = !strcmp(cmd, "setnode") ? 4 : !strcmp(cmd, "dead") ? 1 : 0;
	if (argc > 2 + nargs)
		dev = argv[2 + nargs];
	rng ^= (uint64_t)time(NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(cmd, "info"))
		return cmd_info();
	if (!strcmp(cmd, "status"))
		return cmd_status();
	if (!strcmp(cmd, "setnode") && argc >= 6)
		return cmd_setnode((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]),
				   (unsigned)atoi(argv[5]));
	if (!strcmp(cmd, "bad")) {
		bad_ioctls();
		bad_mmaps();
		bad_privilege();
		bad_close();
		printf("%s %d\n", fails ? "FAILED" : "PASS", fails);
		return fails;
	}
	if (!strcmp(cmd, "killdma") || !strcmp(cmd, "handover") || !strcmp(cmd, "deregbusy")) {
		if (!strcmp(cmd, "killdma"))
			kill_during_dma();
		else if (!strcmp(cmd, "handover"))
			handover();
		else
			dereg_busy();
		printf("%s %d\n", fails ? "FAILED" : "PASS", fails);
		return fails;
	}
	if (!strcmp(cmd, "dead") && argc >= 3)
		return cmd_dead(strtoul(argv[2], NULL, 0));
	fprintf(stderr, "pn_guest: unknown command %s\n", cmd);
	return 2;
}
