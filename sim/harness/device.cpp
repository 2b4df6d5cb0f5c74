/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: device clients: a QEMU guest's PCI function (sim/qemu/pn_proxydev) that
 * holds a whole node; its hello, its welcome, and its node's contexts when it leaves.
 * See docs/driver.md ("The driver in a QEMU guest").
 */
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A device client (PN_SIM_HELLO_DEVICE, sim/qemu/pn_proxydev): a QEMU guest's PCI
 * function for a whole node. Its memfd holds only the control block and the MMIO
 * queue; ramfd is the guest's RAM (offset = guest-physical address = bus address). */
void Harness::on_device_hello(Client *cl, const pn_sim_hello &h, int ramfd)
{
	cl->hello = h;
	cl->ramfd = ramfd;
	cl->device = true;
	if (h.magic == PN_SIM_MAGIC_HELLO && h.version == PN_SIM_VERSION && h.pid > 0)
		cl->pid = h.pid;
	struct stat sb, rb;
	int s1 = fcntl(cl->memfd, F_GET_SEALS), s2 = fcntl(ramfd, F_GET_SEALS);
	if (fstat(cl->memfd, &sb) < 0)
		sb.st_size = 0;
	if (fstat(ramfd, &rb) < 0)
		rb.st_size = 0;
	int err = pn_sim_check_device_hello(&h, (uint64_t)sb.st_size, (uint64_t)rb.st_size, SIM_NODES);
	if (!err && (s1 < 0 || !(s1 & F_SEAL_SHRINK) || s2 < 0 || !(s2 & F_SEAL_SHRINK)))
		err = -EINVAL;
	if (err) {
		reject(cl, err);
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
	if (!take_queue(cl, h.mem_bytes)) {
		reject(cl, -EINVAL);
		return;
	}
	cl->node = node_index[h.node];
	cl->want_ctx = -1;
	cl->st = CState::Waiting;
	try_attach(cl);
}

void Harness::device_welcome(Client *cl)
{
	pn_sim_welcome w = welcome_base();
	w.dma_base = 0;   /* bus address = guest-physical address */
	send_attached(cl, w);
	sim_log("device client %llu (pid %d) attached: node %d (all contexts; the guest's driver programs them), "
		"guest RAM %llu MiB at bus address 0, cycle %llu", (unsigned long long)cl->id, cl->pid, cl->node,
		(unsigned long long)(cl->ram_bytes >> 20), (unsigned long long)cycle);
}

/* A guest's node when its device process left (the guest powered off or QEMU died):
 * CLOSE every context (contexts.cpp; the guest's rings are not known here: zeros), so
 * no new DMA goes into the guest's RAM, and unmap the RAM once all are reset. */
void Harness::device_teardown(Client *cl)
{
	cl->td_left = SIM_N_CTX;
	cl->td_forced = false;
	for (int c = 0; c < SIM_N_CTX; c++) {
		pn_ctxseq_cfg z{};
		z.ctx = (uint32_t)c;
		CtxRun *r = ctx_new(cl->node, PN_CTXSEQ_CLOSE, z);
		r->give_up = [this, cl, r](uint32_t) {
			if (!ctx_overdue(r))
				return false;
			if (!cl->td_forced)
				sim_log("node %d: contexts still busy %llu cycles after the guest left; resetting anyway",
					cl->node, (unsigned long long)(cycle - cl->td_start));
			cl->td_forced = true;
			return true;
		};
		r->done = [this, cl](int) {
			if (--cl->td_left)
				return;
			sim_log("node %d: every context reset, guest RAM released %llu cycles after the device left",
				cl->node, (unsigned long long)(cycle - cl->td_start));
			free_client(cl);
		};
		ctx_push(r, cycle);
	}
}
