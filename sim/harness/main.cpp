/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: command line, signals. See docs/simulator.md and `paranic-sim --help`.
 */
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <limits>
#include <type_traits>
#include <getopt.h>
#include <unistd.h>

#include "harness.h"

static Harness *the_harness;

/* The SoC cluster's options (getopt codes above main's own). */
enum { O_FW_ = 1000, O_DNA_, O_NODEID_, O_BUTO_ };

/* Every numeric option is parsed whole and checked: a finite number in range, or the
 * simulator refuses to start (exit 2) with the option's name. atof/atoi took "nan",
 * "1e999", "12abc" and "" without a word. */
static bool num_opt(const char *opt, const char *arg, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (!*arg || *end || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi) {
		fprintf(stderr, "paranic-sim: --%s %s: give a finite number in %g..%g\n", opt, arg, lo, hi);
		return false;
	}
	*out = v;
	return true;
}

/* An integer in lo..hi (decimal, 0x hex or 0 octal) into a field of type T. */
template <typename T> static bool uint_opt(const char *opt, const char *arg, uint64_t lo, uint64_t hi, T *out)
{
	static_assert(std::is_unsigned<T>::value, "an unsigned field");
	hi = std::min<uint64_t>(hi, std::numeric_limits<T>::max());
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 0);
	if (!*arg || *end || *arg == '-' || errno || v < lo || v > hi) {
		fprintf(stderr, "paranic-sim: --%s %s: give an integer in %llu..%llu\n", opt, arg,
			(unsigned long long)lo, (unsigned long long)hi);
		return false;
	}
	*out = (T)v;
	return true;
}

/* Latencies: up to a millisecond (the cycle counts must fit 32 bits at any clock). */
#define MAX_LATENCY_NS 1e6

/* The latency model's corners (paranic.spec.sim.LATENCY_MODELS, generated into
 * pn_sim_shm.h): --model sets every latency at once, a latency option overrides one. */
struct LatencyModel {
	const char *name;
	double mmio_write, mmio_read, dma_read, dma_write, poll_miss, cable;
};
static const LatencyModel latency_models[] = {
#define X(n, mw, mr, dr, dw, pm, cab) {#n, mw, mr, dr, dw, pm, cab},
	PN_SIM_LATENCY_MODELS(X)
#undef X
};

static const LatencyModel *find_model(const char *name)
{
	for (const LatencyModel &m : latency_models)
		if (!strcmp(m.name, name))
			return &m;
	std::string names;
	for (const LatencyModel &m : latency_models)
		names += std::string(names.empty() ? "" : ", ") + m.name;
	fprintf(stderr, "paranic-sim: --model %s: give one of %s\n", name, names.c_str());
	return nullptr;
}

static void on_signal(int)
{
	if (the_harness)
		the_harness->request_stop();
}

#ifdef SIM_SOC
/* "I=V": node index I (0 .. SIM_NODES-1) and an unsigned value up to max. */
static bool index_value(const char *opt, const char *arg, int *i, uint64_t *v, uint64_t max)
{
	char *end;
	errno = 0;
	long idx = strtol(arg, &end, 10);
	if (end == arg || *end != '=' || idx < 0 || idx >= SIM_NODES) {
		fprintf(stderr, "paranic-sim: --%s %s: give INDEX=VALUE with INDEX in 0..%d\n", opt, arg, SIM_NODES - 1);
		return false;
	}
	const char *val = end + 1;
	unsigned long long x = strtoull(val, &end, 0);
	if (errno || *end || !*val || x > max) {
		fprintf(stderr, "paranic-sim: --%s %s: the value must be an integer in 0..%llu\n", opt, arg,
			(unsigned long long)max);
		return false;
	}
	*i = (int)idx;
	*v = x;
	return true;
}

