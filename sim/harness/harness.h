/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the C++ harness around the Verilated ParaNIC cluster.
 *
 * Each node of the model gets a Host (host.cpp): a Wishbone master that applies MMIO
 * (the clients' doorbells and PIO stores, the harness's own CSR "driver" accesses)
 * after a PCIe write latency, a DMA read server (completions in request order after
 * the read latency, split at RCB boundaries, one 64-bit beat per cycle) and a DMA
 * write server (posted writes become visible after the write latency). Host memory
 * is the shared memory of the attached clients (server.cpp); every DMA outside the
 * regions a client gave for the NIC to read or write is refused and logged.
 * See docs/simulator.md.
 */
#pragma once

#include <verilated.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cluster_gen.h"
#include "pn_csr.h"
#include "pn_sim_shm.h"
#include "pn_sim_proto.h"
#include "paranic/pn_ctxseq.h"
#include "paranic/pn_protocol.h"

/* The host bus's data word: SIM_BUS_BYTES (cluster_gen.h) 8 for a NicCore cluster (a
 * 64-bit store is one beat), 4 for a SoC cluster (its BAR0 window is 32-bit). */
#if SIM_BUS_BYTES == 8
typedef QData BusData;
#else
typedef IData BusData;
#endif

/* Pointers to one node's top-level ports of the Verilated model (cluster_gen.cpp). */
/* The collective kernel's ports of one node (NicCore clusters, SIM_COLL): the NIC drives
 * host_in/net_in (valid, data) and takes host_out/net_out (ready); the harness runs the
 * kernel (coll.cpp) on the other ends. */
struct CollPorts {
	CData *host_in_valid, *host_in_ready, *host_out_valid, *host_out_ready;
	CData *net_in_valid, *net_in_ready, *net_out_valid, *net_out_ready;
	QData *host_in_data, *host_out_data, *net_in_data, *net_out_data;
	SData *node;
	CData *radix_log2, *rst;
};

struct NodePorts {
	IData *bus_adr;
	BusData *bus_dat_w, *bus_dat_r;
	CData *bus_sel, *bus_cyc, *bus_stb, *bus_we, *bus_ack;
	CData *rd_valid, *rd_ready, *rd_we;
	QData *rd_adr;
	SData *rd_len;
	CData *c_valid, *c_ready, *c_first, *c_last;
	QData *c_dat;
	SData *c_len;
	CData *c_end, *c_err;
	IData *c_adr;
	CData *w_valid, *w_ready, *w_first, *w_last, *w_we;
	QData *w_adr;
	SData *w_len;
	QData *w_dat;
	QData *dna;        /* SoC cluster only: identity inputs (NULL otherwise) */
	SData *cfg_node;
	CollPorts k;       /* SIM_COLL only (NULL otherwise) */
};

class CollNode;   /* coll.cpp: one node's collective kernel */

/* A cable fault (faults.cpp): at cycle `at`, cable `cable` is cut, mended or gets the
 * error threshold `value` (op: enum pn_sim_fault_op). */
struct FaultEvent {
	uint64_t at;
	int op;
	int cable;
	uint32_t value;
};

/* Command-line configuration. Latencies in ns are converted to cycles of
 * PN_TARGET_CLK_HZ (125 MHz: 8 ns per cycle). */
