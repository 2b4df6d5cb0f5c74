/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_guest: the ParaNIC QEMU guest's tool (static; docs/driver.md "QEMU").
 *   pn_guest info [DEV]                      GET_INFO of a fresh context
 *   pn_guest setnode NODE NODES X Y [DEV]    SET_NODE_ID (needs CAP_NET_ADMIN)
 *   pn_guest bad [DEV]                       bad input: random ioctls, mmap out of
 *                                            bounds, no privilege, double close
 *   pn_guest killdma [DEV]                   a process killed during 1 MiB DMA sends
 *                                            (libparanic pci backend) releases its context
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

/* A child sends 1 MiB DMA messages to itself through libparanic's pci backend and is
 * SIGKILLed in the middle; its context must come back. */
static void kill_during_dma(void)
{
	int before = ctx_used();
	int pfd[2];
	if (pipe(pfd))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		setenv("PARANIC_BACKEND", "pci", 1);
		setenv("PARANIC_DEVICE", dev, 1);
		pn_hal_t *h;
		int r = pn_open(&h, NULL);
		if (r < 0) {
			dprintf(pfd[1], "E%d\n", r);
			_exit(1);
		}
		void *buf;
		size_t len = 1 << 20;
		if (pn_dma_alloc(h, len, &buf) < 0)
			_exit(2);
		memset(buf, 0x5a, len);
		int started = 0;
		for (;;) {
			r = pn_send_dma(h, (unsigned)pn_node_id(h), (unsigned)pn_ctx_id(h), 1, buf, len);
			if (r < 0 && r != -EAGAIN && r != -ENOBUFS)
				_exit(3);
			if (!started) {
				dprintf(pfd[1], "S\n");
				started = 1;
			}
			pn_header_t hd;
			while (pn_recv_header(h, &hd) > 0)
				pn_recv_skip(h);
		}
	}
	close(pfd[1]);
	char c[16] = {0};
	ssize_t n = read(pfd[0], c, sizeof(c) - 1);
	close(pfd[0]);
	if (n > 0 && c[0] == 'S')
		usleep(300000);   /* let DMA run */
	int during = ctx_used();
	kill(pid, SIGKILL);
	int st = 0;
	waitpid(pid, &st, 0);
	int after = wait_ctx_used(before, 90000);   /* the simulated NIC finishes a 1 MiB message in ~1 s */
	CHECK(n > 0 && c[0] == 'S' && WIFSIGNALED(st) && during == before + 1 && after == before, "kill-during-dma",
	      "child said %.15s, status %#x, contexts %d -> %d -> %d", n > 0 ? c : "nothing", st, before, during,
	      after);
	/* The context is usable again. */
	int fd = open(dev, O_RDWR);
	CHECK(fd >= 0, "reopen-after-kill", "%s", strerror(errno));
	if (fd >= 0)
		close(fd);
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
		fprintf(stderr, "usage: pn_guest info|status|setnode N NODES X Y|bad|killdma [DEV]\n");
		return 2;
	}
	const char *cmd = argv[1];
	int nargs = !strcmp(cmd, "setnode") ? 4 : 0;
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
	if (!strcmp(cmd, "killdma")) {
		kill_during_dma();
		printf("%s %d\n", fails ? "FAILED" : "PASS", fails);
		return fails;
	}
	fprintf(stderr, "pn_guest: unknown command %s\n", cmd);
	return 2;
}
