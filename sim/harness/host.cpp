/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One node's host: Wishbone master (MMIO), DMA read server, DMA write server.
 * The same rules as tests/model/host.py, at Verilator speed (docs/simulator.md).
 */
#include <algorithm>
#include <cstring>

#include "harness.h"

void Script::csr_write(uint32_t addr, unsigned bits, uint64_t value)
{
	unsigned n = (bits + 31) / 32;
	for (unsigned i = 0; i < n; i++) {
		unsigned shift = 32 * (n - 1 - i);
		uint32_t w = shift >= 64 ? 0 : (uint32_t)(value >> shift);
		steps.push_back({addr + 4 * i, w, 1});
	}
}

void Script::csr_read(uint32_t addr)
{
	steps.push_back({addr, 0, 0});
}

bool Host::busy() const
{
	if (!rj.empty() || beat_i < beats.size() || w_active || !pw.empty())
		return true;
	/* Background scripts (the status snapshot, status.cpp) do not count: they must not
	 * keep an idle harness from throttling its clock. */
	if (item_active && !(cur.script && cur.script->background))
		return true;
	for (const MmioItem &it : mq)
		if (!(it.script && it.script->background))
			return true;
	return false;
}

bool Host::has_script() const
{
	return (item_active && cur.script) || scripts_queued;
}

/* A load's answer is due at max(cycle after its bus access, obs + c_mmio_r) >= obs +
 * c_mmio_r; a DMA write is visible (and may owe a client its look: the pause) at its due
 * cycle, the pause then due pause_grace cycles later. Loads are taken from the clients'
 * queues and writes queued (due >= now + c_dma_w >= the window) before a window starts,
 * so these bounds are known at its start. */
uint64_t Host::window_bound() const
{
	uint64_t b = UINT64_MAX;
	if (item_active && !cur.script && is_read(cur.kind))
		b = cur.obs + H->cfg.c_mmio_r;
	if (reads_queued)
		for (const MmioItem &it : mq)
			if (!it.script && is_read(it.kind)) {
				b = std::min(b, it.obs + H->cfg.c_mmio_r);
				break;   /* mq is in the order the loads were taken: the first is the earliest */
			}
	if (!pw.empty())
		b = std::min(b, pw.front().due + H->cfg.pause_grace);
	return b;
}

void Host::push_script(Script *s, uint64_t due)
{
	MmioItem it{};
	it.due = due;
	it.obs = due;
	it.script = s;
	mq.push_back(it);
	scripts_queued++;
}

/* ---- MMIO: one item (client operation or script) at a time, one bus access at a time --- */

void Host::start_item(uint64_t cycle)
{
	while (!mq.empty() && mq.front().due <= cycle) {
		MmioItem it = mq.front();
		mq.pop_front();
		if (!it.script)
			reads_queued -= is_read(it.kind);
		else
			scripts_queued--;
		if (it.script) {
			Script *s = it.script;
			if (s->build)
				s->build(*s);
			s->reads.clear();
			if (s->steps.empty()) {
				if (s->done)
					s->done(*s);
				delete s;
				continue;
			}
			steps = s->steps.data();
			nsteps = s->steps.size();
		} else {
			if (!H->item_live(it))
				continue;   /* its client is gone: a posted write that never arrives */
			/* A device client's offsets are BAR0 offsets already. */
			uint32_t page = it.cl->device ? 0 : (uint32_t)it.cl->ctx * PN_CTX_PAGE_BYTES;
			switch (it.kind) {
			case PN_SIM_OP_W32:
				csteps[0] = {page + it.off, (uint32_t)it.value, 1};
				nsteps = 1;
				break;
			case PN_SIM_OP_W64:
				if (SIM_BUS_BYTES == 8 && !(it.off & 7)) {   /* one beat */
					csteps[0] = {page + it.off, it.value, 1, 8};
					nsteps = 1;
					break;
				}
				csteps[0] = {page + it.off, (uint32_t)it.value, 1};
				csteps[1] = {page + it.off + 4, (uint32_t)(it.value >> 32), 1};
				nsteps = 2;
				break;
			case PN_SIM_OP_R32:
				csteps[0] = {page + it.off, 0, 0};
				nsteps = 1;
				break;
			case PN_SIM_OP_RCSR:
				csteps[0] = {it.off, 0, 0};
				nsteps = 1;
				break;
			default:
				continue;
			}
			steps = csteps;
		}
		cur = it;
		step_i = 0;
		item_active = true;
		return;
	}
}