struct Config {
	std::string socket;
	std::string ready_file;
	std::string shm_path;
	std::string log_file;
	/* Latencies: main() sets them from the --model corner (paranic.spec.sim.LATENCY_MODELS,
	 * PN_SIM_LATENCY_MODELS) unless an option gives one. */
	std::string model = PN_SIM_DEFAULT_MODEL;
	double mmio_write_ns = 0;     /* CPU store -> applied on the device's bus */
	double mmio_read_ns = 0;      /* CPU load -> value back in the CPU (round trip) */
	double dma_read_ns = 0;       /* DMA read request -> first completion beat */
	double dma_write_ns = 0;      /* DMA write request's last beat -> in the host's memory system */
	double poll_miss_ns = 0;      /* ... -> the polling CPU has the line (its cache miss) */
	double model_cable_ns = 0;    /* the model's cable (the built one is SIM_PHY_DELAY cycles) */
	uint32_t ber_threshold = 0;   /* every cable: P(bit flipped in a line word) * 2^32 */
	uint32_t rcb = 64;            /* read completion boundary */
	uint32_t max_read = 512;      /* max read request size */
	uint32_t max_payload = 256;   /* max write payload */
	uint32_t radix_log2 = 2;      /* barrier tree fan-out 2^radix_log2 */
	uint32_t barrier_a2a_max = 32; /* jobs of at most this many nodes: all-to-all barrier */
	uint64_t idle_cycles = 20000; /* nothing in flight this long: throttle */
	uint32_t idle_burst = 100;    /* cycles run per idle tick */
	uint32_t idle_tick_us = 20000; /* idle tick */
	uint64_t max_cycles = 0;      /* stop after this many cycles (0: never) */
	int verbose = 0;
	double stats_s = 0;           /* print a statistics line every stats_s seconds */
	bool free_run = false;        /* never throttle (speed measurements) */
	uint32_t threads = 1;         /* threads evaluating the node models (split builds) */
	uint32_t window = 0;          /* lock-step windows of at most this many cycles (0: none) */
	bool link_activity = true;    /* links_busy (link work on a cable) counts as activity */
	/* SoC cluster (firmware mode): ROM image, identity inputs per node index, and how
	 * long the firmware may take to bring the cluster up. */
	std::string firmware;             /* ROM init file (firmware.init); default: SIM_ROM_DEFAULT */
	uint64_t dna[SIM_NODES] = {};     /* unless dna_set: SIM_DNA_DEFAULT (cluster_gen.h) */
	bool dna_set[SIM_NODES] = {};
	int cfg_id[SIM_NODES];            /* -1: no configured id */
	uint64_t bringup_timeout = 50000000; /* cycles */
	Config() { for (int &c : cfg_id) c = -1; }
	std::vector<FaultEvent> faults;   /* --cut, --mend, --ber-cable */
	uint32_t status_period = 16384; /* cycles between status snapshots of a node (0: none) */
	/* The pause (pause.cpp): the clock runs at most pause_grace cycles past something made
	 * visible to a polling client until its poll counter moved, and waits at most
	 * pause_cap_ms of wall time for it (0: never pause). */
	uint32_t pause_grace = 8;
	double pause_cap_ms = 20;

	uint32_t c_mmio_w = 0, c_mmio_r = 0, c_dma_r = 0, c_dma_w = 0;
	/* c_dma_w = c_dma_w_pcie + c_poll_miss: a DMA write is visible to the client (and in
	 * the trace records) when the polling CPU would have the line. */
	uint32_t c_dma_w_pcie = 0, c_poll_miss = 0, c_model_cable = 0;
};

struct Client;
class Harness;

/* A Wishbone access of a script or of a client operation. */
struct WbStep {
	uint32_t adr;   /* byte address (4-aligned; 8-aligned for an 8-byte store) */
	uint64_t dat;
	uint8_t we;
	uint8_t bytes = 4;   /* 4, or 8: a 64-bit store in one beat (SIM_BUS_BYTES 8 only) */
};

/* A privileged access sequence run atomically on one node's bus (the harness's
 * "driver"): CSR writes and reads, then `done` with the values read. */
struct Script {
	std::vector<WbStep> steps;
	std::vector<uint32_t> reads;
	std::function<void(Script &)> done;
	std::function<void(Script &)> build;   /* optional: fill `steps` when it starts */
	bool background = false;   /* the status snapshot's reads: never keep the clock busy */

	void csr_write(uint32_t addr, unsigned bits, uint64_t value);
	void csr_read(uint32_t addr);   /* one 32-bit word */
};

/* One entry of a node's MMIO queue (due-ordered). */
struct MmioItem {
	uint64_t due;
	uint64_t obs;        /* the cycle the harness took it from the client's queue */
	uint32_t kind;       /* PN_SIM_OP_*, or 0 for a script */
	uint32_t off;
	uint64_t value;
	Client *cl;          /* NULL for scripts */
	uint64_t cl_gen;     /* the client's attach generation when queued */
	Script *script;
};

