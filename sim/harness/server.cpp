/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the cluster's clock, the clients (UNIX socket + shared memory), the
 * "driver" (bring-up, context configuration through the CSRs), start and stop.
 * See docs/simulator.md.
 */
#include <cerrno>
#include <cstddef>
#include <csignal>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "Vcluster.h"
#include "harness.h"

int sim_verbose;
static FILE *log_fp;

void sim_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "paranic-sim: %s\n", buf);
	if (log_fp) {
		fprintf(log_fp, "%s\n", buf);
		fflush(log_fp);
	}
}

void sim_open_log(const char *path)
{
	log_fp = fopen(path, "a");
	if (!log_fp)
		fprintf(stderr, "paranic-sim: cannot open %s: %s\n", path, strerror(errno));
}

static double wall_s()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Operations a node's MMIO queue takes ahead of its bus. */
static const size_t SIM_MAX_QUEUED = 4096;

/* ============================================================================================ */

Harness::Harness(const Config &c) : cfg(c) {}

static inline void store64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

void Harness::setup_shm()
{
	shm_bytes = PN_SIM_TRACE_OFF + (size_t)SIM_NODES * SIM_N_CTX * sizeof(pn_sim_trace);
	shm_bytes = (shm_bytes + 4095) & ~(size_t)4095;
	shm_fd = open(cfg.shm_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (shm_fd < 0 && errno == EEXIST) {
		unlink(cfg.shm_path.c_str());   /* stale, from a simulator that was killed */
		shm_fd = open(cfg.shm_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (shm_fd < 0 || ftruncate(shm_fd, (off_t)shm_bytes) < 0) {
		sim_log("cannot create %s: %s", cfg.shm_path.c_str(), strerror(errno));
		unlink(cfg.socket.c_str());
		exit(1);
	}
	void *p = mmap(nullptr, shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	if (p == MAP_FAILED) {
		sim_log("mmap %s: %s", cfg.shm_path.c_str(), strerror(errno));
		unlink(cfg.socket.c_str());
		unlink(cfg.shm_path.c_str());
		exit(1);
	}
	g = (pn_sim_global *)p;
	g->version = PN_SIM_VERSION;
	g->hdr_bytes = sizeof(pn_sim_global);
	g->nodes = SIM_NODES;
	g->n_ctx = SIM_N_CTX;
	g->mtu = SIM_MTU;
	g->clk_hz = PN_TARGET_CLK_HZ;
	g->topo_x = SIM_TOPO_X;
	g->topo_y = SIM_TOPO_Y;
	g->trace_off = PN_SIM_TRACE_OFF;
	g->trace_stride = sizeof(pn_sim_trace);
	g->mmio_write_cycles = cfg.c_mmio_w;
	g->mmio_read_cycles = cfg.c_mmio_r;
	g->dma_read_cycles = cfg.c_dma_r;
	g->dma_write_cycles = cfg.c_dma_w;
	g->pid = (uint32_t)getpid();
	__atomic_store_n(&g->magic, PN_SIM_MAGIC_GLOBAL, __ATOMIC_RELEASE);
}

static pn_sim_trace *trace_of(pn_sim_global *g, int node, int ctx)
{
	return (pn_sim_trace *)((uint8_t *)g + g->trace_off + ((size_t)node * g->n_ctx + ctx) * g->trace_stride);
}

void Harness::setup_socket()
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	if (cfg.socket.size() >= sizeof(a.sun_path)) {
		sim_log("socket path too long (%zu >= %zu): %s", cfg.socket.size(), sizeof(a.sun_path),
			cfg.socket.c_str());
		exit(1);
	}
	memcpy(a.sun_path, cfg.socket.c_str(), cfg.socket.size());
	/* A socket file left by a killed simulator is removed; a live one is not ours. */
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (connect(probe, (struct sockaddr *)&a, sizeof(a)) == 0) {
		sim_log("another simulator listens on %s", cfg.socket.c_str());
		exit(1);
	}
	close(probe);
	unlink(cfg.socket.c_str());
	listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(listen_fd, 64) < 0) {
		sim_log("cannot listen on %s: %s", cfg.socket.c_str(), strerror(errno));
		exit(1);
	}
}

/* ---- the driver: CSR scripts --------------------------------------------------------------- */

void Harness::bring_up()
{
	for (int n = 0; n < SIM_NODES; n++) {
		Script *s = new Script;
		s->csr_write(PN_CSR_NODE, PN_CSR_NODE_SIZE, (uint64_t)n);
		for (int d = 0; d < SIM_TABLE_NODES; d++) {
			s->csr_write(PN_CSR_ROUTER_ROUTE_ADR, PN_CSR_ROUTER_ROUTE_ADR_SIZE, (uint64_t)d);
			s->csr_write(PN_CSR_ROUTER_ROUTE_PORT, PN_CSR_ROUTER_ROUTE_PORT_SIZE, SIM_ROUTES[n][d]);
			s->csr_write(PN_CSR_ROUTER_ROUTE_WRITE, 1, 1);
		}
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 0);
		s->csr_write(PN_CSR_BARRIER_NODES, PN_CSR_BARRIER_NODES_SIZE, SIM_NODES);
		s->csr_write(PN_CSR_BARRIER_RADIX_LOG2, PN_CSR_BARRIER_RADIX_LOG2_SIZE, cfg.radix_log2);
		s->csr_write(PN_CSR_BARRIER_MODE, PN_CSR_BARRIER_MODE_SIZE, barrier_mode(SIM_NODES));
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 1);
		hosts[n]->push_script(s, cycle);
		link_poll(n, cycle);
	}
}

/* Read every link port's state until all are up (links train by themselves). */
void Harness::link_poll(int n, uint64_t due)
{
	Script *p = new Script;
#define LINK_STATE_READ(port, csr) p->csr_read(csr);
	PN_CSR_LINK_STATES(LINK_STATE_READ)
#undef LINK_STATE_READ
	p->done = [this, n](Script &sc) {
		bool up = sc.reads.size() == PN_CSR_LINK_PORTS;
		for (uint32_t v : sc.reads)
			up &= v == PN_LINK_STATE_UP;
		if (!up) {
			link_poll(n, cycle + 64);
			return;
		}
		if (sim_verbose)
			sim_log("node %d: links up at cycle %llu", n, (unsigned long long)cycle);
		if (++nodes_up == SIM_NODES) {
			links_up = true;
			write_ready();
		}
	};
	hosts[n]->push_script(p, due);
}