static bool soc_option(Config &c, int o, const char *arg)
{
	int i;
	uint64_t v;
	switch (o) {
	case O_FW_: {
		FILE *f = fopen(arg, "r");
		unsigned w;
		if (!f) {
			fprintf(stderr, "paranic-sim: --firmware %s: %s\n", arg, strerror(errno));
			return false;
		}
		unsigned long words = 0;
		int r;
		while ((r = fscanf(f, "%8x", &w)) == 1)
			words++;
		bool ok = r == EOF && words > 0;
		fclose(f);
		if (!ok) {
			fprintf(stderr, "paranic-sim: --firmware %s: not a ROM image (hex words, one per line: "
				"firmware.init from `make firmware`)\n", arg);
			return false;
		}
		if (words > SIM_ROM_WORDS) {
			fprintf(stderr, "paranic-sim: --firmware %s: %lu words, the ROM holds %d\n", arg, words,
				SIM_ROM_WORDS);
			return false;
		}
		c.firmware = arg;
		return true;
	}
	case O_DNA_:
		if (!index_value("dna", arg, &i, &v, ~0ull))
			return false;
		if (!v) {
			fprintf(stderr, "paranic-sim: --dna %s: 0 means \"no DNA\"; give a non-zero value\n", arg);
			return false;
		}
		c.dna[i] = v;
		c.dna_set[i] = true;
		return true;
	case O_NODEID_:
		if (!index_value("node-id", arg, &i, &v, 0xfff))
			return false;
		c.cfg_id[i] = (int)v;
		return true;
	default: {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(arg, &end, 0);
		if (errno || *end || !*arg || !x) {
			fprintf(stderr, "paranic-sim: --bringup-timeout takes a positive number of cycles\n");
			return false;
		}
		c.bringup_timeout = x;
		return true;
	}
	}
}
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: paranic-sim --socket PATH [options]\n"
		"The Verilator model of a ParaNIC cluster (" SIM_TOPO ", %d nodes, %d contexts, MTU %d) with\n"
		"each node's host: processes attach with libparanic's sim backend.\n"
		"  --socket PATH        UNIX socket clients attach to (default $PARANIC_SIM_SOCKET)\n"
		"  --ready-file PATH    written (JSON) when the links are up and the socket listens\n"
		"  --shm PATH           global shared memory: clock and trace records\n"
		"                       (default /dev/shm/paranic-sim-<pid>)\n"
		"  --log PATH           also append log lines to PATH\n"
		"  --model NAME         latency model corner: optimistic, realistic or pessimistic\n"
		"                       (default " PN_SIM_DEFAULT_MODEL "; docs/simulator.md \"Latency model\"); it\n"
		"                       sets the five latencies below, which override it one by one\n"
		"  --mmio-write-ns NS   CPU store to device bus (posted write)\n"
		"  --mmio-read-ns NS    CPU load round trip\n"
		"  --dma-read-ns NS     DMA read request to first completion\n"
		"  --dma-write-ns NS    DMA write's last beat to the host's memory system\n"
		"  --poll-miss-ns NS    then to the polling CPU's core (its cache miss on the line)\n"
		"                       (the cable is the build's: python -m paranic.sim --model/--cable-ns)\n"
		"  --ber-threshold N    every cable flips a bit of a line word with probability\n"
		"                       N / 2^32 (default 0; `python -m paranic.sim --ber RATE`\n"
		"                       converts a bit-error rate: paranic.spec.sim.ber_to_threshold)\n"
		"  --ber-cable K=N      cable K's threshold instead (repeatable; cables numbered as\n"
		"                       paranic.spec.topo.Topology.cables(), 0..%d here)\n"
		"  --cut K@CYCLE        pull cable K at CYCLE (repeatable: a schedule)\n"
		"  --mend K@CYCLE       plug cable K back in at CYCLE\n"
		"  --rcb BYTES          read completion boundary (default 64)\n"
		"  --max-read BYTES     largest DMA read request allowed (default 512)\n"
		"  --max-payload BYTES  largest DMA write allowed (default 256)\n"
		"  --radix-log2 K       barrier tree fan-out 2^K (default 2)\n"
		"  --barrier-a2a-max N  jobs of at most N nodes use the all-to-all barrier, larger\n"
		"                       ones the tree (default 32; 0: always the tree)\n"
		"  --idle-cycles N      nothing in flight for N cycles: tick slowly (default 20000)\n"
		"  --idle-burst N       cycles per slow tick (default 100)\n"
		"  --idle-tick-us US    slow tick period (default 20000)\n"
		"  --max-cycles N       stop after N cycles\n"
		"  --stats S            print a statistics line every S seconds\n"
		"  --free-run           run the clock at full speed even when idle (speed tests)\n"
		"  --threads N          evaluate the node models on N threads (split builds only;\n"
		"                       default 1; docs/simulator.md, \"Worker threads\")\n"
		"  --window W|auto      advance the nodes in lock-step windows of up to W cycles, each\n"
		"                       thread its nodes and their hosts (split builds only; auto: the\n"
		"                       cable's delay; 0: none, the default; docs/simulator.md, \"Windows\")\n"
		"  --pause-grace N      run the clock at most N cycles past something shown to a polling\n"
		"                       client until it has looked (default 8; docs/simulator.md)\n"
		"  --pause-cap-ms MS    ... waiting at most MS of wall time for it (default 20; 0: never pause)\n"
		"  --no-link-activity   link work on the cables does not count as activity (to measure\n"
		"                       what it buys; the clock then crawls while links replay)\n"
		"SoC clusters (firmware mode; docs/simulator.md):\n"
		"  --firmware PATH      ROM image (firmware.init: hex words) for every node\n"
		"                       (default: the build's placeholder, which does nothing)\n"
		"  --dna I=V            DNA of node index I (default: paranic.spec.sim.sim_dna(I))\n"
		"  --node-id I=ID       configured node id of node index I (default: none)\n"
		"  --bringup-timeout N  give up (exit 4) when the firmware has not routed the\n"
		"                       cluster after N cycles (default 50000000)\n"
		"  --status-period N    refresh each node's status snapshot (identity, fw_*, links;\n"
		"                       `paranic cluster status`) every N cycles (default 16384; 0: never)\n"
		"  -v, --verbose\n",
		SIM_NODES, SIM_N_CTX, SIM_MTU, SIM_CABLES - 1);
}