struct RdJob {
	uint64_t due, adr;
	uint32_t nbytes;
	bool ok;
};

struct Beat {
	uint64_t dat;
	uint32_t adr;
	uint16_t len;
	uint8_t first, last, end, err;
};

struct PendWrite {
	uint64_t due, adr;
	std::vector<uint8_t> data;
};

class alignas(64) Host {   /* its node's thread writes it every cycle (windows) */
public:
	Host(Harness *h, int node, const NodePorts &p) : H(h), node(node), p(p) {}

	/* Drive the node's inputs for this cycle (before the falling-edge eval). */
	void pre(uint64_t cycle);
	/* Sample the handshakes that the coming rising edge completes. */
	void post(uint64_t cycle);
	/* Anything queued or in flight? */
	bool busy() const;
	void push_script(Script *s, uint64_t due);
	void push_client_op(const MmioItem &it)
	{
		mq.push_back(it);
		reads_queued += is_read(it.kind);
	}
	/* Windows (window.cpp): a script queued or running (its callbacks are the harness's
	 * code: run cycle by cycle), and the last cycle a window may end at, given what this
	 * host will make visible to a client at a cycle known now. */
	bool has_script() const;
	uint64_t window_bound() const;
	size_t queued() const { return mq.size(); }

	Harness *H;
	int node;
	NodePorts p;
	uint64_t reads = 0, writes = 0, read_bytes = 0, write_bytes = 0, wb_ops = 0;

private:
	static bool is_read(uint32_t kind) { return kind == PN_SIM_OP_R32 || kind == PN_SIM_OP_RCSR; }
	uint32_t reads_queued = 0;   /* client loads in mq */
	uint32_t scripts_queued = 0; /* scripts in mq */
	void start_item(uint64_t cycle);
	void finish_item(uint64_t cycle);
	void drive_wb();
	void rd_request(uint64_t cycle);
	void make_beats(const RdJob &j);
	void wr_beat(uint64_t cycle);
	void apply_writes(uint64_t cycle);

	std::deque<MmioItem> mq;
	bool item_active = false;
	MmioItem cur{};
	WbStep csteps[2];
	const WbStep *steps = nullptr;
	size_t nsteps = 0, step_i = 0;
	uint32_t rvals[2];

	std::deque<RdJob> rj;
	std::vector<Beat> beats;
	size_t beat_i = 0;
	bool c_driving = false;

	bool w_active = false;
	uint64_t w_adr = 0;
	uint32_t w_bytes = 0;
	std::vector<uint8_t> w_data;
	std::deque<PendWrite> pw;
};

/* --cut K@CYCLE, --mend K@CYCLE, --ber-cable K=THRESH (opt without the dashes) into c;
 * false with a message in err for a bad value (faults.cpp). */
bool fault_option(Config &c, const char *opt, const char *arg, std::string &err);

/* Log (stderr and --log file). */
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_open_log(const char *path);
extern int sim_verbose;
/* Routing decisions made by the route kernel's C++ through DPI-C (route_dpi.cpp). */
uint64_t sim_route_dpi_calls();

/* The worker threads of a split cluster's node models (evalpool.h), or none: the
 * models are evaluated one after the other on the harness's thread. */
class EvalPool;
extern EvalPool *sim_eval_pool;

/* A 64-bit store into shared memory a client polls. */
static inline void store64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* ---- clients and the harness ------------------------------------------------------------ */

enum class CState {
	Hello,     /* connected, hello not yet received */
	Waiting,   /* hello accepted, waiting for its context (teardown) or the job set-up */
	Config,    /* its context is being configured */
	Active,    /* attached: its queue is served */
	Teardown,  /* gone: context being disabled, memory still mapped */
	Freed,
};