/* Configure a client's context: rings, status block, DMA window; enable or disable. */
Script *Harness::ctx_script(Client *cl, bool enable, bool reset)
{
	Script *s = new Script;
	uint64_t base = PN_SIM_DMA_BASE(cl->ctx);
	const pn_sim_hello &h = cl->hello;
	s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
	s->csr_write(PN_CSR_HOST_CTX_ENABLE, 1, enable);
	s->csr_write(PN_CSR_HOST_CTX_RX_BASE, PN_CSR_HOST_CTX_RX_BASE_SIZE, base + h.rx_off);
	s->csr_write(PN_CSR_HOST_CTX_RX_LOG2, PN_CSR_HOST_CTX_RX_LOG2_SIZE, h.rx_log2);
	s->csr_write(PN_CSR_HOST_CTX_TX_BASE, PN_CSR_HOST_CTX_TX_BASE_SIZE, base + h.tx_off);
	s->csr_write(PN_CSR_HOST_CTX_TX_LOG2, PN_CSR_HOST_CTX_TX_LOG2_SIZE, h.tx_log2);
	s->csr_write(PN_CSR_HOST_CTX_STATUS_ADDR, PN_CSR_HOST_CTX_STATUS_ADDR_SIZE, enable ? base + h.status_off : 0);
	s->csr_write(PN_CSR_HOST_CTX_WIN_BASE, PN_CSR_HOST_CTX_WIN_BASE_SIZE, base + h.heap_off);
	s->csr_write(PN_CSR_HOST_CTX_WIN_SIZE, PN_CSR_HOST_CTX_WIN_SIZE_SIZE, enable ? cl->window : 0);
	s->csr_write(PN_CSR_HOST_CTX_WRITE, 1, 1);
	if (reset)
		s->csr_write(PN_CSR_HOST_CTX_RESET, 1, 1);
	return s;
}

/* The barrier mode for a job of n nodes (hw/barrier.py): all-to-all arrives up to
 * --barrier-a2a-max nodes (one network diameter per episode), the combining tree above
 * (fewer packets per node). */
uint32_t Harness::barrier_mode(int n) const
{
	return (uint32_t)n <= cfg.barrier_a2a_max ? 1u : 0u;
}

/* A new job: the barrier spans nodes 0 .. n-1. Disable every node's barrier unit,
 * then set the size and mode and enable them all (hw/barrier.py: change `nodes` and
 * `mode` only with every node disabled; all count episodes from 0 together). */
void Harness::start_job(int n)
{
	job_want = n;
	job_pending = SIM_NODES;
	for (int k = 0; k < SIM_NODES; k++) {
		Script *s = new Script;
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 0);
		s->done = [this, n](Script &) {
			if (--job_pending)
				return;
			job_pending = SIM_NODES;
			for (int j = 0; j < SIM_NODES; j++) {
				Script *t = new Script;
				t->csr_write(PN_CSR_BARRIER_NODES, PN_CSR_BARRIER_NODES_SIZE, (uint64_t)n);
				t->csr_write(PN_CSR_BARRIER_RADIX_LOG2, PN_CSR_BARRIER_RADIX_LOG2_SIZE, cfg.radix_log2);
				t->csr_write(PN_CSR_BARRIER_MODE, PN_CSR_BARRIER_MODE_SIZE, barrier_mode(n));
				t->csr_write(PN_CSR_BARRIER_ENABLE, 1, 1);
				t->done = [this, n](Script &) {
					if (--job_pending)
						return;
					job_nodes = n;
					job_want = 0;
					g->job_nodes = (uint64_t)n;
					sim_log("job of %d nodes (barrier %s over nodes 0..%d) at cycle %llu", n,
						barrier_mode(n) ? "all-to-all" : "tree", n - 1, (unsigned long long)cycle);
					for (Client *c : std::vector<Client *>(clients))
						if (c->st == CState::Waiting)
							try_attach(c);
				};
				hosts[j]->push_script(t, cycle + cfg.c_mmio_w);
			}
		};
		hosts[k]->push_script(s, cycle + cfg.c_mmio_w);
	}
}

/* ---- DMA address space ------------------------------------------------------------------ */

uint8_t *Harness::dma_ptr(int node, uint64_t adr, uint32_t n, bool write, Client **owner)
{
	if (Client *d = dev_owner[node]) {
		/* A guest's node: bus address = guest-physical address, all of its RAM (a PC
		 * without an IOMMU lets a bus master reach all of it). */
		if (!d->ram || adr > d->ram_bytes || n > d->ram_bytes - adr)
			return nullptr;
		*owner = d;
		return d->ram + adr;
	}
	uint64_t c = (adr >> PN_SIM_DMA_SHIFT);
	if (c == 0 || c > SIM_N_CTX)
		return nullptr;
	Client *cl = this->owner[node][c - 1];
	if (!cl || !cl->mem)
		return nullptr;
	uint64_t off = adr - PN_SIM_DMA_BASE(c - 1);
	const pn_sim_hello &h = cl->hello;
	auto in = [&](uint64_t lo, uint64_t len) { return off >= lo && off + n <= lo + len && off + n >= off; };
	bool ok = write ? (in(h.status_off, PN_STATUS_BLOCK_BYTES) || in(h.rx_off, cl->rx_bytes))
			: (in(h.tx_off, cl->tx_bytes) || in(h.heap_off, h.heap_bytes));
	if (!ok)
		return nullptr;
	*owner = cl;
	return cl->mem + off;
}

void Harness::dma_refused(int node, const char *what, uint64_t adr, uint32_t n)
{
	uint64_t k = ++g->dma_refused;
	if (k <= 50 || k % 1000 == 0)
		sim_log("node %d cycle %llu: DMA %s %#llx+%u outside client memory: refused (%llu so far)", node,
			(unsigned long long)cycle, what, (unsigned long long)adr, n, (unsigned long long)k);
}

void Harness::protocol_error(int node, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (++errors <= 100)
		sim_log("node %d cycle %llu: PCIe rule broken: %s", node, (unsigned long long)cycle, buf);
}

void Harness::client_error(Client *cl, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (++client_errors <= 100)
		sim_log("client %llu (pid %d, node %d ctx %d): bad queue entry ignored: %s", (unsigned long long)cl->id,
			cl->pid, cl->node, cl->ctx, buf);
}

