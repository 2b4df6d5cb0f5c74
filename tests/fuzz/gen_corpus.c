/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Seeds for the fuzz harnesses: valid messages of every parser, built from libparanic's
 * own headers (the structures, magics and layouts), in each harness's input format (see
 * the comment at the top of each fuzz_<parser>.c). `make -C tests/fuzz corpus` writes
 * them to tests/fuzz/corpus/<parser>/seed-<name>; crashers found later are kept there
 * too (crash-<what>), as regression inputs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "am_wire.h"
#include "daemon_proto.h"
#include "fake_sim.h"
#include "hal_int.h"
#include "paranic/pn_protocol.h"
#include "pn_sim_proto.h"
#include "ports_wire.h"
#include "sock_wire.h"

static const char *root;

/* An input being built. */
struct in {
	uint8_t b[1 << 16];
	size_t n;
};

static void put(struct in *x, const void *p, size_t n)
{
	if (x->n + n > sizeof(x->b))
		abort();
	memcpy(x->b + x->n, p, n);
	x->n += n;
}

static void put8(struct in *x, unsigned v)
{
	uint8_t c = (uint8_t)v;
	put(x, &c, 1);
}

static void save_as(const char *parser, const char *prefix, const char *name, const struct in *x);

static void save(const char *parser, const char *name, const struct in *x)
{
	save_as(parser, "seed", name, x);
}

/* The lies of tests/fuzz/peers.c (what crashed or misled libparanic before the checks),
 * kept as regression inputs. */
static void save_crash(const char *parser, const char *name, const struct in *x)
{
	save_as(parser, "crash", name, x);
}