struct Client {
	uint64_t id = 0;
	uint64_t gen = 0;           /* attach generation (stale queue items are dropped) */
	int fd = -1;                /* socket; -1 once closed */
	int memfd = -1;
	uint8_t *mem = nullptr;
	uint64_t mem_bytes = 0;
	pn_sim_hello hello{};
	pn_sim_ctl *ctl = nullptr;
	pn_sim_op *queue = nullptr;
	uint32_t qmask = 0;
	uint64_t q_tail = 0;
	int node = -1, ctx = -1, want_ctx = -1;
	int pid = 0;
	CState st = CState::Hello;
	uint64_t rx_bytes = 0, tx_bytes = 0;
	uint32_t rx_slots = 0, slot_bytes = 0;
	uint64_t window = 0;        /* DMA window size (bytes from the heap base) */
	bool pio_started = false;
	uint32_t last_barrier_done = 0;
	uint64_t td_start = 0;      /* the cycle it hung up */
	int td_left = 0;            /* a device's contexts still being closed */
	bool td_forced = false;     /* a device's context was reset while busy */
	pn_sim_trace *trace = nullptr;
	uint64_t ops = 0;
	/* A device client (PN_SIM_HELLO_DEVICE: a QEMU guest's PCI function) holds the whole
	 * node: its queue addresses BAR0 and the node's DMA goes to the guest's RAM. */
	bool device = false;
	int ramfd = -1;
	uint8_t *ram = nullptr;
	uint64_t ram_bytes = 0;
	pn_sim_trace dev_trace{};   /* its (unpublished) trace record */
	/* The pause (pause.cpp): the cycle something became visible that the client has not
	 * looked at yet (UINT64_MAX: nothing), and its poll counter and queue head then; its
	 * poll counter when the wall-clock cap last ended a pause for it (a client is waited
	 * for only while its counter differs: it polls). */
	uint64_t owed_cycle = UINT64_MAX, owed_polls = 0, owed_qhead = 0;
	uint64_t polls_capped = 0;
	bool win_held = false;   /* window.cpp: its queue waits for the window's end */
};

/* The welcome's fields every client gets; sending it with an fd (clients.cpp). */
pn_sim_welcome welcome_base();
int send_welcome(int fd, const pn_sim_welcome &w, int pass_fd);

/* One run of a context sequence (paranic/pn_ctxseq.h) on a node's bus (contexts.cpp). */
struct CtxRun {
	pn_ctxseq seq;
	int node = -1;
	uint64_t start = 0;           /* the cycle it began */
	uint64_t wait_until = 0;      /* after SETTLE: when it goes on */
	uint32_t read = 0;            /* the value the last READ gave */
	pn_ctxop op{};                /* what ended the script built last */
	bool abandoned = false;
	std::function<bool()> live;   /* optional: false leaves the context alone (its owner left) */
	std::function<bool(uint32_t state)> give_up;   /* busy: true resets it anyway */
	std::function<void(int status)> done;
};

class Vcluster;

/* An MMIO load's answer, published to its client at cycle `due`. */
struct Reply {
	uint64_t due;
	Client *cl;
	uint64_t gen, seq, value;
};

/* One thread's share of a lock-step window (window.cpp): its current cycle, and what its
 * nodes' host work produced for the harness's thread to take at the window's end. */
struct alignas(64) Lane {   /* a cache line of its own: its thread writes it every cycle */
	uint64_t cycle = 0;
	uint64_t pause_at = UINT64_MAX;
	uint64_t link_activity = 0;   /* the cycle after the last one with a link active */
	uint64_t activity = 0;        /* the last cycle a client's queue entry was taken */
	std::vector<Reply> replies;
};
/* The lane the calling thread runs (NULL: the harness's thread outside a window). */
extern thread_local Lane *sim_lane;

class Harness {
public:
	explicit Harness(const Config &c);
	int run();
	void request_stop() { stop = 1; }