void Harness::dma_written(int node, Client *cl, uint64_t adr, uint32_t n, const uint8_t *data)
{
	if (cl->device)
		return;   /* no trace records for a guest's node */
	const pn_sim_hello &h = cl->hello;
	uint64_t off = adr - PN_SIM_DMA_BASE(cl->ctx);
	pn_sim_trace *t = cl->trace;
	if (off >= h.rx_off && off < h.rx_off + cl->rx_bytes) {
		uint64_t rel = off - h.rx_off;
		uint64_t slot = rel / cl->slot_bytes;
		uint64_t voff = slot * cl->slot_bytes + cl->slot_bytes - PN_RX_VALID_BYTES;
		if (rel <= voff && rel + n >= voff + 8) {
			uint64_t v;
			memcpy(&v, data + (voff - rel), 8);
			store64(&t->rx_valid_count, v);
			store64(&t->rx_valid_cycle, cycle);
			store64(&t->rx_valids, t->rx_valids + 1);
		}
	} else if (off == h.status_off && n >= PN_STATUS_BLOCK_BYTES) {
		uint32_t bd;
		memcpy(&bd, data + 4 * PN_STS_BARRIER_DONE_WORD, 4);
		if (bd != cl->last_barrier_done) {
			cl->last_barrier_done = bd;
			store64(&t->barrier_done_count, bd);
			store64(&t->barrier_done_cycle, cycle);
		}
		store64(&t->status_cycle, cycle);
	}
}

bool Harness::item_live(const MmioItem &it) const
{
	return it.cl->st == CState::Active && it.cl->gen == it.cl_gen;
}

void Harness::op_done(int node, const MmioItem &it, const uint32_t *vals, uint64_t cyc)
{
	Client *cl = it.cl;
	pn_sim_trace *t = cl->trace;
	g->mmio_ops++;
	switch (it.kind) {
	case PN_SIM_OP_W32:
		if (it.off == PN_REG_PIO_DOORBELL) {
			store64(&t->pio_doorbell_cycle, cyc);
			store64(&t->pio_doorbells, t->pio_doorbells + 1);
		} else if (it.off == PN_REG_TX_TAIL) {
			store64(&t->tx_tail_cycle, cyc);
			store64(&t->tx_tails, t->tx_tails + 1);
		} else if (it.off == PN_REG_BARRIER) {
			store64(&t->barrier_enter_cycle, cyc);
		}
		break;
	case PN_SIM_OP_R32:
	case PN_SIM_OP_RCSR:
		replies.push_back({std::max(cyc + 1, it.obs + cfg.c_mmio_r), cl, it.cl_gen, it.value, vals[0]});
		break;
	default:
		break;
	}
	(void)node;
}

/* ---- clients ----------------------------------------------------------------------------------- */

void Harness::accept_clients()
{
	for (;;) {
		int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		Client *cl = new Client;
		cl->id = next_client_id++;
		cl->fd = fd;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			cl->pid = cred.pid;
		clients.push_back(cl);
	}
}

static int send_welcome(int fd, const pn_sim_welcome &w, int pass_fd)
{
	struct iovec iov = {(void *)&w, sizeof(w)};
	struct msghdr mh;
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(&mh, 0, sizeof(mh));
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(w) ? 0 : -1;
}

static pn_sim_welcome welcome_base()
{
	pn_sim_welcome w;
	memset(&w, 0, sizeof(w));
	w.magic = PN_SIM_MAGIC_WELCOME;
	w.version = PN_SIM_VERSION;
	w.sim_nodes = SIM_NODES;
	w.n_ctx = SIM_N_CTX;
	w.mtu = SIM_MTU;
	w.csr_dropped = PN_CSR_HOST_ERR_UNKNOWN_CTX;
	snprintf(w.topo, sizeof(w.topo), "%s", SIM_TOPO);
	return w;
}

void Harness::reject(Client *cl, int err)
{
	pn_sim_welcome w = welcome_base();
	w.status = err;
	w.node = (uint32_t)cl->hello.node;
	if (cl->fd >= 0)
		send_welcome(cl->fd, w, -1);
	sim_log("client %llu (pid %d): attach to node %d ctx %d refused: %s", (unsigned long long)cl->id, cl->pid,
		cl->hello.node, cl->hello.ctx, strerror(-err));
	free_client(cl);
}

void Harness::on_readable(Client *cl)
{
	if (cl->st == CState::Hello) {
		pn_sim_hello h;
		struct iovec iov = {&h, sizeof(h)};
		struct msghdr mh;
		char cbuf[CMSG_SPACE(2 * sizeof(int))];
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		ssize_t n = recvmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		int fds[2] = {-1, -1}, nfds = 0;   /* the control block's memfd [, the guest RAM's] */
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int i = 0; i < k; i++) {
					int fd;
					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
					if (nfds < 2)
						fds[nfds++] = fd;
					else
						close(fd);
				}
			}
		bool dev = n == (ssize_t)sizeof(h) && (h.flags & PN_SIM_HELLO_DEVICE);
		if (n <= 0 || n != (ssize_t)sizeof(h) || fds[0] < 0 || (nfds == 2) != dev) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			if (n <= 0) {
				hangup(cl);
				return;
			}
			cl->hello.node = -1;
			cl->hello.ctx = -1;
			reject(cl, -EPROTO);
			return;
		}
		if (dev) {
			cl->memfd = fds[0];
			on_device_hello(cl, h, fds[1]);
		} else {
			on_hello(cl, h, fds[0]);
		}
		return;
	}
	char buf[64];
	for (;;) {
		ssize_t n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue;   /* wake-up bytes */
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		hangup(cl);
		return;
	}
}