void Host::finish_item(uint64_t cycle)
{
	item_active = false;
	wb_ops += nsteps;
	if (cur.script) {
		Script *s = cur.script;
		cur.script = nullptr;
		if (s->done)
			s->done(*s);
		delete s;
	} else {
		H->op_done(node, cur, rvals, cycle);
	}
}

void Host::drive_wb()
{
	if (item_active) {
		const WbStep &s = steps[step_i];
		*p.bus_adr = s.adr / SIM_BUS_BYTES;
#if SIM_BUS_BYTES == 8
		/* a 4-byte access is one beat on its half of the 64-bit word */
		unsigned hi = s.bytes == 4 && (s.adr & 4);
		*p.bus_dat_w = hi ? s.dat << 32 : s.dat;
		*p.bus_sel = s.bytes == 8 ? 0xFF : hi ? 0xF0 : 0x0F;
#else
		*p.bus_dat_w = (uint32_t)s.dat;
		*p.bus_sel = 0xF;
#endif
		*p.bus_we = s.we;
		*p.bus_cyc = 1;
		*p.bus_stb = 1;
	} else {
		*p.bus_cyc = 0;
		*p.bus_stb = 0;
		*p.bus_we = 0;
	}
}

/* ---- DMA reads ------------------------------------------------------------------------ */

void Host::rd_request(uint64_t cycle)
{
	uint64_t adr = *p.rd_adr;
	uint32_t dw = *p.rd_len ? *p.rd_len : 1024;
	uint32_t n = dw * 4;
	bool ok = true;
	Client *cl;

	if (*p.rd_we) {
		H->protocol_error(node, "write request on the DMA read port at %#llx", (unsigned long long)adr);
		ok = false;
	}
	if (n > H->cfg.max_read) {
		H->protocol_error(node, "DMA read of %u bytes > max request %u at %#llx", n, H->cfg.max_read,
				  (unsigned long long)adr);
		ok = false;
	}
	if ((adr >> 12) != ((adr + n - 1) >> 12)) {
		H->protocol_error(node, "DMA read %#llx+%u crosses a 4 KiB boundary", (unsigned long long)adr, n);
		ok = false;
	}
	if ((adr | n) & 7) {
		H->protocol_error(node, "DMA read %#llx+%u not 8-byte aligned", (unsigned long long)adr, n);
		ok = false;
	}
	if (ok && !H->dma_ptr(node, adr, n, false, &cl)) {
		H->dma_refused(node, "read", adr, n);
		ok = false;
	}
	rj.push_back({cycle + H->cfg.c_dma_r, adr, n, ok});
	reads++;
	read_bytes += n;
}

void Host::make_beats(const RdJob &j)
{
	const uint8_t *src = nullptr;
	Client *cl;
	beats.clear();
	beat_i = 0;
	if (j.ok) {
		/* The memory is read when the completion is formed (the client may be gone). */
		src = H->dma_ptr(node, j.adr, j.nbytes, false, &cl);
		if (!src)
			H->dma_refused(node, "read (completion)", j.adr, j.nbytes);
	}
	const uint32_t rcb = H->cfg.rcb;
	uint32_t pos = 0;
	while (pos < j.nbytes) {
		uint64_t a = j.adr + pos;
		uint32_t k = std::min<uint32_t>(j.nbytes - pos, rcb - (uint32_t)(a % rcb));
		uint32_t nb = (k + 7) / 8;
		for (uint32_t i = 0; i < nb; i++) {
			uint64_t d = 0;
			if (src) {
				uint32_t o = pos + 8 * i;
				if (o + 8 <= j.nbytes)
					d = __atomic_load_n((const uint64_t *)(src + o), __ATOMIC_RELAXED);
				else
					memcpy(&d, src + o, j.nbytes - o);
			}
			beats.push_back({d, (uint32_t)a, (uint16_t)(k / 4), (uint8_t)(i == 0), (uint8_t)(i == nb - 1),
					 (uint8_t)(pos + k == j.nbytes), (uint8_t)(src == nullptr)});
		}
		pos += k;
	}
}

/* ---- DMA writes ----------------------------------------------------------------------- */