	/* Host memory for a DMA of n bytes at adr on node: NULL when refused. */
	uint8_t *dma_ptr(int node, uint64_t adr, uint32_t n, bool write, Client **owner);
	void dma_refused(int node, const char *what, uint64_t adr, uint32_t n);
	void dma_written(int node, Client *cl, uint64_t adr, uint32_t n, const uint8_t *data);
	void protocol_error(int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
	void client_error(Client *cl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
	void op_done(int node, const MmioItem &it, const uint32_t *vals, uint64_t cycle);
	bool item_live(const MmioItem &it) const;

	Config cfg;
	uint64_t cycle = 0;
	/* The cycle the calling thread's host work is in: its lane's within a window. */
	uint64_t now() const { return sim_lane ? sim_lane->cycle : cycle; }
	pn_sim_global *g = nullptr;
	uint64_t errors = 0;          /* PCIe rules broken by the NIC */
	uint64_t client_errors = 0;   /* bad queue entries from clients */

private:
	/* server.cpp: socket, shared memory, clock, run loop */
	void setup_shm();
	void setup_socket();
	void poll_sockets(int timeout_ms);
	void idle_sockets(int timeout_ms);   /* poll_sockets, the wait counted as idle (pause.cpp) */
	void step();
	void step_begin();   /* the pause, faults, clients' queues: before a cycle */
	void step_cycle();   /* one cycle of every node and host */
	void step_end();     /* the clock published, status refresh, replies due */
	void publish_replies();
	/* window.cpp: lock-step windows of cfg.window cycles (split builds) */
	void advance(uint64_t limit);   /* a window (or one cycle) ending at most at limit */
	uint64_t window_len(uint64_t limit);
	void window_run(uint64_t w);
	void window_start();   /* the lanes and their threads (all but lane 0's: the caller's) */
	void window_stop();
	void lane_worker(int t);
	void lane_run(int t, uint64_t id);
	void node_window(Lane &L, int n);
	std::vector<Lane> lanes;
	std::vector<std::thread> lane_threads;
	std::vector<Client *> win_clients[SIM_NODES];   /* a window's active clients per node */
	/* Window `win_id`: node n is run by the lane that moves win_taken[n] from id - 1 to
	 * id; win_done counts the nodes run (all windows), win_seq wakes sleeping workers. */
	std::atomic<uint64_t> win_id{0};
	std::atomic<uint64_t> win_taken[SIM_NODES] = {};
	std::atomic<uint32_t> win_done{0}, win_seq{0}, win_caller_sleeps{0}, win_sleepers{0};
	std::atomic<bool> win_quit{false};
	std::atomic<uint64_t> win_stolen{0}, win_wakeups{0};
	uint64_t win_c0 = 0, win_w = 0, win_e0 = 0;
	uint64_t windows = 0, window_cycles = 0;   /* statistics */
	bool anything_in_flight() const;
	void cleanup();
	/* nodes.cpp: bring-up, links, jobs */
	void bring_up();
	void link_poll(int node, uint64_t due);
	void start_job(int nodes);
	void fw_poll(int node, uint64_t due);
	void fw_routed();
	void barrier_setup(int node);
	uint32_t barrier_mode(int nodes) const;
	/* status.cpp: the status snapshot in the global shm */
	static size_t status_off();
	pn_sim_node_status *status_rec(int n);
	void status_start();
	void status_tick();
	void status_poll(int n);
	void status_publish(int n, const std::vector<uint32_t> &vals);
	/* clients.cpp: the client protocol */
	void accept_clients();
	void on_readable(Client *cl);
	void on_hello(Client *cl, const pn_sim_hello &h, int memfd);
	bool take_queue(Client *cl, uint64_t end);
	void reject(Client *cl, int err);
	void send_attached(Client *cl, pn_sim_welcome &w);
	void try_attach(Client *cl);
	void welcome(Client *cl);
	void hangup(Client *cl);
	void free_client(Client *cl);
	/* queues.cpp: clients' MMIO queues */
	void pull_queues();
	bool pull_client(Client *cl);
	/* device.cpp: device clients */
	void on_device_hello(Client *cl, const pn_sim_hello &h, int ramfd);
	void device_welcome(Client *cl);
	void device_teardown(Client *cl);
	/* contexts.cpp: context sequences on a node's bus; a client's context */
	CtxRun *ctx_new(int node, pn_ctxseq_kind kind, const pn_ctxseq_cfg &c);
	void ctx_push(CtxRun *r, uint64_t due);
	void ctx_build(CtxRun *r, Script &sc);
	void ctx_after(CtxRun *r, Script &sc);
	void ctx_tick();   /* runs whose SETTLE wait is over go on */
	bool ctx_overdue(const CtxRun *r) const;
	std::function<bool(uint32_t)> ctx_give_up_when_overdue(CtxRun *r);
	pn_ctxseq_cfg ctx_cfg(const Client *cl) const;
	void configure(Client *cl);
	void teardown(Client *cl);
	void set_window(Client *cl, uint64_t bytes);
	/* faults.cpp: cable cuts and error thresholds, scheduled and requested */
	void faults_init();
	void faults_tick();
	bool faults_pending() const;
	void fault_apply(const FaultEvent &e);
	void on_fault_request(Client *cl, const pn_sim_fault &f);
	bool cable_cut_at(int node, int port) const;
	/* pause.cpp: the clock waits for clients to look */
	void owe(Client *cl);
	bool pause_scan();
	void pause_wait();
	void work_tick();
	/* report.cpp */
	void write_ready();
	void print_stats(double wall);

	Vcluster *m = nullptr;
	std::vector<Host *> hosts;
	std::vector<CollNode *> colls;   /* per node, SIM_COLL only (coll.cpp) */
	void coll_pre();
	void coll_post();
	void coll_node(int n, bool post, uint64_t cyc);   /* one node's kernel (windows) */
	bool coll_busy() const;
	void coll_attach(const NodePorts &p);
	/* The collective units: enabled at bring-up, freed when their owner detaches (coll.cpp). */
	void coll_init(Script *s);
	void coll_release(const Client *cl);
	std::vector<Client *> clients;
	Client *owner[SIM_NODES][SIM_N_CTX] = {};
	Client *dev_owner[SIM_NODES] = {};   /* a device client holds the node */
	uint64_t dev_gen = 0;
	std::vector<Reply> replies;
	int listen_fd = -1;
	int shm_fd = -1;
	size_t shm_bytes = 0;
	uint64_t next_client_id = 1;
	volatile int stop = 0;
	bool links_up = false;
	/* Node ids: node_id[index] (read from each node's `node` CSR in firmware mode, the
	 * index otherwise) and its inverse; clients attach by id. */
	int node_id[SIM_NODES];
	int node_index[SIM_NODES];
	int exit_status = 0;           /* set with stop: the bring-up failed */
	bool fw_ready = false;
	uint64_t reset_cycle = 0;      /* the cycle reset was released */
	uint64_t bringup_cycles = 0;   /* firmware mode: reset -> every node routed */
	int fw_done = 0;               /* nodes whose firmware reported ROUTED/DEGRADED */
	uint32_t fw_state_of[SIM_NODES] = {}, fw_fp_of[SIM_NODES] = {}, fw_node_of[SIM_NODES] = {};
	int nodes_up = 0;
	int job_nodes = 0;           /* 0: no job */
	int job_pending = 0;         /* scripts of a job set-up still running */
	int job_want = 0;
	uint64_t last_activity = 0;
	uint64_t ctx_gen[SIM_NODES][SIM_N_CTX] = {};
	std::vector<CtxRun *> ctx_waiting;   /* context runs in a SETTLE wait */
	uint8_t *cable_cut_p[SIM_CABLES] = {};
	uint32_t *cable_ber_p[SIM_CABLES] = {};
	std::vector<FaultEvent> fault_queue;   /* due-ordered */
	uint64_t fault_settle = 0;             /* run the clock until then (links react) */
	std::vector<uint64_t> status_next;   /* status.cpp: when node n's next refresh is due */
	std::vector<bool> status_pending;    /* ... and whether one is under way */
	uint64_t status_due = UINT64_MAX;    /* the earliest status_next not under way */
	uint64_t pause_at = UINT64_MAX;      /* pause.cpp: the earliest owed_cycle + grace */
	double pause_wall = 0;               /* seconds spent paused */
	uint64_t idle_ns = 0;                /* pause.cpp: wall time slept with nothing to do */
};