void Harness::on_hello(Client *cl, const pn_sim_hello &h, int memfd)
{
	cl->hello = h;
	cl->memfd = memfd;
	if (h.magic != PN_SIM_MAGIC_HELLO || h.version != PN_SIM_VERSION) {
		reject(cl, -EPROTO);
		return;
	}
	if (h.pid > 0)
		cl->pid = h.pid;
	if (h.flags) {
		reject(cl, -EINVAL);
		return;
	}
	if (h.node < 0 || h.node >= SIM_NODES || h.nodes < 0 || h.nodes > SIM_NODES ||
	    (h.nodes && h.node >= h.nodes) || h.ctx < -1 || h.ctx >= SIM_N_CTX) {
		reject(cl, -EINVAL);
		return;
	}
	struct stat sb;
	uint64_t slot = PN_RX_SLOT_BYTES(SIM_MTU);
	/* The memory must be sealed against shrinking, or the client could make our
	 * mapping fault (SIGBUS) under the NIC's DMA. */
	int seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		reject(cl, -EINVAL);
		return;
	}
	uint64_t rx_bytes = h.rx_log2 <= 16 ? ((uint64_t)1 << h.rx_log2) * slot : 0;
	uint64_t tx_bytes = h.tx_log2 <= 16 ? ((uint64_t)PN_TX_DESC_BYTES << h.tx_log2) : 0;
	auto fits = [&](uint64_t off, uint64_t len) { return off <= h.mem_bytes && len <= h.mem_bytes - off; };
	if (fstat(memfd, &sb) < 0 || (uint64_t)sb.st_size < h.mem_bytes || h.mem_bytes > PN_SIM_MAX_MEM ||
	    h.mem_bytes < 4096 || !rx_bytes || !tx_bytes || h.status_off % 64 || h.rx_off % 4096 ||
	    h.tx_off % 4096 || h.heap_off % 4096 || h.status_off < sizeof(pn_sim_ctl) ||
	    !fits(h.status_off, PN_STATUS_BLOCK_BYTES) || !fits(h.rx_off, rx_bytes) || !fits(h.tx_off, tx_bytes) ||
	    !fits(h.heap_off, h.heap_bytes) || h.rx_off < h.status_off + PN_STATUS_BLOCK_BYTES ||
	    h.tx_off < h.rx_off + rx_bytes || h.heap_off < h.tx_off + tx_bytes) {
		reject(cl, -EINVAL);
		return;
	}
	void *p = mmap(nullptr, h.mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
	if (p == MAP_FAILED) {
		reject(cl, -ENOMEM);
		return;
	}
	cl->mem = (uint8_t *)p;
	cl->mem_bytes = h.mem_bytes;
	cl->ctl = (pn_sim_ctl *)p;
	uint32_t qs = cl->ctl->qsize;
	if (cl->ctl->magic != PN_SIM_MAGIC_CTL || !qs || (qs & (qs - 1)) || cl->ctl->queue_off % 64 ||
	    cl->ctl->queue_off < sizeof(pn_sim_ctl) || !fits(cl->ctl->queue_off, (uint64_t)qs * sizeof(pn_sim_op)) ||
	    cl->ctl->queue_off + (uint64_t)qs * sizeof(pn_sim_op) > h.status_off) {
		reject(cl, -EINVAL);
		return;
	}
	cl->queue = (pn_sim_op *)(cl->mem + cl->ctl->queue_off);
	cl->qmask = qs - 1;
	cl->q_tail = __atomic_load_n(&cl->ctl->q_head, __ATOMIC_ACQUIRE);   /* nothing before attach counts */
	__atomic_store_n(&cl->ctl->q_tail, cl->q_tail, __ATOMIC_RELEASE);
	cl->rx_bytes = rx_bytes;
	cl->tx_bytes = tx_bytes;
	cl->rx_slots = 1u << h.rx_log2;
	cl->slot_bytes = (uint32_t)slot;
	cl->node = h.node;
	cl->want_ctx = h.ctx;
	cl->st = CState::Waiting;
	try_attach(cl);
}

void Harness::try_attach(Client *cl)
{
	const pn_sim_hello &h = cl->hello;
	int want = h.nodes ? h.nodes : (job_nodes ? job_nodes : (job_want ? job_want : SIM_NODES));
	if (job_pending)
		return;   /* a job is being set up: retried when it is */
	if (job_nodes && want != job_nodes) {
		reject(cl, -EBUSY);   /* another job (of another size) is running */
		return;
	}
	if (cl->node >= want) {
		reject(cl, -EINVAL);
		return;
	}
	if (Client *d = dev_owner[cl->node]) {
		if (d->st != CState::Teardown)
			reject(cl, -EBUSY);   /* a guest holds the node */
		return;                   /* else retried when it is gone */
	}
	if (cl->device) {
		bool teardown = false;
		for (int c = 0; c < SIM_N_CTX; c++)
			if (Client *o = owner[cl->node][c]) {
				if (o->st != CState::Teardown) {
					reject(cl, -EBUSY);   /* processes hold contexts of the node */
					return;
				}
				teardown = true;
			}
		if (teardown)
			return;
		if (!job_nodes) {
			start_job(want);
			return;
		}
		dev_owner[cl->node] = cl;
		cl->gen = ++dev_gen;
		cl->trace = &cl->dev_trace;
		device_welcome(cl);
		return;
	}
	int ctx = -1;
	bool busy_teardown = false;
	if (cl->want_ctx >= 0) {
		Client *o = owner[cl->node][cl->want_ctx];
		if (!o)
			ctx = cl->want_ctx;
		else if (o->st == CState::Teardown)
			busy_teardown = true;
		else {
			reject(cl, -EBUSY);
			return;
		}
	} else {
		/* The lowest free context from 1 upward, context 0 last (rawdata's). */
		for (int k = 1; k <= SIM_N_CTX && ctx < 0; k++) {
			int c = k % SIM_N_CTX;
			Client *o = owner[cl->node][c];
			if (!o)
				ctx = c;
			else if (o->st == CState::Teardown)
				busy_teardown = true;
		}
		if (ctx < 0 && !busy_teardown) {
			reject(cl, -EBUSY);
			return;
		}
	}
	if (ctx < 0)
		return;   /* wait for a context being torn down */
	if (!job_nodes) {
		start_job(want);
		return;   /* retried when the job is set up */
	}
	cl->ctx = ctx;
	owner[cl->node][ctx] = cl;
	cl->gen = ++ctx_gen[cl->node][ctx];
	cl->trace = trace_of(g, cl->node, ctx);
	memset((void *)cl->trace, 0, sizeof(pn_sim_trace));
	store64(&cl->trace->generation, cl->gen);
	cl->st = CState::Config;
	configure(cl);
}

