/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_proxydev: a ParaNIC PCI function for a QEMU 7.2 guest, as a device process of
 * QEMU's multi-process mode (`-device x-pci-proxy-dev,fd=N`). Written from the
 * description of QEMU's mpqemu protocol (docs/driver.md, "The mpqemu protocol");
 * no QEMU code.
 *
 *   pn_proxydev --fd N --model [--remove-at CFG] [-v]
 *   pn_proxydev --fd N --sim SOCKET --node K [--nodes J] [-v]
 *
 * It answers PCI configuration cycles (the ids of paranic.spec.protocol, one 1 MiB 32-bit
 * memory BAR, INTA, no capabilities, so no MSI), BAR0 reads and writes, and takes the
 * guest's RAM as file descriptors (SYNC_SYSMEM). Behind BAR0:
 *  --model  a register model of what the driver's probe and the context hand-over
 *           read (ident, version, info_n_ctx, info_mtu, node; ctx_state idle; the rest
 *           stores and reads back); with --remove-at, a write to config-space offset
 *           CFG (a device-specific register, 0x40..0xfc) makes the function fall off
 *           the bus: from then on every read (BAR0 and config) returns all ones and
 *           writes are dropped, as after a surprise removal or a dead PCIe link (the
 *           driver's dead-device paths are tested with it; root in the guest writes
 *           the register through sysfs, which a driver-owned BAR could not be);
 *  --sim    node K of a running paranic-sim: the process attaches as a *device client*
 *           (pn_sim_shm.h, PN_SIM_HELLO_DEVICE) with the guest RAM's memfd, so the
 *           harness applies BAR0 accesses on the node's Wishbone bus and serves the
 *           NIC's DMA from guest RAM (bus address = guest physical address).
 * One line per event on stderr with -v; a summary at exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "paranic/pn_protocol.h"
#include "pn_csr.h"
#include "pn_sim_shm.h"

/* ---- the mpqemu wire format (QEMU 7.2, x86-64 host) -------------------------------------
 * Every message: a 16-byte header {int32 cmd; 4 bytes padding; uint64 size}, then `size`
 * bytes of payload; file descriptors ride on the header as SCM_RIGHTS (at most 8).
 * Requests that wait for an answer (config and BAR accesses, reset) get a MQ_RET message
 * whose payload is one uint64. SYNC_SYSMEM and SET_IRQFD are not answered. */
enum mq_cmd {
	MQ_SYNC_SYSMEM = 0, MQ_RET = 1, MQ_CFGWRITE = 2, MQ_CFGREAD = 3, MQ_BAR_WRITE = 4, MQ_BAR_READ = 5,
	MQ_SET_IRQFD = 6, MQ_DEVICE_RESET = 7, MQ_CMD_MAX = 8,
};
#define MQ_MAX_FDS 8

struct mq_hdr {
	int32_t cmd;
	uint32_t pad;
	uint64_t size;
};
struct mq_sysmem {            /* one entry per fd: guest-physical range and fd offset */
	uint64_t gpa[MQ_MAX_FDS];
	uint64_t size[MQ_MAX_FDS];
	int64_t offset[MQ_MAX_FDS];
};
struct mq_cfg {
	uint32_t addr, val;
	int32_t len;
};
struct mq_bar {
	uint64_t addr;        /* bus address (BAR base + offset) */
	uint64_t val;
	uint32_t size;        /* 1, 2, 4 or 8 */
	uint8_t memory;       /* memory (not I/O) BAR */
	uint8_t pad[3];
};
union mq_payload {
	uint64_t u64;
	struct mq_sysmem sysmem;
	struct mq_cfg cfg;
	struct mq_bar bar;
};
_Static_assert(sizeof(struct mq_hdr) == 16, "mpqemu header");
_Static_assert(sizeof(struct mq_bar) == 24, "BarAccessMsg");
_Static_assert(sizeof(struct mq_cfg) == 12, "PciConfDataMsg");
_Static_assert(sizeof(struct mq_sysmem) == 192, "SyncSysmemMsg");

/* ---- state --------------------------------------------------------------------------------- */

