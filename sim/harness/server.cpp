/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the server's socket and global shared memory, the clock (one cycle of
 * every node and its host), the run loop (full speed, slow idle ticks, stopped), and
 * stop. See docs/simulator.md.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "Vcluster.h"
#include "evalpool.h"
#include "harness.h"

EvalPool *sim_eval_pool = nullptr;

static double wall_s()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

Harness::Harness(const Config &c) : cfg(c) {}

void Harness::setup_shm()
{
	shm_bytes = status_off() + (size_t)SIM_NODES * sizeof(pn_sim_node_status);
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
	g->status_off = (uint32_t)status_off();
	g->status_stride = sizeof(pn_sim_node_status);
	g->status_period = cfg.status_period;
	g->mmio_write_cycles = cfg.c_mmio_w;
	g->mmio_read_cycles = cfg.c_mmio_r;
	g->dma_read_cycles = cfg.c_dma_r;
	g->dma_write_cycles = cfg.c_dma_w;
	g->pid = (uint32_t)getpid();
	__atomic_store_n(&g->magic, PN_SIM_MAGIC_GLOBAL, __ATOMIC_RELEASE);
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
	/* The socket is 0600 whatever the umask: other users cannot connect (and
	 * accept_clients refuses any that could, by SO_PEERCRED). */
	mode_t old = umask(077);
	int bound = listen_fd >= 0 ? bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) : -1;
	umask(old);
	if (listen_fd < 0 || bound < 0 || listen(listen_fd, 64) < 0) {
		sim_log("cannot listen on %s: %s", cfg.socket.c_str(), strerror(errno));
		exit(1);
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
	if (!replies.empty() || job_pending || !ctx_waiting.empty() || faults_pending())
		return true;
	for (const Host *h : hosts)
		if (h->busy())
			return true;
	if (coll_busy())
		return true;
	for (const Client *c : clients)
		if (c->st == CState::Teardown || c->st == CState::Config)
			return true;
	return false;
}

/* ---- the clock ------------------------------------------------------------------------------- */

void Harness::step()
{
	step_begin();
	step_cycle();
}

void Harness::step_begin()
{
	if (cycle >= pause_at)
		pause_wait();   /* a client has not looked at what it was shown (pause.cpp) */
	faults_tick();
	pull_queues();
}

void Harness::step_cycle()
{
	for (Host *h : hosts)
		h->pre(cycle);
	coll_pre();
	m->sys_clk = 0;
	m->eval();
	for (Host *h : hosts)
		h->post(cycle);
	coll_post();
	m->sys_clk = 1;
	m->eval();
	cycle++;
	/* Link work on a cable (frames, replays, training) is activity: a link replaying
	 * under bit errors must not be left to crawl at the idle tick rate. */
	if (m->links_busy && cfg.link_activity)
		last_activity = cycle;
	step_end();
}

void Harness::step_end()
{
	__atomic_store_n(&g->cycle, cycle, __ATOMIC_RELEASE);
	if (cycle >= status_due)
		status_tick();
	publish_replies();
}

void Harness::publish_replies()
{
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
				owe(r.cl);   /* it waits for the answer */
			}
			replies[i] = replies.back();
			replies.pop_back();
		}
	}
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
#ifndef SIM_SPLIT
	if (cfg.threads > 1) {
		sim_log("--threads %u needs a split build (one model per node: paranic.sim.build.build(split=True))",
			cfg.threads);
		return 2;
	}
	if (cfg.window) {
		sim_log("--window needs a split build (one model per node: paranic.sim.build.build(split=True))");
		return 2;
	}
#endif
	setup_socket();   /* first: refuses to start when another simulator listens there */
	setup_shm();
	VerilatedContext *vctx = new VerilatedContext;
#ifdef SIM_SOC
	/* The nodes' ROM loads the firmware image named by a plusarg (hw/socnode.py). */
	std::string rom_arg = std::string("+" SIM_ROM_PLUSARG "=") +
			      (cfg.firmware.empty() ? SIM_ROM_DEFAULT : cfg.firmware.c_str());
	const char *vargs[] = {"paranic-sim", rom_arg.c_str()};
	vctx->commandArgs(2, vargs);