void Harness::configure(Client *cl)
{
	Script *s = ctx_script(cl, true, true);
	uint64_t gen = cl->gen;
	s->done = [this, cl, gen](Script &) {
		if (cl->st != CState::Config || cl->gen != gen)
			return;   /* it hung up meanwhile: teardown is under way */
		pn_sim_welcome w = welcome_base();
		w.status = 0;
		w.node = (uint32_t)cl->node;
		w.nodes = (uint32_t)job_nodes;
		w.ctx = (uint32_t)cl->ctx;
		w.dma_base = PN_SIM_DMA_BASE(cl->ctx);
		w.global_bytes = shm_bytes;
		int rofd = open(cfg.shm_path.c_str(), O_RDONLY | O_CLOEXEC);
		cl->st = CState::Active;
		g->clients++;
		if (rofd < 0 || send_welcome(cl->fd, w, rofd) < 0)
			sim_log("client %llu: welcome not delivered", (unsigned long long)cl->id);
		if (rofd >= 0)
			close(rofd);
		sim_log("client %llu (pid %d) attached: node %d ctx %d, %u RX slots, %u TX entries, %llu MiB, cycle %llu",
			(unsigned long long)cl->id, cl->pid, cl->node, cl->ctx, cl->rx_slots, 1u << cl->hello.tx_log2,
			(unsigned long long)(cl->mem_bytes >> 20), (unsigned long long)cycle);
	};
	hosts[cl->node]->push_script(s, cycle + cfg.c_mmio_w);
}

/* A device client (PN_SIM_HELLO_DEVICE, sim/qemu/pn_proxydev): a QEMU guest's PCI
 * function for a whole node. Its memfd holds only the control block and the MMIO
 * queue; ramfd is the guest's RAM (offset = guest-physical address = bus address). */
void Harness::on_device_hello(Client *cl, const pn_sim_hello &h, int ramfd)
{
	cl->hello = h;
	cl->ramfd = ramfd;
	cl->device = true;
	if (h.magic != PN_SIM_MAGIC_HELLO || h.version != PN_SIM_VERSION) {
		reject(cl, -EPROTO);
		return;
	}
	if (h.pid > 0)
		cl->pid = h.pid;
	struct stat sb, rb;
	int s1 = fcntl(cl->memfd, F_GET_SEALS), s2 = fcntl(ramfd, F_GET_SEALS);
	if (h.flags != PN_SIM_HELLO_DEVICE || h.node < 0 || h.node >= SIM_NODES || h.nodes < 0 ||
	    h.nodes > SIM_NODES || (h.nodes && h.node >= h.nodes) || s1 < 0 || !(s1 & F_SEAL_SHRINK) || s2 < 0 ||
	    !(s2 & F_SEAL_SHRINK) || fstat(cl->memfd, &sb) < 0 || fstat(ramfd, &rb) < 0 || h.mem_bytes < 4096 ||
	    h.mem_bytes > (uint64_t)sb.st_size || !h.heap_bytes || h.heap_bytes > (uint64_t)rb.st_size ||
	    h.heap_bytes > PN_SIM_MAX_MEM) {
		reject(cl, -EINVAL);
		return;
	}
	void *p = mmap(nullptr, h.mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, cl->memfd, 0);
	void *r = mmap(nullptr, h.heap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, ramfd, 0);
	if (p == MAP_FAILED || r == MAP_FAILED) {
		if (p != MAP_FAILED)
			munmap(p, h.mem_bytes);
		if (r != MAP_FAILED)
			munmap(r, h.heap_bytes);
		reject(cl, -ENOMEM);
		return;
	}
	cl->mem = (uint8_t *)p;
	cl->mem_bytes = h.mem_bytes;
	cl->ram = (uint8_t *)r;
	cl->ram_bytes = h.heap_bytes;
	cl->ctl = (pn_sim_ctl *)p;
	uint32_t qs = cl->ctl->qsize;
	if (cl->ctl->magic != PN_SIM_MAGIC_CTL || !qs || (qs & (qs - 1)) || cl->ctl->queue_off % 64 ||
	    cl->ctl->queue_off < sizeof(pn_sim_ctl) || cl->ctl->queue_off > h.mem_bytes ||
	    (uint64_t)qs * sizeof(pn_sim_op) > h.mem_bytes - cl->ctl->queue_off) {
		reject(cl, -EINVAL);
		return;
	}
	cl->queue = (pn_sim_op *)(cl->mem + cl->ctl->queue_off);
	cl->qmask = qs - 1;
	cl->q_tail = __atomic_load_n(&cl->ctl->q_head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&cl->ctl->q_tail, cl->q_tail, __ATOMIC_RELEASE);
	cl->node = h.node;
	cl->want_ctx = -1;
	cl->st = CState::Waiting;
	try_attach(cl);
}

void Harness::device_welcome(Client *cl)
{
	pn_sim_welcome w = welcome_base();
	w.status = 0;
	w.node = (uint32_t)cl->node;
	w.nodes = (uint32_t)job_nodes;
	w.dma_base = 0;
	w.global_bytes = shm_bytes;
	int rofd = open(cfg.shm_path.c_str(), O_RDONLY | O_CLOEXEC);
	cl->st = CState::Active;
	g->clients++;
	if (rofd < 0 || send_welcome(cl->fd, w, rofd) < 0)
		sim_log("client %llu: welcome not delivered", (unsigned long long)cl->id);
	if (rofd >= 0)
		close(rofd);
	sim_log("device client %llu (pid %d) attached: node %d (all contexts; the guest's driver programs them), "
		"guest RAM %llu MiB at bus address 0, cycle %llu", (unsigned long long)cl->id, cl->pid, cl->node,
		(unsigned long long)(cl->ram_bytes >> 20), (unsigned long long)cycle);
}

/* A guest's node when its device process left (the guest powered off or QEMU died):
 * disable every context (no new DMA into the guest's RAM), wait until none is busy
 * and writes in flight have landed, reset them all, then unmap the RAM. */
