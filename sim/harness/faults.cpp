/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: fault injection on the simulated cables. Each cable (numbered as
 * paranic.spec.topo.Topology.cables(): SIM_CABLE_ENDS) has a cut input and a bit-error
 * threshold input (both directions). They are set from a schedule given on the command
 * line (--cut K@CYCLE, --mend K@CYCLE, --ber-cable K=THRESH) and by fault clients on the
 * socket (struct pn_sim_fault, paranic.spec.sim: cut, mend, set the threshold, query; now
 * or at a cycle). See docs/simulator.md ("Fault injection").
 */
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <sys/socket.h>

#include "Vcluster.h"
#include "harness.h"

/* A fault request arrives in the buffer of a hello (clients.cpp). */
static_assert(sizeof(pn_sim_fault) <= sizeof(pn_sim_hello), "pn_sim_fault larger than pn_sim_hello");

/* After a fault takes effect the clock keeps running this long even with nobody
 * attached, so that the links visibly react (a link's loss-of-signal timeout is 1024). */
static const uint64_t FAULT_SETTLE_CYCLES = 8192;

static const char *op_name(int op)
{
	switch (op) {
	case PN_SIM_FAULT_CUT: return "cut";
	case PN_SIM_FAULT_MEND: return "mended";
	case PN_SIM_FAULT_BER: return "error threshold set";
	case PN_SIM_FAULT_QUERY: return "queried";
	default: return "?";
	}
}

/* An unsigned integer, the whole string (decimal, 0x hex). */
static bool parse_u64(const char *s, uint64_t &out)
{
	if (!*s || *s == '-' || *s == '+')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	out = v;
	return true;
}

bool fault_option(Config &c, const char *opt, const char *arg, std::string &err)
{
	std::string a(arg), what = std::string("--") + opt + " " + arg;
	bool ber = !strcmp(opt, "ber-cable");
	size_t sep = a.find(ber ? '=' : '@');
	if (sep == std::string::npos) {
		err = what + ": expected " + (ber ? "K=THRESH" : "K@CYCLE");
		return false;
	}
	uint64_t k, v;
	std::string ks = a.substr(0, sep), vs = a.substr(sep + 1);
	if (!parse_u64(ks.c_str(), k) || k >= SIM_CABLES) {
		err = what + ": no cable " + ks + " (this " SIM_TOPO " has cables 0.." + std::to_string(SIM_CABLES - 1) +
		      ", numbered as paranic.spec.topo.Topology.cables())";
		return false;
	}
	if (!parse_u64(vs.c_str(), v)) {
		err = what + ": " + (ber ? "the threshold must be an integer in 0..2^32-1"
					  : "the cycle must be a non-negative integer");
		return false;
	}
	if (ber) {
		if (v > 0xffffffffull) {
			err = what + ": the threshold must be an integer in 0..2^32-1 (python -m paranic.sim "
				     "--ber-cable K=RATE converts a bit-error rate)";
			return false;
		}
		c.faults.push_back({0, PN_SIM_FAULT_BER, (int)k, (uint32_t)v});
	} else {
		c.faults.push_back({v, !strcmp(opt, "cut") ? PN_SIM_FAULT_CUT : PN_SIM_FAULT_MEND, (int)k, 0});
	}
	return true;
}

void Harness::faults_init()
{
	sim_bind_cables(m, cable_cut_p, cable_ber_p);
	/* Every cable's own threshold; the model's global one (a floor) stays 0. */
	m->ber_threshold = 0;
	for (int k = 0; k < SIM_CABLES; k++) {
		*cable_cut_p[k] = 0;
		*cable_ber_p[k] = cfg.ber_threshold;
	}
	fault_queue = cfg.faults;
	std::stable_sort(fault_queue.begin(), fault_queue.end(),
			 [](const FaultEvent &a, const FaultEvent &b) { return a.at < b.at; });
	for (const FaultEvent &e : fault_queue)
		if (e.at > 0)
			sim_log("cable %d: to be %s at cycle %llu", e.cable, op_name(e.op), (unsigned long long)e.at);
	faults_tick();   /* the ones at cycle 0 */
}