int main(int argc, char **argv)
{
	Config c;
	enum { O_READY = 256, O_SHM, O_LOG, O_MW, O_MR, O_DR, O_DW, O_BER, O_RCB, O_MAXR, O_MAXP, O_RADIX,
	       O_A2A, O_IDLE, O_BURST, O_TICK, O_MAXC, O_STATS, O_SOCK, O_FREE, O_FAULT, O_STATUS, O_NOLINK,
	       O_PGRACE, O_PCAP, O_MODEL, O_PM, O_THREADS, O_WINDOW };
	static const struct option opts[] = {
		{"socket", required_argument, nullptr, O_SOCK},
		{"ready-file", required_argument, nullptr, O_READY},
		{"shm", required_argument, nullptr, O_SHM},
		{"log", required_argument, nullptr, O_LOG},
		{"mmio-write-ns", required_argument, nullptr, O_MW},
		{"mmio-read-ns", required_argument, nullptr, O_MR},
		{"dma-read-ns", required_argument, nullptr, O_DR},
		{"dma-write-ns", required_argument, nullptr, O_DW},
		{"poll-miss-ns", required_argument, nullptr, O_PM},
		{"model", required_argument, nullptr, O_MODEL},
		{"ber-threshold", required_argument, nullptr, O_BER},
		{"rcb", required_argument, nullptr, O_RCB},
		{"max-read", required_argument, nullptr, O_MAXR},
		{"max-payload", required_argument, nullptr, O_MAXP},
		{"radix-log2", required_argument, nullptr, O_RADIX},
		{"barrier-a2a-max", required_argument, nullptr, O_A2A},
		{"idle-cycles", required_argument, nullptr, O_IDLE},
		{"idle-burst", required_argument, nullptr, O_BURST},
		{"idle-tick-us", required_argument, nullptr, O_TICK},
		{"max-cycles", required_argument, nullptr, O_MAXC},
		{"stats", required_argument, nullptr, O_STATS},
		{"free-run", no_argument, nullptr, O_FREE},
		{"no-link-activity", no_argument, nullptr, O_NOLINK},
		{"pause-grace", required_argument, nullptr, O_PGRACE},
		{"pause-cap-ms", required_argument, nullptr, O_PCAP},
		{"firmware", required_argument, nullptr, O_FW_},
		{"dna", required_argument, nullptr, O_DNA_},
		{"node-id", required_argument, nullptr, O_NODEID_},
		{"bringup-timeout", required_argument, nullptr, O_BUTO_},
		{"ber-cable", required_argument, nullptr, O_FAULT},
		{"cut", required_argument, nullptr, O_FAULT},
		{"mend", required_argument, nullptr, O_FAULT},
		{"status-period", required_argument, nullptr, O_STATUS},
		{"threads", required_argument, nullptr, O_THREADS},
		{"window", required_argument, nullptr, O_WINDOW},
		{"verbose", no_argument, nullptr, 'v'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	/* A latency option's value, or NaN: the model's. */
	const double unset = std::numeric_limits<double>::quiet_NaN();
	double mw = unset, mr = unset, dr = unset, dw = unset, pm = unset;
	int o, oi = -1;
	while ((o = getopt_long(argc, argv, "vh", opts, &oi)) != -1) {
		const char *name = oi >= 0 ? opts[oi].name : "";   /* a long option's name */
		bool ok = true;
		switch (o) {
		case O_FAULT: {
			std::string err;
			ok = fault_option(c, name, optarg, err);
			if (!ok)
				fprintf(stderr, "paranic-sim: %s\n", err.c_str());
			break;
		}
		case O_SOCK: c.socket = optarg; break;
		case O_READY: c.ready_file = optarg; break;
		case O_SHM: c.shm_path = optarg; break;
		case O_LOG: c.log_file = optarg; break;
		case O_MODEL: ok = find_model(optarg) != nullptr; c.model = optarg; break;
		case O_MW: ok = num_opt(name, optarg, 0, MAX_LATENCY_NS, &mw); break;
		case O_MR: ok = num_opt(name, optarg, 0, MAX_LATENCY_NS, &mr); break;
		case O_DR: ok = num_opt(name, optarg, 0, MAX_LATENCY_NS, &dr); break;
		case O_DW: ok = num_opt(name, optarg, 0, MAX_LATENCY_NS, &dw); break;
		case O_PM: ok = num_opt(name, optarg, 0, MAX_LATENCY_NS, &pm); break;
		case O_BER: ok = uint_opt(name, optarg, 0, UINT32_MAX, &c.ber_threshold); break;
		case O_RCB:
			ok = uint_opt(name, optarg, 8, 4096, &c.rcb);
			if (ok && (c.rcb & (c.rcb - 1))) {
				fprintf(stderr, "paranic-sim: --rcb %s: give a power of two\n", optarg);
				ok = false;
			}
			break;
		case O_MAXR: ok = uint_opt(name, optarg, 8, 4096, &c.max_read); break;
		case O_MAXP: ok = uint_opt(name, optarg, 8, 4096, &c.max_payload); break;
		case O_RADIX: ok = uint_opt(name, optarg, 0, 3, &c.radix_log2); break;
		case O_A2A: ok = uint_opt(name, optarg, 0, UINT32_MAX, &c.barrier_a2a_max); break;
		case O_IDLE: ok = uint_opt(name, optarg, 0, UINT64_MAX, &c.idle_cycles); break;
		case O_BURST: ok = uint_opt(name, optarg, 1, 1000000000, &c.idle_burst); break;
		case O_TICK: ok = uint_opt(name, optarg, 0, 10000000, &c.idle_tick_us); break;
		case O_MAXC: ok = uint_opt(name, optarg, 0, UINT64_MAX, &c.max_cycles); break;
		case O_STATS: ok = num_opt(name, optarg, 0, 86400, &c.stats_s); break;
		case O_STATUS: ok = uint_opt(name, optarg, 0, UINT32_MAX, &c.status_period); break;
		case O_FREE: c.free_run = true; break;
		case O_THREADS: ok = uint_opt(name, optarg, 1, SIM_NODES, &c.threads); break;
		case O_WINDOW:
			if (!strcmp(optarg, "auto"))
				c.window = SIM_PHY_DELAY;
			else
				ok = uint_opt(name, optarg, 0, 1000000, &c.window);
			break;
		case O_NOLINK: c.link_activity = false; break;
		case O_PGRACE: ok = uint_opt(name, optarg, 0, 1000000, &c.pause_grace); break;
		case O_PCAP: ok = num_opt(name, optarg, 0, 10000, &c.pause_cap_ms); break;
		case O_FW_:
		case O_DNA_:
		case O_NODEID_:
		case O_BUTO_:
#ifndef SIM_SOC
			fprintf(stderr, "paranic-sim: --%s: this simulator is a NicCore cluster, not a SoC cluster "
				"(build it with `python -m paranic.sim --soc`)\n", name);
			return 2;
#else
			ok = soc_option(c, o, optarg);
			break;
#endif
		case 'v': sim_verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (!ok)
			return 2;
	}
	if (c.socket.empty() && getenv("PARANIC_SIM_SOCKET"))
		c.socket = getenv("PARANIC_SIM_SOCKET");
	if (c.socket.empty() || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (c.shm_path.empty())
		c.shm_path = "/dev/shm/paranic-sim-" + std::to_string(getpid());
	const LatencyModel *m = find_model(c.model.c_str());
	if (!m)
		return 2;
	c.mmio_write_ns = std::isnan(mw) ? m->mmio_write : mw;
	c.mmio_read_ns = std::isnan(mr) ? m->mmio_read : mr;
	c.dma_read_ns = std::isnan(dr) ? m->dma_read : dr;
	c.dma_write_ns = std::isnan(dw) ? m->dma_write : dw;
	c.poll_miss_ns = std::isnan(pm) ? m->poll_miss : pm;
	c.model_cable_ns = m->cable;
	/* ns -> cycles, rounded to nearest: paranic.spec.sim.ns_to_cycles */
	auto cyc = [](double ns) { return (uint32_t)((ns * PN_TARGET_CLK_HZ) / 1e9 + 0.5); };
	c.c_mmio_w = cyc(c.mmio_write_ns);
	c.c_mmio_r = cyc(c.mmio_read_ns);
	c.c_dma_r = cyc(c.dma_read_ns);
	c.c_dma_w_pcie = cyc(c.dma_write_ns);
	c.c_poll_miss = cyc(c.poll_miss_ns);
	c.c_dma_w = c.c_dma_w_pcie + c.c_poll_miss;
	c.c_model_cable = std::max<uint32_t>(1, cyc(c.model_cable_ns));
	if (!c.log_file.empty()) {
		sim_open_log(c.log_file.c_str());
	}
	sim_verbose = c.verbose = sim_verbose;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGINT, &sa, nullptr);
	sigaction(SIGHUP, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);

	Harness h(c);
	the_harness = &h;
	sim_log("%s: %d nodes, %d contexts, MTU %d; latencies (model %s, cycles of %d MHz): MMIO write %u, MMIO read %u, "
		"DMA read %u, DMA write %u + poll miss %u, cable %d; cable error threshold %u / 2^32", SIM_TOPO, SIM_NODES,
		SIM_N_CTX, SIM_MTU, c.model.c_str(), PN_TARGET_CLK_HZ / 1000000, c.c_mmio_w, c.c_mmio_r, c.c_dma_r,
		c.c_dma_w_pcie, c.c_poll_miss, SIM_PHY_DELAY, c.ber_threshold);
	if ((uint32_t)SIM_PHY_DELAY != c.c_model_cable)
		sim_log("note: this build's cables delay %d cycles, model %s's %u (%.1f ns): build with "
			"`python -m paranic.sim --model %s` for the model's", SIM_PHY_DELAY, c.model.c_str(),
			c.c_model_cable, c.model_cable_ns, c.model.c_str());
	return h.run();
}