void Host::wr_beat(uint64_t cycle)
{
	if (*p.w_first) {
		if (w_active)
			H->protocol_error(node, "DMA write started before the previous one ended");
		if (!*p.w_we)
			H->protocol_error(node, "read request on the DMA write port");
		w_active = true;
		w_adr = *p.w_adr;
		w_bytes = (*p.w_len ? *p.w_len : 1024) * 4u;
		w_data.clear();
	}
	if (!w_active) {
		H->protocol_error(node, "DMA write beat without first");
		return;
	}
	uint64_t d = *p.w_dat;
	size_t o = w_data.size();
	w_data.resize(o + 8);
	memcpy(&w_data[o], &d, 8);
	if (!*p.w_last)
		return;
	w_active = false;
	uint32_t n = w_bytes;
	bool ok = true;
	if (w_data.size() != ((size_t)n + 7) / 8 * 8) {
		H->protocol_error(node, "DMA write %#llx: len %u bytes but %zu sent", (unsigned long long)w_adr, n,
				  w_data.size());
		ok = false;
	}
	if (n > H->cfg.max_payload) {
		H->protocol_error(node, "DMA write of %u bytes > max payload %u at %#llx", n, H->cfg.max_payload,
				  (unsigned long long)w_adr);
		ok = false;
	}
	if ((w_adr >> 12) != ((w_adr + n - 1) >> 12)) {
		H->protocol_error(node, "DMA write %#llx+%u crosses a 4 KiB boundary", (unsigned long long)w_adr, n);
		ok = false;
	}
	if ((w_adr | n) & 7) {
		H->protocol_error(node, "DMA write %#llx+%u not 8-byte aligned", (unsigned long long)w_adr, n);
		ok = false;
	}
	writes++;
	write_bytes += n;
	if (!ok)
		return;
	w_data.resize(n);
	pw.push_back({cycle + H->cfg.c_dma_w, w_adr, std::move(w_data)});
	w_data = std::vector<uint8_t>();
	w_data.reserve(256);
}

void Host::apply_writes(uint64_t cycle)
{
	while (!pw.empty() && pw.front().due <= cycle) {
		PendWrite &w = pw.front();
		uint32_t n = (uint32_t)w.data.size();
		Client *cl = nullptr;
		uint8_t *dst = H->dma_ptr(node, w.adr, n, true, &cl);
		if (!dst) {
			H->dma_refused(node, "write", w.adr, n);
		} else {
			/* The trace records first: a client that sees the packet sees its record. */
			H->dma_written(node, cl, w.adr, n, w.data.data());
			__atomic_thread_fence(__ATOMIC_RELEASE);
			/* 64-bit stores: a client polling a valid word never sees half of it. */
			for (uint32_t o = 0; o < n; o += 8) {
				uint64_t v;
				memcpy(&v, &w.data[o], 8);
				__atomic_store_n((uint64_t *)(dst + o), v, __ATOMIC_RELAXED);
			}
			__atomic_thread_fence(__ATOMIC_RELEASE);
		}
		pw.pop_front();
	}
}

/* ---- per cycle ------------------------------------------------------------------------ */

void Host::pre(uint64_t cycle)
{
	if (!item_active && !mq.empty())
		start_item(cycle);
	drive_wb();

	if (beat_i >= beats.size() && !rj.empty() && rj.front().due <= cycle) {
		make_beats(rj.front());
		rj.pop_front();
	}
	if (beat_i < beats.size()) {
		const Beat &b = beats[beat_i];
		*p.c_valid = 1;
		*p.c_dat = b.dat;
		*p.c_first = b.first;
		*p.c_last = b.last;
		*p.c_end = b.end;
		*p.c_len = b.len;
		*p.c_adr = b.adr;
		*p.c_err = b.err;
		c_driving = true;
	} else if (c_driving) {
		*p.c_valid = 0;
		c_driving = false;
	}
}

void Host::post(uint64_t cycle)
{
	if (item_active && *p.bus_ack) {
		const WbStep &s = steps[step_i];
		if (!s.we) {
			uint32_t v = (uint32_t)(SIM_BUS_BYTES == 8 && (s.adr & 4) ? (uint64_t)*p.bus_dat_r >> 32
										  : *p.bus_dat_r);
			if (cur.script)
				cur.script->reads.push_back(v);
			else
				rvals[step_i & 1] = v;
		}
		if (++step_i == nsteps)
			finish_item(cycle);
	}
	if (c_driving && *p.c_ready) {
		if (++beat_i == beats.size()) {
			beats.clear();
			beat_i = 0;
		}
	}
	if (*p.rd_valid)
		rd_request(cycle);
	if (*p.w_valid)
		wr_beat(cycle);
	if (!pw.empty())
		apply_writes(cycle);
}