#endif
	m = new Vcluster{vctx};
	if (cfg.threads > 1 && !cfg.window) {   /* windows have threads of their own (window.cpp) */
		sim_eval_pool = new EvalPool((int)cfg.threads);
		sim_log("%u threads evaluate the %d node models", cfg.threads, SIM_NODES);
	}
	if (cfg.window) {
		/* A window may not outrun the cable (the lookahead), a DMA write's latency (a
		 * write queued in it must become visible after it) nor an MMIO load's (a load
		 * taken in it is answered after it): window.cpp. */
		uint32_t w = cfg.window;
		w = std::min<uint32_t>(w, SIM_PHY_DELAY);
		w = std::min<uint32_t>(w, std::max<uint32_t>(cfg.c_dma_w, 1));
		w = std::min<uint32_t>(w, std::max<uint32_t>(cfg.c_mmio_r, 1));
		if (w != cfg.window)
			sim_log("window of %u cycles shortened to %u (cable %u cycles, DMA write %u, MMIO load %u)",
				cfg.window, w, (unsigned)SIM_PHY_DELAY, cfg.c_dma_w, cfg.c_mmio_r);
		cfg.window = w;
		window_start();
		sim_log("lock-step windows of at most %u cycles on %u thread%s", w, cfg.threads, cfg.threads > 1 ? "s" : "");
	}
	NodePorts ports[SIM_NODES] = {};
	sim_bind_ports(m, ports);
	for (int n = 0; n < SIM_NODES; n++) {
		hosts.push_back(new Host(this, n, ports[n]));
		coll_attach(ports[n]);
		*ports[n].rd_ready = 1;   /* requests are always taken (queued) */
		*ports[n].w_ready = 1;    /* writes are posted */
	}
	m->ber_threshold = cfg.ber_threshold;
#ifdef SIM_SOC
	/* Identity inputs, set before reset is released. */
	for (int n = 0; n < SIM_NODES; n++) {
		*ports[n].dna = cfg.dna_set[n] ? cfg.dna[n] : SIM_DNA_DEFAULT[n];
		*ports[n].cfg_node = cfg.cfg_id[n] >= 0 ? (uint16_t)(0x8000u | (unsigned)cfg.cfg_id[n]) : 0;
		sim_log("node index %d: dna 0x%016llx, %s%d", n, (unsigned long long)*ports[n].dna,
			cfg.cfg_id[n] >= 0 ? "configured id " : "no configured id", cfg.cfg_id[n] >= 0 ? cfg.cfg_id[n] : 0);
	}
#endif
	faults_init();   /* per-cable thresholds and cuts (faults.cpp) */
	m->sys_rst = 1;
	for (int i = 0; i < 8; i++) {
		m->sys_clk = 0;
		m->eval();
		m->sys_clk = 1;
		m->eval();
	}
	m->sys_rst = 0;
	reset_cycle = cycle;
	bring_up();
	status_start();

	double t0 = wall_s(), next_stats = t0 + cfg.stats_s;
	uint64_t idle_ticks = 0;
	while (!stop) {
		bool attached = g->clients > 0;
		bool busy = anything_in_flight();
		if (cfg.free_run) {
			for (uint64_t end = cycle + 256; cycle < end;)
				advance(end);
			ctx_tick();
			poll_sockets(0);
		} else if (links_up && !busy && !attached) {
			idle_sockets(200);   /* nobody attached: the clock stands still */
		} else if (links_up && attached && !busy && cycle - last_activity > cfg.idle_cycles) {
			/* Nothing in flight for a while: tick slowly until a client wakes us. */
			__atomic_store_n(&g->sleeping, 1, __ATOMIC_SEQ_CST);
			bool pending = false;
			for (Client *cl : clients)
				if (cl->st == CState::Active &&
				    __atomic_load_n(&cl->ctl->q_head, __ATOMIC_SEQ_CST) != cl->q_tail)
					pending = true;
			if (!pending)
				idle_sockets((int)(cfg.idle_tick_us / 1000) ? (int)(cfg.idle_tick_us / 1000) : 1);
			__atomic_store_n(&g->sleeping, 0, __ATOMIC_SEQ_CST);
			idle_ticks++;
			for (uint32_t i = 0; i < cfg.idle_burst && !stop; i++)
				step();
			poll_sockets(0);
		} else {
			for (uint64_t end = cycle + 256; cycle < end;) {
				advance(end);
				if (coll_busy())
					last_activity = cycle;
				for (Host *h : hosts)
					if (h->busy()) {
						last_activity = cycle;
						break;
					}
			}
			ctx_tick();
			poll_sockets(0);
		}
		work_tick();
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
#ifdef SIM_SPLIT
	sim_log("cable words fingerprint %016llx", (unsigned long long)m->fingerprint());
#endif
	if (cfg.window) {
		sim_log("windows of at most %u cycles: %llu windows, %llu cycles in them; %llu nodes' windows run by "
			"another thread than their own, %llu wake-ups from sleep", cfg.window, (unsigned long long)windows,
			(unsigned long long)window_cycles, (unsigned long long)win_stolen.load(),
			(unsigned long long)win_wakeups.load());
		window_stop();
	}
	if (sim_eval_pool)
		sim_log("worker threads: %d, %llu parallel evaluations, %llu wake-ups from sleep",
			sim_eval_pool->threads(), (unsigned long long)sim_eval_pool->runs,
			(unsigned long long)sim_eval_pool->wakeups.load());
	delete sim_eval_pool;
	sim_eval_pool = nullptr;
	m->final();
	cleanup();
	delete m;
	delete vctx;
	return exit_status ? exit_status : (errors ? 3 : 0);
}