void Harness::device_teardown_step(Client *cl)
{
	switch (cl->td_phase) {
	case 0: {
		Script *s = new Script;
		for (int c = 0; c < SIM_N_CTX; c++) {
			s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)c);
			s->csr_write(PN_CSR_HOST_CTX_ENABLE, 1, 0);
			s->csr_write(PN_CSR_HOST_CTX_STATUS_ADDR, PN_CSR_HOST_CTX_STATUS_ADDR_SIZE, 0);
			s->csr_write(PN_CSR_HOST_CTX_WIN_SIZE, PN_CSR_HOST_CTX_WIN_SIZE_SIZE, 0);
			s->csr_write(PN_CSR_HOST_CTX_WRITE, 1, 1);
		}
		s->done = [this, cl](Script &) {
			cl->td_phase = 1;
			device_teardown_step(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	case 1: {
		Script *s = new Script;
		for (int c = 0; c < SIM_N_CTX; c++) {
			s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)c);
			s->csr_read(PN_CSR_HOST_CTX_STATE);
		}
		s->done = [this, cl](Script &sc) {
			bool quiet = true;
			for (uint32_t st : sc.reads)
				quiet &= !(st & PN_CTX_STATE_BUSY);
			if (!quiet && cycle - cl->td_start > 4000000) {
				sim_log("node %d: contexts still busy %llu cycles after the guest left; resetting anyway",
					cl->node, (unsigned long long)(cycle - cl->td_start));
				quiet = true;
			}
			if (quiet) {
				cl->td_phase = 2;
				cl->td_wait_until = cycle + cfg.c_dma_w + cfg.c_dma_r + 64;
			} else {
				device_teardown_step(cl);
			}
		};
		hosts[cl->node]->push_script(s, cycle + 32);
		break;
	}
	case 2: {
		if (cycle < cl->td_wait_until)
			break;
		cl->td_phase = 3;
		Script *s = new Script;
		for (int c = 0; c < SIM_N_CTX; c++) {
			s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)c);
			s->csr_write(PN_CSR_HOST_CTX_RESET, 1, 1);
		}
		s->done = [this, cl](Script &) {
			sim_log("node %d: every context reset, guest RAM released %llu cycles after the device left",
				cl->node, (unsigned long long)(cycle - cl->td_start));
			free_client(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	default:
		break;
	}
}

void Harness::hangup(Client *cl)
{
	if (cl->fd >= 0) {
		close(cl->fd);
		cl->fd = -1;
	}
	switch (cl->st) {
	case CState::Hello:
	case CState::Waiting:
		free_client(cl);
		break;
	case CState::Config:
	case CState::Active:
		if (cl->st == CState::Active)
			g->clients--;
		cl->st = CState::Teardown;
		cl->td_phase = 0;
		cl->td_start = cycle;
		sim_log("client %llu (pid %d) detached from node %d ctx %d at cycle %llu: disabling the context%s",
			(unsigned long long)cl->id, cl->pid, cl->node, cl->ctx, (unsigned long long)cycle,
			cl->device ? "s (device)" : "");
		if (cl->device)
			device_teardown_step(cl);
		else
			teardown_step(cl);
		break;
	default:
		break;
	}
}

/* Detach: disable the context (no new DMA for it), wait until the NIC has finished what
 * it had started (PIO packet, descriptors, RX packet, status write) and until DMA writes
 * in flight are visible, reset the context, and only then unmap the client's memory. */