static int verbose;
static int qfd = -1;                 /* the socket QEMU's proxy talks on */
static uint8_t cfg[256], wmask[256]; /* configuration space and its writable bits */

static struct {
	uint64_t cfg_reads, cfg_writes, bar_reads, bar_writes, sysmem, bad;
} stats;

/* Guest RAM as the last SYNC_SYSMEM described it. */
static int ram_fd = -1;
static uint64_t ram_bytes;
static bool ram_identity;            /* every section: fd offset == guest-physical address */

/* --model */
static uint32_t *model_regs;         /* BAR0 as 32-bit words */
static long model_remove_at = -1;    /* --remove-at: a config write here removes the device */
static bool model_removed;

/* --sim */
static const char *sim_socket;
static int sim_node = -1, sim_nodes;
static int sim_sock = -1;
static struct pn_sim_ctl *ctl;
static struct pn_sim_op *queue;
static uint32_t qmask;
static uint64_t q_head, rseq;
static const volatile struct pn_sim_global *glob;
static bool sim_attached, sim_dead;

static void logv(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logv(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "pn_proxydev: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* ---- configuration space --------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }

static void cfg_init(void)
{
	memset(cfg, 0, sizeof(cfg));
	memset(wmask, 0, sizeof(wmask));
	put16(cfg + 0x00, PN_PCI_VENDOR_ID);
	put16(cfg + 0x02, PN_PCI_DEVICE_ID);
	put16(cfg + 0x04, 0);                /* command: off until the OS enables it */
	put16(wmask + 0x04, 0x0546);         /* memory space, bus master, parity, SERR, INTx disable */
	wmask[0x05] |= 0x04;
	put16(cfg + 0x06, 0);                /* status: no capability list (no MSI) */
	cfg[0x08] = 1;                       /* revision */
	cfg[0x09] = 0x00;                    /* prog-if */
	cfg[0x0a] = 0x80;                    /* subclass: other network controller */
	cfg[0x0b] = 0x02;                    /* class: network */
	cfg[0x0c] = 0x10;                    /* cache line */
	wmask[0x0c] = 0xff;
	wmask[0x0d] = 0xff;                  /* latency timer */
	cfg[0x0e] = 0x00;                    /* header type 0, single function */
	put32(cfg + 0x10, 0x0);              /* BAR0: memory, 32-bit, not prefetchable */
	put32(wmask + 0x10, ~(uint32_t)(PN_BAR0_BYTES - 1) & 0xfffffff0u);
	put16(cfg + 0x2c, PN_PCI_VENDOR_ID); /* subsystem */
	put16(cfg + 0x2e, PN_PCI_DEVICE_ID);
	wmask[0x3c] = 0xff;                  /* interrupt line */
	cfg[0x3d] = 1;                       /* INTA */
}

static uint32_t cfg_read(uint32_t addr, int len)
{
	if (model_removed)   /* all ones of the access's size (len comes from QEMU: no shift >= 32) */
		return len >= 1 && len < 4 ? (1u << (8 * len)) - 1 : 0xffffffffu;
	uint32_t v = 0;
	if (addr >= sizeof(cfg) || len < 1 || len > 4 || addr + (uint32_t)len > sizeof(cfg))
		return 0;   /* extended space and out of range read as zero */
	for (int i = 0; i < len; i++)
		v |= (uint32_t)cfg[addr + i] << (8 * i);
	return v;
}

static void cfg_write(uint32_t addr, uint32_t val, int len)
{
	if (addr >= sizeof(cfg) || len < 1 || len > 4 || addr + (uint32_t)len > sizeof(cfg) || model_removed)
		return;
	if (model_remove_at >= 0 && addr == (uint32_t)model_remove_at) {
		model_removed = true;
		logv("config write at %#x: the device is removed (reads all ones from now on)", addr);
		return;
	}
	for (int i = 0; i < len; i++) {
		uint8_t b = (uint8_t)(val >> (8 * i)), m = wmask[addr + i];
		cfg[addr + i] = (uint8_t)((cfg[addr + i] & ~m) | (b & m));
	}
}

/* ---- the simulator ------------------------------------------------------------------------- */

static void sim_wake(void)
{
	char c = 'w';
	if (send(sim_sock, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		sim_dead = true;
}

static void sim_check(void)
{
	char c;
	ssize_t n = recv(sim_sock, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		sim_dead = true;
}

static void sim_push(uint32_t kind, uint32_t off, uint64_t value)
{
	unsigned spins = 0;
	if (sim_dead)
		return;
	while (q_head - __atomic_load_n(&ctl->q_tail, __ATOMIC_ACQUIRE) > qmask) {
		if ((++spins & 1023) == 0) {
			sim_wake();
			sim_check();
			if (sim_dead)
				return;
		}
		sched_yield();
	}
	struct pn_sim_op *e = &queue[q_head & qmask];
	e->kind = kind;
	e->off = off;
	e->value = value;
	__atomic_store_n(&ctl->q_head, ++q_head, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&glob->sleeping, __ATOMIC_SEQ_CST))
		sim_wake();
}

static uint32_t sim_read32(uint32_t off)
{
	uint64_t seq = ++rseq;
	unsigned spins = 0;
	sim_push(PN_SIM_OP_R32, off, seq);
	while (!sim_dead && __atomic_load_n(&ctl->r_seq, __ATOMIC_ACQUIRE) != seq) {
		if ((++spins & 1023) == 0) {
			sim_check();
			if (__atomic_load_n(&glob->sleeping, __ATOMIC_SEQ_CST))
				sim_wake();
		}
		sched_yield();
	}
	if (sim_dead)
		return 0xffffffffu;   /* a device that fell off the bus */
	return (uint32_t)__atomic_load_n(&ctl->r_value, __ATOMIC_RELAXED);
}

static int sim_attach(void)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	if (strlen(sim_socket) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, sim_socket);
	sim_sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sim_sock < 0 || connect(sim_sock, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -errno;
	/* Our own memory: the control block and the MMIO queue only. */
	const uint32_t qsize = 4096;
	size_t queue_off = 4096, mem = queue_off + qsize * sizeof(struct pn_sim_op);
	int memfd = memfd_create("pn_proxydev", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0 || ftruncate(memfd, (off_t)mem) < 0 || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return -errno;
	uint8_t *p = mmap(NULL, mem, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	ctl = (struct pn_sim_ctl *)p;
	ctl->magic = PN_SIM_MAGIC_CTL;
	ctl->version = PN_SIM_VERSION;
	ctl->qsize = qsize;
	ctl->queue_off = queue_off;
	queue = (struct pn_sim_op *)(p + queue_off);
	qmask = qsize - 1;

	struct pn_sim_hello h;
	memset(&h, 0, sizeof(h));
	h.magic = PN_SIM_MAGIC_HELLO;
	h.version = PN_SIM_VERSION;
	h.node = sim_node;
	h.ctx = -1;
	h.nodes = sim_nodes;
	h.pid = (int32_t)getpid();
	h.flags = PN_SIM_HELLO_DEVICE;
	h.mem_bytes = mem;
	h.heap_bytes = ram_bytes;   /* the guest RAM fd's size (bus addresses 0 .. ram_bytes) */
	int fds[2] = {memfd, ram_fd};
	struct iovec iov = {&h, sizeof(h)};
	char cbuf[CMSG_SPACE(sizeof(fds))];
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	if (sendmsg(sim_sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(h))
		return -errno;
	close(memfd);

	struct pn_sim_welcome w;
	int gfd = -1;
	char cb2[CMSG_SPACE(sizeof(int))];
	struct iovec iov2 = {&w, sizeof(w)};
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov2;
	mh.msg_iovlen = 1;
	mh.msg_control = cb2;
	mh.msg_controllen = sizeof(cb2);
	ssize_t n;
	do
		n = recvmsg(sim_sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (cm = CMSG_FIRSTHDR(&mh); n > 0 && cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&gfd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(w) || w.magic != PN_SIM_MAGIC_WELCOME)
		return n < 0 ? -errno : -ECONNRESET;
	if (w.status < 0 || gfd < 0)
		return w.status < 0 ? w.status : -EPROTO;
	glob = mmap(NULL, w.global_bytes, PROT_READ, MAP_SHARED, gfd, 0);
	close(gfd);
	if (glob == MAP_FAILED)
		return -errno;
	fcntl(sim_sock, F_SETFL, fcntl(sim_sock, F_GETFL) | O_NONBLOCK);
	logv("attached to %s as node %u (job of %u nodes, %s, %u contexts, MTU %u); guest RAM %llu MiB at bus 0",
	     sim_socket, w.node, w.nodes, w.topo, w.n_ctx, w.mtu, (unsigned long long)(ram_bytes >> 20));
	sim_attached = true;
	return 0;
}

/* ---- BAR0 ------------------------------------------------------------------------------------ */

static uint32_t model_read(uint32_t off)
{
	if (model_removed)
		return 0xffffffffu;   /* what a read of a device that is gone completes with */
	if (off == PN_CSR_IDENT)
		return PN_NIC_IDENT;
	if (off == PN_CSR_VERSION)
		return PN_NIC_VERSION;
	if (off == PN_CSR_HOST_INFO_N_CTX)
		return PN_DEFAULT_CONTEXTS;
	if (off == PN_CSR_HOST_INFO_MTU)
		return PN_DEFAULT_MTU;
	if (off == PN_CSR_HOST_CTX_STATE)
		return 0;   /* every context idle */
	return model_regs[off / 4];
}

static uint32_t bar_read32(uint32_t off)
{
	if (sim_socket)
		return sim_attached ? sim_read32(off) : 0xffffffffu;
	return model_read(off);
}

static void bar_write32(uint32_t off, uint32_t v)
{
	if (sim_socket) {
		if (sim_attached)
			sim_push(PN_SIM_OP_W32, off, v);
		return;
	}
	if (model_removed)
		return;
	model_regs[off / 4] = v;
}

static uint64_t bar_access(const struct mq_bar *b, bool write)
{
	uint32_t off = (uint32_t)(b->addr & (PN_BAR0_BYTES - 1));   /* the BAR is size-aligned */
	uint32_t sz = b->size;
	if (!(sz == 1 || sz == 2 || sz == 4 || sz == 8) || off % sz) {
		stats.bad++;
		logv("BAR0 %s of %u bytes at %#x: unaligned or odd size, %s", write ? "write" : "read", sz, off,
		     write ? "dropped" : "reads all ones");
		return ~0ull;
	}
	if (write) {
		stats.bar_writes++;
		if (sz == 8 && sim_socket && sim_attached) {
			sim_push(PN_SIM_OP_W64, off, b->val);   /* one beat of the 64-bit bus (SoC: two writes, low first) */
		} else if (sz == 8) {
			bar_write32(off, (uint32_t)b->val);
			bar_write32(off + 4, (uint32_t)(b->val >> 32));
		} else if (sz == 4) {
			bar_write32(off, (uint32_t)b->val);
		} else {
			/* The NicCore's Wishbone slave takes whole words (LitePCIe does the same). */
			stats.bad++;
			logv("BAR0 %u-byte write at %#x dropped (the NIC takes 32/64-bit stores)", sz, off);
		}
		if (verbose > 1)
			logv("W%u %#x = %#llx", sz * 8, off, (unsigned long long)b->val);
		return 0;
	}
	stats.bar_reads++;
	uint64_t v;
	if (sz == 8)
		v = bar_read32(off) | (uint64_t)bar_read32(off + 4) << 32;
	else {
		uint32_t w = bar_read32(off & ~3u);
		v = (w >> (8 * (off & 3))) & (sz == 4 ? 0xffffffffu : (1u << (8 * sz)) - 1);
	}
	if (verbose > 1)
		logv("R%u %#x -> %#llx", sz * 8, off, (unsigned long long)v);
	return v;
}

/* ---- guest RAM ------------------------------------------------------------------------------ */

static void sync_sysmem(const struct mq_sysmem *m, const int *fds, int nfds)
{
	struct stat first, st;
	bool ident = nfds > 0;
	stats.sysmem++;
	for (int i = 0; i < nfds; i++) {
		if (fstat(fds[i], &st) < 0) {
			ident = false;
			continue;
		}
		if (i == 0)
			first = st;
		if (st.st_ino != first.st_ino || st.st_dev != first.st_dev || (uint64_t)m->offset[i] != m->gpa[i] ||
		    m->gpa[i] + m->size[i] > (uint64_t)st.st_size)
			ident = false;
		if (verbose > 1 || (verbose && stats.sysmem == 1))
			logv("sysmem[%d]: gpa %#llx size %#llx fd offset %#llx (file %llu MiB)", i,
			     (unsigned long long)m->gpa[i], (unsigned long long)m->size[i],
			     (unsigned long long)m->offset[i], (unsigned long long)(st.st_size >> 20));
	}
	if (!ident)
		logv("guest RAM is not one file with offset = guest-physical address (%d sections): DMA would "
		     "not work; use -m <= 2G with memory-backend-memfd", nfds);
	if (ram_fd < 0 && ident) {
		ram_fd = dup(fds[0]);
		fstat(ram_fd, &st);
		ram_bytes = (uint64_t)st.st_size;
		ram_identity = true;
	} else if (ram_fd >= 0 && ident) {
		fstat(fds[0], &st);
		struct stat cur;
		fstat(ram_fd, &cur);
		if (st.st_ino != cur.st_ino)
			logv("guest RAM changed file: not supported, DMA keeps the first one");
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (sim_socket && !sim_attached && ram_identity) {
		int r = sim_attach();
		if (r < 0) {
			logv("cannot attach to the simulator at %s as node %d: %s", sim_socket, sim_node, strerror(-r));
			exit(1);
		}
	}
}

/* ---- the message loop ------------------------------------------------------------------------- */

static int recv_full(void *buf, size_t len, int *fds, int *nfds)
{
	size_t got = 0;
	while (got < len) {
		struct iovec iov = {(uint8_t *)buf + got, len - got};
		char cbuf[CMSG_SPACE(MQ_MAX_FDS * sizeof(int))];
		struct msghdr mh;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		ssize_t n = recvmsg(qfd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? 0 : -errno;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int tmp[MQ_MAX_FDS * 2];
			if (k > MQ_MAX_FDS * 2)
				k = MQ_MAX_FDS * 2;
			memcpy(tmp, CMSG_DATA(cm), (size_t)k * sizeof(int));
			for (int i = 0; i < k; i++) {
				if (fds && *nfds < MQ_MAX_FDS)
					fds[(*nfds)++] = tmp[i];
				else
					close(tmp[i]);
			}
		}
		got += (size_t)n;
	}
	return 1;
}

static int reply(uint64_t v)
{
	struct {
		struct mq_hdr h;
		uint64_t v;
	} m = {{MQ_RET, 0, 8}, v};
	const uint8_t *p = (const uint8_t *)&m;
	size_t left = sizeof(m);
	while (left) {
		ssize_t n = send(qfd, p, left, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

static int serve(void)
{
	for (;;) {
		struct mq_hdr h;
		union mq_payload d;
		int fds[MQ_MAX_FDS], nfds = 0;
		int r = recv_full(&h, sizeof(h), fds, &nfds);
		if (r <= 0) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			return r;   /* 0: QEMU closed the connection */
		}
		memset(&d, 0, sizeof(d));
		if (h.size > sizeof(d) || h.cmd < 0 || h.cmd >= MQ_CMD_MAX) {
			logv("bad message: cmd %d size %llu", h.cmd, (unsigned long long)h.size);
			return -EPROTO;
		}
		if (h.size && (r = recv_full(&d, h.size, NULL, NULL)) <= 0)
			return r;
		switch (h.cmd) {
		case MQ_SYNC_SYSMEM:
			sync_sysmem(&d.sysmem, fds, nfds);
			break;
		case MQ_SET_IRQFD:
			/* INTx through an eventfd pair (KVM irqfd): the NIC model raises no INTx, and
			 * with TCG QEMU does not wire it up; keep them closed. */
			if (verbose)
				logv("SET_IRQFD with %d fds (unused: no INTx)", nfds);
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			break;
		case MQ_CFGREAD:
			stats.cfg_reads++;
			if (reply(cfg_read(d.cfg.addr, d.cfg.len)) < 0)
				return -EPIPE;
			if (verbose > 1)
				logv("cfg read %#x/%d -> %#x", d.cfg.addr, d.cfg.len, cfg_read(d.cfg.addr, d.cfg.len));
			break;
		case MQ_CFGWRITE:
			stats.cfg_writes++;
			cfg_write(d.cfg.addr, d.cfg.val, d.cfg.len);
			if (verbose > 1)
				logv("cfg write %#x/%d = %#x", d.cfg.addr, d.cfg.len, d.cfg.val);
			if (reply(0) < 0)
				return -EPIPE;
			break;
		case MQ_BAR_READ:
		case MQ_BAR_WRITE:
			if (reply(bar_access(&d.bar, h.cmd == MQ_BAR_WRITE)) < 0)
				return -EPIPE;
			break;
		case MQ_DEVICE_RESET:
			if (verbose)
				logv("device reset");
			put16(cfg + 0x04, 0);
			if (reply(0) < 0)
				return -EPIPE;
			break;
		default:
			logv("unexpected message %d", h.cmd);
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			break;
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"fd", required_argument, 0, 'f'},   {"model", no_argument, 0, 'm'},
		{"sim", required_argument, 0, 's'},  {"node", required_argument, 0, 'n'},
		{"nodes", required_argument, 0, 'N'}, {"verbose", no_argument, 0, 'v'},
		{"remove-at", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	bool model = false;
	int c;
	while ((c = getopt_long(argc, argv, "f:ms:n:N:r:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': qfd = atoi(optarg); break;
		case 'm': model = true; break;
		case 's': sim_socket = optarg; break;
		case 'n': sim_node = atoi(optarg); break;
		case 'N': sim_nodes = atoi(optarg); break;
		case 'v': verbose++; break;
		case 'r': {
			char *end;
			model_remove_at = strtol(optarg, &end, 0);
			if (*end || model_remove_at < 0x40 || model_remove_at > 0xfc || model_remove_at % 4) {
				fprintf(stderr, "pn_proxydev: --remove-at %s: need a device-specific config dword "
					"(0x40 .. 0xfc)\n", optarg);
				return 2;
			}
			break;
		}
		default:
			fprintf(stderr, "usage: pn_proxydev --fd N (--model [--remove-at CFG] | --sim SOCKET --node K [--nodes J]) [-v]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (qfd < 0 || model == !!sim_socket || (sim_socket && sim_node < 0)) {
		fprintf(stderr, "pn_proxydev: need --fd and exactly one of --model, --sim (with --node)\n");
		return 2;
	}
	if (model_remove_at >= 0 && !model) {
		fprintf(stderr, "pn_proxydev: --remove-at needs --model\n");
		return 2;
	}
	cfg_init();
	if (model) {
		model_regs = calloc(PN_BAR0_BYTES / 4, sizeof(uint32_t));
		if (!model_regs)
			return 1;
		model_regs[PN_CSR_NODE / 4] = 0;
	}
	logv("serving fd %d: vendor %#x device %#x, BAR0 %u KiB, %s", qfd, PN_PCI_VENDOR_ID, PN_PCI_DEVICE_ID,
	     PN_BAR0_BYTES >> 10, model ? "register model" : "simulator");
	int r = serve();
	logv("QEMU %s; %llu config reads, %llu config writes, %llu BAR0 reads, %llu BAR0 writes, %llu SYNC_SYSMEM, "
	     "%llu bad accesses, BAR0 at %#x, command %#x",
	     r == 0 ? "closed the connection" : strerror(-r), (unsigned long long)stats.cfg_reads,
	     (unsigned long long)stats.cfg_writes, (unsigned long long)stats.bar_reads,
	     (unsigned long long)stats.bar_writes, (unsigned long long)stats.sysmem, (unsigned long long)stats.bad,
	     cfg_read(0x10, 4), cfg_read(0x04, 2));
	return r < 0 ? 1 : 0;
}