static void save_as(const char *parser, const char *prefix, const char *name, const struct in *x)
{
	char dir[512], path[600];
	FILE *f;
	snprintf(dir, sizeof(dir), "%s/%s", root, parser);
	mkdir(root, 0755);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s-%s", dir, prefix, name);
	if (!(f = fopen(path, "wb")) || fwrite(x->b, 1, x->n, f) != x->n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* ---- rx_ring: [mtu selector][ring log2 selector][batch][ring] -------------------------------- */

static void slot(struct in *x, uint32_t mtu, uint64_t number, uint8_t type, uint8_t flags, uint32_t len, uint64_t tag)
{
	uint8_t s[PN_RX_SLOT_BYTES(PN_MAX_MTU)];
	uint64_t w[2] = {0, 0}, valid = number + 1;
	memset(s, 0, sizeof(s));
	w[PN_HDR_TYPE_WORD] |= (uint64_t)type << PN_HDR_TYPE_SHIFT;
	w[PN_HDR_FLAGS_WORD] |= (uint64_t)flags << PN_HDR_FLAGS_SHIFT;
	w[PN_HDR_LENGTH_WORD] |= ((uint64_t)len & PN_HDR_LENGTH_MASK) << PN_HDR_LENGTH_SHIFT;
	w[PN_HDR_TAG_WORD] |= (tag & PN_HDR_TAG_MASK) << PN_HDR_TAG_SHIFT;
	w[PN_HDR_SRC_NODE_WORD] |= (uint64_t)1 << PN_HDR_SRC_NODE_SHIFT;
	memcpy(s, w, sizeof(w));
	for (uint32_t i = 0; i < len && i < mtu; i++)
		s[PN_RX_SLOT_PAYLOAD_OFFSET + i] = (uint8_t)i;
	memcpy(s + PN_RX_VALID_OFFSET(mtu), &valid, sizeof(valid));
	put(x, s, PN_RX_SLOT_BYTES(mtu));
}

static void gen_rx_ring(void)
{
	struct in x = {.n = 0};
	/* mtu 256 (index 2), 4 slots (1 + 1), batch 2: three packets, one not yet written */
	put8(&x, 2), put8(&x, 1), put8(&x, 1);
	slot(&x, 256, 0, PN_TYPE_DATA, PN_FLAG_SOM | PN_FLAG_EOM, 8, 0x1234);
	slot(&x, 256, 1, PN_TYPE_DATA, PN_FLAG_SOM, 256, 0xA100000000000001ull);
	slot(&x, 256, 2, PN_TYPE_RMA_RESP, PN_FLAG_EOM, 0, 7);
	save("rx_ring", "three-packets", &x);
	x.n = 0;
	/* mtu 64 (index 1), 2 slots: a full lap, the second slot wrapping to number 2 */
	put8(&x, 1), put8(&x, 0), put8(&x, 0);
	slot(&x, 64, 2, PN_TYPE_CONTROL, 3, 64, 1);
	slot(&x, 64, 1, PN_TYPE_BARRIER, 3, 0, 0);
	save("rx_ring", "wrap", &x);
	x.n = 0;
	/* mtu 1024, a record longer than the MTU (refused), then a good one */
	put8(&x, 3), put8(&x, 0), put8(&x, 0);
	slot(&x, 1024, 0, PN_TYPE_DATA, 3, 5000, 9);
	slot(&x, 1024, 1, PN_TYPE_DATA, 3, 16, 9);
	save("rx_ring", "refused-length", &x);
}

/* ---- ports: [mode][flags][payload] or mode 4: ring -------------------------------------------- */

static void gen_ports(void)
{
	struct in x = {.n = 0};
	struct pw_msg m = {.tag = 42, .len = 16, .channel = 3};
	struct pw_rts rts = {.m = {.tag = 7, .len = 1 << 20, .channel = 1}, .sreq = 5};
	struct pw_ctl c = {.src_epoch = 11, .dst_epoch = 12, .a = 1, .b = 2, .credit = 64, .conn = 1};
	struct pw_dead dd = {.node = 1, .ctx = 2, .pid = 1234};
	uint8_t data[16] = "0123456789abcdef";

	put8(&x, 0), put8(&x, PN_FLAG_SOM | PN_FLAG_EOM), put(&x, &m, sizeof(m)), put(&x, data, sizeof(data));
	save("ports", "eager", &x);
	x.n = 0;
	m.len = 4096;
	put8(&x, 0), put8(&x, PN_FLAG_SOM), put(&x, &m, sizeof(m)), put(&x, data, sizeof(data));
	save("ports", "eager-first-of-many", &x);
	x.n = 0;
	put8(&x, 1), put8(&x, 3), put(&x, &rts, sizeof(rts));
	save("ports", "rts", &x);
	x.n = 0;
	put8(&x, 2), put8(&x, 3), put(&x, &c, sizeof(c));
	save("ports", "ctl", &x);
	x.n = 0;
	put8(&x, 3), put8(&x, 3), put(&x, &dd, sizeof(dd));
	save("ports", "peer-dead", &x);
	x.n = 0;
	/* a 4 KiB ring: two packets, a WRAP, a packet at 0 again (head: flags * 448) */
	{
		uint8_t ring[4096];
		struct pw_shm_rec r = {.tag = PW_TAG(PW_EAGER, 3, 0), .len = 100, .flags = 3, .kind = PW_SHM_PKT};
		memset(ring, 0, sizeof(ring));
		memcpy(ring, &r, sizeof(r));
		r.len = 40;
		memcpy(ring + pw_shm_rec_bytes(100), &r, sizeof(r));
		r.kind = PW_SHM_WRAP;
		r.len = 0;
		memcpy(ring + pw_shm_rec_bytes(100) + pw_shm_rec_bytes(40), &r, sizeof(r));
		put8(&x, 4), put8(&x, 20), put(&x, ring, sizeof(ring));
		save("ports", "ring", &x);
	}
}

/* ---- am: [region length 8][message] --------------------------------------------------------- */

static void gen_am(void)
{
	struct in x = {.n = 0};
	uint64_t region = 1 << 20, args[4] = {1, 4096, 512, 77};
	struct paw_hdr h = {.kind = PAW_REQ, .nargs = 2, .handler = 3, .epoch = 99, .seq = 1, .len = 8};
	put(&x, &region, 8), put(&x, &h, sizeof(h)), put(&x, args, 16), put(&x, "payload!", 8);
	save("am", "request", &x);
	x.n = 0;
	h = (struct paw_hdr){.kind = PAW_GET, .nargs = 4, .epoch = 99, .seq = 2};
	put(&x, &region, 8), put(&x, &h, sizeof(h)), put(&x, args, sizeof(args));
	save("am", "rma-get", &x);
	x.n = 0;
	h = (struct paw_hdr){.kind = PAW_PING, .epoch = 99, .a = 5};
	put(&x, &region, 8), put(&x, &h, sizeof(h));
	save("am", "ping", &x);
}

/* ---- sock: [which][message] ------------------------------------------------------------------ */

static void gen_sock(void)
{
	struct in x = {.n = 0};
	struct sk_req rq = {.magic = SK_WIRE_MAGIC, .version = SK_WIRE_VERSION, .req_id = 1, .conn = 0x10005,
			    .src_addr = 0x0a4d0001, .dst_addr = 0x0a4d0002, .src_port = 40000, .dst_port = 80, .pid = 1};
	struct sk_ack ack = {.magic = SK_WIRE_MAGIC, .req_id = 1, .status = 0, .conn = 0x20007, .pid = 2};
	struct sk_move mv = {.magic = SK_WIRE_MAGIC, .conn = 0x30009, .pid = 3};
	put8(&x, 0), put(&x, &rq, sizeof(rq));
	save("sock", "req", &x);
	x.n = 0;
	put8(&x, 1), put(&x, &ack, sizeof(ack));
	save("sock", "ack", &x);
	x.n = 0;
	ack.status = ECONNREFUSED;
	ack.conn = 0;
	put8(&x, 1), put(&x, &ack, sizeof(ack));
	save("sock", "ack-refused", &x);
	x.n = 0;
	put8(&x, 2), put(&x, &mv, sizeof(mv));
	save("sock", "move", &x);
	x.n = 0;
	put8(&x, 3), put(&x, SK_DEFAULT_NET, strlen(SK_DEFAULT_NET));
	save("sock", "net", &x);
}

/* ---- daemon: [mode][...] ---------------------------------------------------------------------- */

static void frame(struct in *x, uint16_t type, int32_t status, uint32_t count, const void *p, uint32_t len)
{
	struct pnd_frame f = {.magic = PND_MAGIC, .type = type, .version = PND_PROTO_VERSION, .status = status,
			      .count = count, .len = len};
	put(x, &f, sizeof(f));
	if (len)
		put(x, p, len);
}

static void gen_daemon(void)
{
	struct in x = {.n = 0};
	struct pnd_attach a = {.abi = PN_ABI_VERSION, .node = 0, .ctx = 1, .job = "job-1"};
	pn_daemon_job_t j = {.id = "job-1", .nodes = 2, .ppn = 1, .command = "pn_bench pingpong"};
	char id[PN_DAEMON_NAME_MAX] = "job-1";
	/* a connection's requests, one after the other */
	put8(&x, 0);
	frame(&x, PND_ATTACH, 0, 0, &a, sizeof(a));
	frame(&x, PND_STATUS, 0, 0, NULL, 0);
	frame(&x, PND_PROCS, 0, 0, NULL, 0);
	frame(&x, PND_JOBS, 0, 0, NULL, 0);
	frame(&x, PND_JOB_START, 0, 0, &j, sizeof(j));
	frame(&x, PND_JOB_END, 0, 0, id, sizeof(id));
	frame(&x, PND_DETACH, 0, 0, NULL, 0);
	save("daemon", "requests", &x);
	x.n = 0;
	{
		struct {
			pn_daemon_info_t info;
			pn_daemon_node_t nodes[2];
		} st;
		memset(&st, 0, sizeof(st));
		st.info.nodes = 2;
		snprintf(st.info.cluster, sizeof(st.info.cluster), "default");
		snprintf(st.info.backend, sizeof(st.info.backend), "sw");
		st.nodes[1].node = 1;
		put8(&x, 1);
		frame(&x, PND_STATUS, 0, 2, &st, sizeof(st));
		save("daemon", "status-reply", &x);
	}
	x.n = 0;
	{
		pn_daemon_proc_t p[1];
		memset(p, 0, sizeof(p));
		p[0].pid = 42;
		snprintf(p[0].job, sizeof(p[0].job), "job-1");
		put8(&x, 2);
		frame(&x, PND_PROCS, 0, 1, p, sizeof(p));
		save("daemon", "procs-reply", &x);
	}
	x.n = 0;
	put8(&x, 3);
	frame(&x, PND_JOBS, 0, 1, &j, sizeof(j));
	save("daemon", "jobs-reply", &x);
	x.n = 0;
	{
		pn_daemon_info_t info;
		memset(&info, 0, sizeof(info));
		put8(&x, 1);
		frame(&x, PND_STATUS, 0, 3, &info, sizeof(info));   /* three node records that are not there */
		save_crash("daemon", "status-count", &x);
		x.n = 0;
		memset(info.cluster, 'A', sizeof(info.cluster));   /* no NUL in any string */
		memset(info.backend, 'B', sizeof(info.backend));
		memset(info.host, 'C', sizeof(info.host));
		put8(&x, 1);
		frame(&x, PND_STATUS, 0, 0, &info, sizeof(info));
		save_crash("daemon", "status-strings", &x);
	}
	x.n = 0;
	put8(&x, 3);
	frame(&x, PND_JOBS, -EACCES, 0, "not allowed", 12);
	save("daemon", "refusal", &x);
	x.n = 0;
	{
		struct pnd_hello w = {.magic = PND_HELLO_MAGIC, .pid = 7, .addr = 0x0a4d0002, .abi = PN_ABI_VERSION, .seq = 3,
				      .host = "node1"};
		uint16_t src = 1;
		put8(&x, 4), put(&x, &src, 2), put8(&x, 15), put8(&x, 1), put(&x, &w, sizeof(w));
		save("daemon", "hello", &x);
	}
}

/* ---- sim_hello: [fds][memfd selector][message length][message][ctl] -------------------------- */

static void gen_sim_hello(void)
{
	struct in x = {.n = 0};
	/* As hal_sim.c lays out its memory: ctl + queue | status | RX | TX | heap. */
	uint64_t mem = 1ull << 30, queue_off = 4096, qsize = 4096;
	uint64_t status_off = (queue_off + qsize * sizeof(struct pn_sim_op) + 4095) & ~4095ull;
	uint64_t rx_off = status_off + 4096;
	uint64_t tx_off = (rx_off + 256 * PN_RX_SLOT_BYTES(PN_MAX_MTU) + 4095) & ~4095ull;
	uint64_t heap_off = (tx_off + 256 * PN_TX_DESC_BYTES + 65535) & ~65535ull;
	struct pn_sim_hello h = {.magic = PN_SIM_MAGIC_HELLO, .version = PN_SIM_VERSION, .node = 1, .ctx = -1,
				 .nodes = 2, .pid = 1234, .rx_log2 = 8, .tx_log2 = 8, .mem_bytes = mem,
				 .status_off = status_off, .rx_off = rx_off, .tx_off = tx_off, .heap_off = heap_off,
				 .heap_bytes = mem - heap_off};
	struct pn_sim_ctl c;
	struct pn_sim_fault f = {.magic = PN_SIM_MAGIC_FAULT, .version = PN_SIM_VERSION, .op = PN_SIM_FAULT_BER,
				 .cable = 1, .at_cycle = 1000, .value = 4295};
	memset(&c, 0, sizeof(c));
	c.magic = PN_SIM_MAGIC_CTL;
	c.version = PN_SIM_VERSION;
	c.qsize = (uint32_t)qsize;
	c.queue_off = queue_off;
	put8(&x, 1), put8(&x, 0), put8(&x, sizeof(h)), put(&x, &h, sizeof(h)), put(&x, &c, sizeof(c));
	save("sim_hello", "hello", &x);
	x.n = 0;
	h.flags = PN_SIM_HELLO_DEVICE;
	h.ctx = -1;
	h.mem_bytes = 1 << 20;
	h.heap_bytes = 256ull << 20;
	put8(&x, 2), put8(&x, 0), put8(&x, sizeof(h)), put(&x, &h, sizeof(h)), put(&x, &c, sizeof(c));
	save("sim_hello", "device", &x);
	x.n = 0;
	put8(&x, 0), put8(&x, 0), put8(&x, sizeof(f)), put(&x, &f, sizeof(f));
	save("sim_hello", "fault", &x);
}

/* ---- sim_welcome: [welcome length][welcome][global] ------------------------------------------ */

static void gen_sim_welcome(void)
{
	struct in x = {.n = 0};
	struct pn_sim_welcome w = fake_sim_welcome(1, 3);
	size_t bytes = fake_sim_global_bytes();
	uint8_t *g = calloc(1, bytes);
	struct pn_sim_global *gh = (struct pn_sim_global *)g;

	fake_sim_global(gh);
	put8(&x, sizeof(w)), put(&x, &w, sizeof(w)), put(&x, g, bytes);
	save("sim_welcome", "welcome", &x);
	x.n = 0;
	gh->clk_hz = 0;   /* pn_now_ns divided by it: SIGFPE */
	put8(&x, sizeof(w)), put(&x, &w, sizeof(w)), put(&x, g, bytes);
	save_crash("sim_welcome", "clk0", &x);
	x.n = 0;
	gh->clk_hz = PN_TARGET_CLK_HZ;
	gh->trace_off = 0x7ffff000u;   /* pn_sim_trace read there: SIGSEGV */
	put8(&x, sizeof(w)), put(&x, &w, sizeof(w)), put(&x, g, bytes);
	save_crash("sim_welcome", "trace-off", &x);
	x.n = 0;
	gh->trace_off = PN_SIM_TRACE_OFF;
	gh->trace_stride = 64u << 10;   /* traces past the end of the memory: SIGBUS */
	put8(&x, sizeof(w)), put(&x, &w, sizeof(w)), put(&x, g, bytes);
	save_crash("sim_welcome", "trace-stride", &x);
	x.n = 0;
	w.status = -EBUSY;
	put8(&x, sizeof(w)), put(&x, &w, sizeof(w));
	save("sim_welcome", "refused", &x);
	free(g);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	root = argv[1];
	gen_rx_ring();
	gen_ports();
	gen_am();
	gen_sock();
	gen_daemon();
	gen_sim_hello();
	gen_sim_welcome();
	return 0;
}
