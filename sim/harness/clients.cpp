/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the client protocol: the UNIX socket's connections, hello and welcome
 * (SCM_RIGHTS), the checks of a client's memory, attach (a context, a job), hang-up,
 * and freeing a client once its context is torn down. See docs/simulator.md.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static pn_sim_trace *trace_of(pn_sim_global *g, int node, int ctx)
{
	return (pn_sim_trace *)((uint8_t *)g + g->trace_off + ((size_t)node * g->n_ctx + ctx) * g->trace_stride);
}

void Harness::accept_clients()
{
	for (;;) {
		int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		/* Only our own user and root attach: a client of another user would share our
		 * clients' NIC (the socket is 0600 as well; docs/simulator.md, "Trust"). */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    (cred.uid != geteuid() && cred.uid != 0)) {
			sim_log("refused a client of uid %u (pid %d): not this simulator's user",
				(unsigned)cred.uid, (int)cred.pid);
			close(fd);
			continue;
		}
		Client *cl = new Client;
		cl->id = next_client_id++;
		cl->fd = fd;
		cl->pid = cred.pid;
		clients.push_back(cl);
	}
}

int send_welcome(int fd, const pn_sim_welcome &w, int pass_fd)
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

pn_sim_welcome welcome_base()
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
		/* What the message is (pn_sim_proto.c, fuzzed by tests/fuzz/fuzz_sim_hello.c). */
		int kind = n > 0 ? pn_sim_msg_kind(&h, (size_t)n, nfds) : -EPROTO;
		if (kind == PN_SIM_MSG_FAULT) {
			/* A fault client (faults.cpp): every message is a request. */
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			pn_sim_fault f;
			memcpy(&f, &h, sizeof(f));
			on_fault_request(cl, f);
			return;
		}
		bool dev = kind == PN_SIM_MSG_DEVICE;
		if (kind < 0) {
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
	if (h.magic == PN_SIM_MAGIC_HELLO && h.version == PN_SIM_VERSION && h.pid > 0)
		cl->pid = h.pid;
	struct stat sb;
	/* The memory must be sealed against shrinking, or the client could make our
	 * mapping fault (SIGBUS) under the NIC's DMA. */
	int seals = fcntl(memfd, F_GET_SEALS);
	if (fstat(memfd, &sb) < 0)
		sb.st_size = 0;
	/* Magic, version, node, context, and every region inside the memory (pn_sim_proto.c). */
	pn_sim_hello_layout lay;
	int err = pn_sim_check_hello(&h, (uint64_t)sb.st_size, SIM_NODES, SIM_N_CTX, SIM_MTU, &lay);
	if (!err && (seals < 0 || !(seals & F_SEAL_SHRINK)))
		err = -EINVAL;
	if (err) {
		reject(cl, err);
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
	if (!take_queue(cl, h.status_off)) {   /* the queue lies below the status block */
		reject(cl, -EINVAL);
		return;
	}
	cl->rx_bytes = lay.rx_bytes;
	cl->tx_bytes = lay.tx_bytes;
	cl->rx_slots = lay.rx_slots;
	cl->slot_bytes = lay.slot_bytes;
	cl->node = node_index[h.node];   /* clients name nodes by id (firmware mode: any order) */
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
		/* Another job (of another size): busy while any of its clients is attached; one
		 * whose clients are all being torn down (they exited) ends soon, and this client
		 * is retried then (free_client). */
		for (const Client *c : clients)
			if (c->st == CState::Config || c->st == CState::Active) {
				reject(cl, -EBUSY);
				return;
			}
		return;
	}
	if (h.node >= want) {   /* a job spans node ids 0 .. want-1 */
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
	cl->trace = trace_of(g, node_id[cl->node], ctx);
	memset((void *)cl->trace, 0, sizeof(pn_sim_trace));
	store64(&cl->trace->generation, cl->gen);
	cl->st = CState::Config;
	configure(cl);
}

/* The client's MMIO queue in its control block (at queue_off, below end): checked, then
 * taken from its current head (nothing queued before the attach counts). */
bool Harness::take_queue(Client *cl, uint64_t end)
{
	pn_sim_ctl *c = cl->ctl;
	pn_sim_ctl copy;
	uint32_t qmask;
	memcpy(&copy, (const void *)c, sizeof(copy));   /* the client may change it meanwhile */
	if (pn_sim_check_ctl(&copy, end, &qmask) < 0)
		return false;
	cl->queue = (pn_sim_op *)(cl->mem + copy.queue_off);
	cl->qmask = qmask;
	cl->q_tail = __atomic_load_n(&c->q_head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->q_tail, cl->q_tail, __ATOMIC_RELEASE);
	return true;
}

/* A client is attached: it becomes active and gets w (status 0, its node, the job, the
 * global shm's size) with the global shared memory's fd. */
void Harness::send_attached(Client *cl, pn_sim_welcome &w)
{
	w.status = 0;
	w.node = (uint32_t)node_id[cl->node];
	w.nodes = (uint32_t)job_nodes;
	w.global_bytes = shm_bytes;
	/* A read-only descriptor of the very file we made (not whatever the name holds now). */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", shm_fd);
	int rofd = open(self, O_RDONLY | O_CLOEXEC);
	cl->st = CState::Active;
	g->clients++;
	if (rofd < 0 || send_welcome(cl->fd, w, rofd) < 0)
		sim_log("client %llu: welcome not delivered", (unsigned long long)cl->id);
	if (rofd >= 0)
		close(rofd);
}

/* The context is programmed: the client is attached. */
void Harness::welcome(Client *cl)
{
	pn_sim_welcome w = welcome_base();
	w.ctx = (uint32_t)cl->ctx;
	w.dma_base = PN_SIM_DMA_BASE(cl->ctx);
	send_attached(cl, w);
	sim_log("client %llu (pid %d) attached: node %d ctx %d, %u RX slots, %u TX entries, %llu MiB, cycle %llu",
		(unsigned long long)cl->id, cl->pid, cl->node, cl->ctx, cl->rx_slots, 1u << cl->hello.tx_log2,
		(unsigned long long)(cl->mem_bytes >> 20), (unsigned long long)cycle);
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
		cl->td_start = cycle;
		sim_log("client %llu (pid %d) detached from node %d ctx %d at cycle %llu: disabling the context%s",
			(unsigned long long)cl->id, cl->pid, cl->node, cl->ctx, (unsigned long long)cycle,
			cl->device ? "s (device)" : "");
		if (cl->device)
			device_teardown(cl);
		else
			teardown(cl);
		break;
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