void Harness::fault_apply(const FaultEvent &e)
{
	const uint8_t *c = SIM_CABLE_ENDS[e.cable];
	switch (e.op) {
	case PN_SIM_FAULT_CUT: *cable_cut_p[e.cable] = 1; break;
	case PN_SIM_FAULT_MEND: *cable_cut_p[e.cable] = 0; break;
	case PN_SIM_FAULT_BER: *cable_ber_p[e.cable] = e.value; break;
	default: return;
	}
	fault_settle = cycle + FAULT_SETTLE_CYCLES;
	last_activity = cycle;
	if (e.op == PN_SIM_FAULT_BER)
		sim_log("cable %d (node %d port %d - node %d port %d): error threshold %u / 2^32 at cycle %llu",
			e.cable, c[0], c[1], c[2], c[3], e.value, (unsigned long long)cycle);
	else
		sim_log("cable %d (node %d port %d - node %d port %d) %s at cycle %llu", e.cable, c[0], c[1], c[2],
			c[3], op_name(e.op), (unsigned long long)cycle);
}

void Harness::faults_tick()
{
	while (!fault_queue.empty() && fault_queue.front().at <= cycle) {
		FaultEvent e = fault_queue.front();
		fault_queue.erase(fault_queue.begin());
		fault_apply(e);
	}
}

bool Harness::faults_pending() const
{
	return !fault_queue.empty() || cycle < fault_settle;
}

bool Harness::cable_cut_at(int node, int port) const
{
	for (int k = 0; k < SIM_CABLES; k++) {
		const uint8_t *c = SIM_CABLE_ENDS[k];
		if ((c[0] == node && c[1] == port) || (c[2] == node && c[3] == port))
			return *cable_cut_p[k] != 0;
	}
	return false;
}

/* A fault client's request: validated, applied now or queued, answered at once. */
void Harness::on_fault_request(Client *cl, const pn_sim_fault &f)
{
	pn_sim_fault_reply r;
	memset(&r, 0, sizeof(r));
	r.magic = PN_SIM_MAGIC_FAULT_REPLY;
	r.version = PN_SIM_VERSION;
	r.cable = f.cable;
	r.cables = SIM_CABLES;
	bool ok = pn_sim_check_fault(&f, SIM_CABLES) == 0;   /* pn_sim_proto.c */
	if (!ok) {
		r.status = -EINVAL;
		sim_log("fault client %llu (pid %d): bad request (op %u, cable %u, value %llu) refused",
			(unsigned long long)cl->id, cl->pid, f.op, f.cable, (unsigned long long)f.value);
	} else if (f.op != PN_SIM_FAULT_QUERY) {
		FaultEvent e{std::max<uint64_t>(f.at_cycle, cycle), (int)f.op, (int)f.cable, (uint32_t)f.value};
		r.at_cycle = e.at;
		if (e.at <= cycle) {
			fault_apply(e);
		} else {
			auto pos = std::upper_bound(fault_queue.begin(), fault_queue.end(), e,
						    [](const FaultEvent &a, const FaultEvent &b) { return a.at < b.at; });
			fault_queue.insert(pos, e);
			sim_log("fault client %llu: cable %u to be %s at cycle %llu", (unsigned long long)cl->id, f.cable,
				op_name(e.op), (unsigned long long)e.at);
		}
	} else {
		r.at_cycle = cycle;
	}
	if (ok) {
		r.cut = *cable_cut_p[f.cable];
		r.ber = *cable_ber_p[f.cable];
	}
	r.cycle = cycle;
	if (send(cl->fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(r))
		sim_log("fault client %llu: reply not delivered", (unsigned long long)cl->id);
}