void Harness::teardown_step(Client *cl)
{
	switch (cl->td_phase) {
	case 0: {
		Script *s = ctx_script(cl, false, false);
		s->done = [this, cl](Script &) {
			cl->td_phase = 1;
			teardown_step(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	case 1: {
		Script *s = new Script;
		s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
		s->csr_read(PN_CSR_HOST_CTX_STATE);
		s->done = [this, cl](Script &sc) {
			uint32_t st = sc.reads.empty() ? 0xff : sc.reads[0];
			bool quiet = !(st & PN_CTX_STATE_BUSY);
			if (!quiet && cycle - cl->td_start > 4000000) {
				sim_log("node %d ctx %d: still busy (state %#x) %llu cycles after disable; resetting anyway",
					cl->node, cl->ctx, st, (unsigned long long)(cycle - cl->td_start));
				quiet = true;
			}
			if (quiet) {
				cl->td_phase = 2;
				cl->td_wait_until = cycle + cfg.c_dma_w + cfg.c_dma_r + 64;
			} else {
				teardown_step(cl);   /* poll again */
			}
		};
		hosts[cl->node]->push_script(s, cycle + 32);
		break;
	}
	case 2: {
		if (cycle < cl->td_wait_until)
			break;
		cl->td_phase = 3;
		Script *s = new Script;
		s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
		s->csr_write(PN_CSR_HOST_CTX_RESET, 1, 1);
		s->done = [this, cl](Script &) {
			sim_log("node %d ctx %d: reset and free %llu cycles after the client left", cl->node, cl->ctx,
				(unsigned long long)(cycle - cl->td_start));
			free_client(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	default:
		break;
	}
}

void Harness::free_client(Client *cl)
{
	if (cl->ctx >= 0 && owner[cl->node][cl->ctx] == cl)
		owner[cl->node][cl->ctx] = nullptr;
	if (cl->device && cl->node >= 0 && dev_owner[cl->node] == cl)
		dev_owner[cl->node] = nullptr;
	if (cl->ram) {
		munmap(cl->ram, cl->ram_bytes);
		cl->ram = nullptr;
	}
	if (cl->ramfd >= 0) {
		close(cl->ramfd);
		cl->ramfd = -1;
	}
	if (cl->mem) {
		munmap(cl->mem, cl->mem_bytes);
		cl->mem = nullptr;
	}
	if (cl->memfd >= 0) {
		close(cl->memfd);
		cl->memfd = -1;
	}
	if (cl->fd >= 0) {
		close(cl->fd);
		cl->fd = -1;
	}
	cl->st = CState::Freed;
	clients.erase(std::remove(clients.begin(), clients.end(), cl), clients.end());
	/* Client objects are never deleted: queue items may still point at them (their
	 * state says they are stale). They are small. */
	bool any = false;
	for (Client *c : clients)
		any |= c->st == CState::Config || c->st == CState::Active || c->st == CState::Teardown;
	if (!any && job_nodes) {
		sim_log("job of %d nodes ended at cycle %llu", job_nodes, (unsigned long long)cycle);
		job_nodes = 0;
		g->job_nodes = 0;
	}
	std::vector<Client *> waiting;
	for (Client *c : clients)
		if (c->st == CState::Waiting)
			waiting.push_back(c);
	for (Client *c : waiting)
		if (c->st == CState::Waiting)
			try_attach(c);
}

void Harness::pull_queues()
{
	for (Client *cl : clients) {
		if (cl->st != CState::Active)
			continue;
		uint64_t head = __atomic_load_n(&cl->ctl->q_head, __ATOMIC_ACQUIRE);
		if (head == cl->q_tail)
			continue;
		if (head - cl->q_tail > cl->qmask + 1) {
			sim_log("client %llu: queue head %llu beyond tail %llu + size: detaching it",
				(unsigned long long)cl->id, (unsigned long long)head, (unsigned long long)cl->q_tail);
			hangup(cl);
			return;
		}
		Host *h = hosts[cl->node];
		/* Back-pressure: a node takes at most SIM_MAX_QUEUED operations ahead of its bus
		 * (like a full posted-write buffer); the rest waits in the clients' queues. */
		while (cl->q_tail != head && h->queued() < SIM_MAX_QUEUED) {
			pn_sim_op op = cl->queue[cl->q_tail & cl->qmask];
			cl->q_tail++;
			cl->ops++;
			MmioItem it{};
			it.due = cycle + cfg.c_mmio_w;
			it.obs = cycle;
			it.kind = op.kind;
			it.off = op.off;
			it.value = op.value;
			it.cl = cl;
			it.cl_gen = cl->gen;
			if (cl->device) {
				/* BAR0 offsets: context pages and CSRs, as the guest's driver wrote them. */
				bool rd = op.kind == PN_SIM_OP_R32 || op.kind == PN_SIM_OP_RCSR;
				if ((op.kind != PN_SIM_OP_W32 && op.kind != PN_SIM_OP_W64 && !rd) ||
				    op.off >= PN_BAR0_BYTES || op.off % (op.kind == PN_SIM_OP_W64 ? 8 : 4)) {
					client_error(cl, "device access kind %u at BAR0 offset %#x", op.kind, op.off);
					if (rd)
						replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				if (op.kind == PN_SIM_OP_RCSR)
					it.kind = PN_SIM_OP_R32;
				h->push_client_op(it);
				continue;
			}
			switch (op.kind) {
			case PN_SIM_OP_W32:
			case PN_SIM_OP_W64:
				if (op.off >= PN_CTX_PAGE_BYTES || op.off % (op.kind == PN_SIM_OP_W64 ? 8 : 4)) {
					client_error(cl, "store at page offset %#x", op.off);
					continue;
				}
				if (op.off >= PN_PIO_WINDOW_OFFSET) {
					if (!cl->pio_started) {
						cl->pio_started = true;
						store64(&cl->trace->issue_cycle, cycle);
					}
				} else if (op.kind == PN_SIM_OP_W32 && op.off == PN_REG_PIO_DOORBELL) {
					if (!cl->pio_started)
						store64(&cl->trace->issue_cycle, cycle);
					cl->pio_started = false;
				} else if (op.kind == PN_SIM_OP_W32 && op.off == PN_REG_TX_TAIL) {
					store64(&cl->trace->issue_cycle, cycle);
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_R32:
				if (op.off >= PN_CTX_PAGE_BYTES || op.off % 4) {
					client_error(cl, "load at page offset %#x", op.off);
					replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_RCSR:
				if (op.off < PN_CSR_LO || op.off > PN_CSR_HI || op.off % 4) {
					client_error(cl, "CSR load at %#x", op.off);
					replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_WINDOW: {
				/* The driver's "register memory" call: the DMA window grows or shrinks. In
				 * order with the client's MMIO, so a doorbell after it sees the new window. */
				cl->window = std::min<uint64_t>(op.value, cl->hello.heap_bytes);
				Script *s = ctx_script(cl, true, false);
				uint64_t gen = cl->gen;
				s->build = [this, cl, gen](Script &sc) {
					if (cl->st != CState::Active || cl->gen != gen)
						sc.steps.clear();   /* it left meanwhile: leave the context alone */
				};
				h->push_script(s, cycle + cfg.c_mmio_w);
				break;
			}
			default:
				client_error(cl, "unknown kind %u", op.kind);
				break;
			}
		}
		__atomic_store_n(&cl->ctl->q_tail, cl->q_tail, __ATOMIC_RELEASE);
		last_activity = cycle;
	}
}

void Harness::poll_sockets(int timeout_ms)
{
	std::vector<struct pollfd> pf;
	std::vector<Client *> who;
	pf.push_back({listen_fd, POLLIN, 0});
	who.push_back(nullptr);
	for (Client *cl : clients)
		if (cl->fd >= 0) {
			pf.push_back({cl->fd, POLLIN, 0});
			who.push_back(cl);
		}
	int n = poll(pf.data(), pf.size(), timeout_ms);
	if (n <= 0)
		return;
	if (pf[0].revents & POLLIN)
		accept_clients();
	for (size_t i = 1; i < pf.size(); i++)
		if (pf[i].revents && who[i]->fd == pf[i].fd)
			on_readable(who[i]);
}

bool Harness::anything_in_flight() const
{
	if (!replies.empty() || job_pending)
		return true;
	for (const Host *h : hosts)
		if (h->busy())
			return true;
	for (const Client *c : clients)
		if (c->st == CState::Teardown || c->st == CState::Config)
			return true;
	return false;
}

/* ---- the clock ------------------------------------------------------------------------------- */

void Harness::step()
{
	pull_queues();
	for (Host *h : hosts)
		h->pre(cycle);
	m->sys_clk = 0;
	m->eval();
	for (Host *h : hosts)
		h->post(cycle);
	m->sys_clk = 1;
	m->eval();
	cycle++;
	__atomic_store_n(&g->cycle, cycle, __ATOMIC_RELEASE);
	if (!replies.empty()) {
		for (size_t i = 0; i < replies.size();) {
			Reply &r = replies[i];
			if (r.due > cycle) {
				i++;
				continue;
			}
			if (r.cl->st == CState::Active && r.cl->gen == r.gen) {
				__atomic_store_n(&r.cl->ctl->r_value, r.value, __ATOMIC_RELAXED);
				__atomic_store_n(&r.cl->ctl->r_seq, r.seq, __ATOMIC_RELEASE);
			}
			replies[i] = replies.back();
			replies.pop_back();
		}
	}
}

void Harness::write_ready()
{
	/* What tools need to find and describe this simulator; the shared memory's layout
	 * is the spec's (paranic.spec.sim), so it is not repeated here. */
	std::string j = "{";
	char buf[512];
	snprintf(buf, sizeof(buf),
		 "\"socket\": \"%s\", \"shm\": \"%s\", \"pid\": %d, \"topo\": \"%s\", \"nodes\": %d, "
		 "\"n_ctx\": %d, \"mtu\": %d, \"clk_hz\": %d, \"links_up_cycle\": %llu, ",
		 cfg.socket.c_str(), cfg.shm_path.c_str(), (int)getpid(), SIM_TOPO, SIM_NODES, SIM_N_CTX, SIM_MTU,
		 PN_TARGET_CLK_HZ, (unsigned long long)cycle);
	j += buf;
	snprintf(buf, sizeof(buf),
		 "\"latency_cycles\": {\"mmio_write\": %u, \"mmio_read\": %u, \"dma_read\": %u, \"dma_write\": %u}, "
		 "\"ber_threshold\": %u}\n",
		 cfg.c_mmio_w, cfg.c_mmio_r, cfg.c_dma_r, cfg.c_dma_w, cfg.ber_threshold);
	j += buf;
	if (!cfg.ready_file.empty()) {
		std::string tmp = cfg.ready_file + ".tmp";
		FILE *f = fopen(tmp.c_str(), "w");
		if (!f || fwrite(j.data(), 1, j.size(), f) != j.size() || fclose(f) != 0 ||
		    rename(tmp.c_str(), cfg.ready_file.c_str()) != 0)
			sim_log("cannot write %s: %s", cfg.ready_file.c_str(), strerror(errno));
	}
	printf("paranic-sim ready: %s, %d nodes, %d contexts, MTU %d, links up at cycle %llu, socket %s\n", SIM_TOPO,
	       SIM_NODES, SIM_N_CTX, SIM_MTU, (unsigned long long)cycle, cfg.socket.c_str());
	fflush(stdout);
}

void Harness::print_stats(double wall)
{
	uint64_t r = 0, w = 0, wb = 0;
	for (Host *h : hosts) {
		r += h->reads;
		w += h->writes;
		wb += h->wb_ops;
	}
	sim_log("cycle %llu (%.0f us simulated) after %.1f s: %.0f cycles/s; %u clients; %llu MMIO ops, %llu bus "
		"accesses, %llu DMA reads, %llu DMA writes, %llu refused, %llu rule errors, %llu bad client entries",
		(unsigned long long)cycle, cycle * 1e6 / PN_TARGET_CLK_HZ, wall, wall > 0 ? cycle / wall : 0.0,
		g->clients, (unsigned long long)g->mmio_ops, (unsigned long long)wb, (unsigned long long)r,
		(unsigned long long)w, (unsigned long long)g->dma_refused, (unsigned long long)errors,
		(unsigned long long)client_errors);
}

void Harness::cleanup()
{
	for (Client *cl : std::vector<Client *>(clients)) {
		if (cl->fd >= 0)
			close(cl->fd);
		cl->fd = -1;
		if (cl->mem)
			munmap(cl->mem, cl->mem_bytes);
		cl->mem = nullptr;
		if (cl->memfd >= 0)
			close(cl->memfd);
		cl->memfd = -1;
		if (cl->ram)
			munmap(cl->ram, cl->ram_bytes);
		cl->ram = nullptr;
	}
	if (listen_fd >= 0)
		close(listen_fd);
	unlink(cfg.socket.c_str());
	unlink(cfg.shm_path.c_str());
	if (!cfg.ready_file.empty())
		unlink(cfg.ready_file.c_str());
}

int Harness::run()
{
	setup_socket();   /* first: refuses to start when another simulator listens there */
	setup_shm();
	VerilatedContext *vctx = new VerilatedContext;
	m = new Vcluster{vctx};
	NodePorts ports[SIM_NODES];
	sim_bind_ports(m, ports);
	for (int n = 0; n < SIM_NODES; n++) {
		hosts.push_back(new Host(this, n, ports[n]));
		*ports[n].rd_ready = 1;   /* requests are always taken (queued) */
		*ports[n].w_ready = 1;    /* writes are posted */
	}
	m->ber_threshold = cfg.ber_threshold;
	m->sys_rst = 1;
	for (int i = 0; i < 8; i++) {
		m->sys_clk = 0;
		m->eval();
		m->sys_clk = 1;
		m->eval();
	}
	m->sys_rst = 0;
	bring_up();

	double t0 = wall_s(), next_stats = t0 + cfg.stats_s;
	uint64_t idle_ticks = 0;
	while (!stop) {
		bool attached = g->clients > 0;
		bool busy = anything_in_flight();
		if (cfg.free_run) {
			for (int i = 0; i < 256; i++)
				step();
			for (Client *cl : std::vector<Client *>(clients))
				if (cl->st == CState::Teardown && cl->td_phase == 2)
					cl->device ? device_teardown_step(cl) : teardown_step(cl);
			poll_sockets(0);
		} else if (links_up && !busy && !attached) {
			poll_sockets(200);   /* nobody attached: the clock stands still */
		} else if (links_up && attached && !busy && cycle - last_activity > cfg.idle_cycles) {
			/* Nothing in flight for a while: tick slowly until a client wakes us. */
			__atomic_store_n(&g->sleeping, 1, __ATOMIC_SEQ_CST);
			bool pending = false;
			for (Client *cl : clients)
				if (cl->st == CState::Active &&
				    __atomic_load_n(&cl->ctl->q_head, __ATOMIC_SEQ_CST) != cl->q_tail)
					pending = true;
			if (!pending)
				poll_sockets((int)(cfg.idle_tick_us / 1000) ? (int)(cfg.idle_tick_us / 1000) : 1);
			__atomic_store_n(&g->sleeping, 0, __ATOMIC_SEQ_CST);
			idle_ticks++;
			for (uint32_t i = 0; i < cfg.idle_burst && !stop; i++)
				step();
			poll_sockets(0);
		} else {
			for (int i = 0; i < 256; i++) {
				step();
				for (Host *h : hosts)
					if (h->busy()) {
						last_activity = cycle;
						break;
					}
			}
			for (Client *cl : std::vector<Client *>(clients))
				if (cl->st == CState::Teardown && cl->td_phase == 2)
					cl->device ? device_teardown_step(cl) : teardown_step(cl);
			poll_sockets(0);
		}
		if (cfg.max_cycles && cycle >= cfg.max_cycles)
			break;
		if (cfg.stats_s > 0) {
			double now = wall_s();
			if (now >= next_stats) {
				print_stats(now - t0);
				next_stats = now + cfg.stats_s;
			}
		}
	}
	print_stats(wall_s() - t0);
	sim_log("stopped at cycle %llu (%llu idle ticks)", (unsigned long long)cycle, (unsigned long long)idle_ticks);
	m->final();
	cleanup();
	delete m;
	delete vctx;
	return errors ? 3 : 0;
}
