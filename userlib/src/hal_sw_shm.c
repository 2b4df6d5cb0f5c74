/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The `sw` backend's cluster segment: one POSIX shared-memory object per cluster
 * (/dev/shm/paranic-<cluster>) holding every node's and context's NIC state, laid out
 * once by its creator (layout); later processes attach to it, wait for a creator
 * still at work, and replace a segment that is stale or of another shape when nobody
 * uses it. pn_sw_cluster_destroy removes it with the ports' segments of the cluster
 * and the socket library's node directories.
 *
 * Trust (docs/reliability.md, "Shared segments, sockets and run directories"): the
 * segment is created with O_EXCL and mode 0600; one that exists is used only when it
 * is ours or root's and open to nobody else (pn_trust_fd), and only after every layout
 * field was checked against the spec's bounds and the fstat'd size (hdr_check). The
 * geometry is then taken from the checked copy, never from the shared header again.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hal_sw.h"
#include "pn_trust.h"

/* ---- layout and name ------------------------------------------------------------------------ */

static uint64_t round_page(uint64_t v)
{
	return (v + SW_PAGE - 1) / SW_PAGE * SW_PAGE;
}

static void layout(struct sw_shm_hdr *g)
{
	g->slot_bytes = PN_RX_SLOT_BYTES(g->mtu);
	g->node_off = SW_PAGE;
	g->ctx_off = g->node_off + round_page((uint64_t)g->nodes * sizeof(struct sw_node));
	g->meta_bytes = SW_PAGE;
	g->page_off = g->meta_bytes;
	g->txr_off = g->page_off + PN_CTX_PAGE_BYTES;
	g->rxr_off = g->txr_off + round_page((uint64_t)g->tx_entries * PN_TX_DESC_BYTES);
	g->ctx_stride = g->rxr_off + round_page((uint64_t)g->rx_slots * g->slot_bytes);
	g->total_bytes = g->ctx_off + (uint64_t)g->nodes * g->contexts * g->ctx_stride;
}

static int pow2_in(int v, int lo, int hi)
{
	return v >= lo && v <= hi && !(v & (v - 1));
}

/* The shape fields within the spec's bounds (what pn_open accepts). */
static int shape_ok(const struct sw_shm_hdr *g)
{
	return g->nodes >= 1 && g->nodes <= PN_MAX_NODES && g->contexts >= 1 && g->contexts <= PN_MAX_CONTEXTS &&
	       g->mtu >= 8 && g->mtu <= PN_MAX_MTU && g->mtu % 8 == 0 && pow2_in((int)g->rx_slots, 2, 1 << 16) &&
	       pow2_in((int)g->tx_entries, 2, 1 << 16);
}

/* A mapped header (another process wrote it): its shape within bounds, every derived
 * field what layout() computes from that shape, the total the size of the file. The
 * fields are read once into *out, which is what the caller uses from then on.
 * 0 or -EBADMSG. */
static int hdr_check(const volatile struct sw_shm_hdr *g, uint64_t file_bytes, struct sw_shm_hdr *out)
{
	struct sw_shm_hdr want;

	memset(out, 0, sizeof(*out));
	out->nodes = g->nodes;
	out->contexts = g->contexts;
	out->mtu = g->mtu;
	out->rx_slots = g->rx_slots;
	out->tx_entries = g->tx_entries;
	out->slot_bytes = g->slot_bytes;
	out->total_bytes = g->total_bytes;
	out->node_off = g->node_off;
	out->ctx_off = g->ctx_off;
	out->ctx_stride = g->ctx_stride;
	out->meta_bytes = g->meta_bytes;
	out->page_off = g->page_off;
	out->txr_off = g->txr_off;
	out->rxr_off = g->rxr_off;
	if (!shape_ok(out))
		return -EBADMSG;
	want = *out;
	layout(&want);
	if (want.slot_bytes != out->slot_bytes || want.node_off != out->node_off || want.ctx_off != out->ctx_off ||
	    want.ctx_stride != out->ctx_stride || want.meta_bytes != out->meta_bytes ||
	    want.page_off != out->page_off || want.txr_off != out->txr_off || want.rxr_off != out->rxr_off ||
	    want.total_bytes != out->total_bytes || out->total_bytes != file_bytes ||
	    out->total_bytes > SW_MAX_SEGMENT)
		return -EBADMSG;
	return 0;
}

/* The process's copy of a checked (or self-made) layout. */
static void take_layout(struct sw_be *be, const struct sw_shm_hdr *g)
{
	be->nodes = g->nodes;
	be->contexts = g->contexts;
	be->mtu = g->mtu;
	be->rx_slots = g->rx_slots;
	be->tx_entries = g->tx_entries;
	be->slot_bytes = g->slot_bytes;
	be->node_off = g->node_off;
	be->ctx_off = g->ctx_off;
	be->ctx_stride = g->ctx_stride;
	be->page_off = g->page_off;
	be->txr_off = g->txr_off;
	be->rxr_off = g->rxr_off;
}

static int shm_name(const char *cluster, char *out, size_t n)
{
	size_t len = strlen(cluster);
	if (!len || len > 64)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char ch = cluster[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-' || ch == '.'))
			return -EINVAL;
	}
	snprintf(out, n, "/paranic-%s", cluster);
	return 0;
}

/* ---- destroy ------------------------------------------------------------------------------------- */

int pn_sw_cluster_destroy(const char *cluster)
{
	char name[96];
	int r;
	if (!cluster)
		return -EINVAL;
	if ((r = shm_name(cluster, name, sizeof(name))) < 0)
		return r;
	r = shm_unlink(name) < 0 ? -errno : 0;
	{
		/* The ports' intra-node segments of the cluster ("/paranic-<cluster>:..."),
		 * and the socket library's node directories ("/paranic-<cluster>.sock.<n>",
		 * sock_wire.h), left behind by killed processes. */
		size_t n = strlen(name + 1);
		DIR *d = opendir("/dev/shm");
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, name + 1, n) &&
			    (e->d_name[n] == ':' ||
			     (!strncmp(e->d_name + n, ".sock.", 6) && e->d_name[n + 6] &&
			      strspn(e->d_name + n + 6, "0123456789") == strlen(e->d_name + n + 6)))) {
				char full[300];
				snprintf(full, sizeof(full), "/%s", e->d_name);
				shm_unlink(full);
			}
		if (d)
			closedir(d);
	}
	return r;
}

/* ---- create or attach ---------------------------------------------------------------------------- */

/* Any live owner of a context in the mapped cluster? */
static int cluster_in_use(struct sw_be *be)
{
	for (uint32_t n = 0; n < be->nodes; n++)
		for (uint32_t c = 0; c < be->contexts; c++) {
			uint32_t p = __atomic_load_n(&sw_meta(be, n, c)->owner_pid, __ATOMIC_ACQUIRE);
			if (p && pn_pid_alive(p))
				return 1;
		}
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int sw_create(struct sw_be *be, int fd, const struct sw_shm_hdr *want)
{
	struct sw_shm_hdr *g;
	struct stat st;
	if (want->total_bytes > SW_MAX_SEGMENT)
		return -ENOMEM;
	if (fstat(fd, &st) < 0)
		return -errno;
	be->shm_ino = (uint64_t)st.st_ino;
	if (ftruncate(fd, (off_t)want->total_bytes) < 0)
		return -errno;
	be->base = mmap(NULL, want->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (be->base == MAP_FAILED) {
		be->base = NULL;
		return -errno;
	}
	be->size = want->total_bytes;
	g = (struct sw_shm_hdr *)be->base;
	__atomic_store_n(&g->creator_pid, be->pid, __ATOMIC_RELEASE);   /* first: who is at work */
	g->nodes = want->nodes;
	g->contexts = want->contexts;
	g->mtu = want->mtu;
	g->rx_slots = want->rx_slots;
	g->tx_entries = want->tx_entries;
	layout(g);
	g->version = SW_VERSION;
	__atomic_store_n(&g->magic, SW_MAGIC, __ATOMIC_RELEASE);         /* last: ready */
	be->hdr = g;
	be->created = 1;
	take_layout(be, g);
	return 0;
}

/* Attach to an existing segment. 1: attached; 0: stale or other shape and unused,
 * removed (retry); <0: error (-EACCES: not ours; -EBADMSG: a broken layout). */
static int sw_attach_existing(struct sw_be *be, int fd, const char *name, const pn_open_opts_t *o,
			      const struct sw_shm_hdr *want)
{
	struct stat sb;
	struct sw_shm_hdr *g, chk;
	int waited = 0, r;

	for (;;) {   /* the creator may not have sized it yet */
		if ((r = pn_trust_fd(fd, &sb)) < 0)
			return r;   /* another user's, or open to others: never used, never removed */
		if ((uint64_t)sb.st_size >= SW_PAGE)
			break;
		if (waited++ > 2000) {
			shm_unlink(name);
			return 0;
		}
		sleep_ms(1);
	}
	g = mmap(NULL, SW_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED)
		return -errno;
	for (waited = 0; __atomic_load_n(&g->magic, __ATOMIC_ACQUIRE) != SW_MAGIC; waited++) {
		uint32_t cp = __atomic_load_n(&g->creator_pid, __ATOMIC_ACQUIRE);
		if (waited > 2000 || (cp && !pn_pid_alive(cp) && waited > 10)) {
			munmap(g, SW_PAGE);
			shm_unlink(name);
			return 0;
		}
		sleep_ms(1);
	}
	if (g->version != SW_VERSION) {
		munmap(g, SW_PAGE);
		shm_unlink(name);
		return 0;
	}
	/* The size again: the file could have been truncated since the first look. */
	if (fstat(fd, &sb) < 0) {
		munmap(g, SW_PAGE);
		return -errno;
	}
	r = hdr_check(g, (uint64_t)sb.st_size, &chk);
	munmap(g, SW_PAGE);
	if (r < 0)
		return r;
	be->base = mmap(NULL, chk.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (be->base == MAP_FAILED) {
		be->base = NULL;
		return -errno;
	}
	be->size = chk.total_bytes;
	be->hdr = (struct sw_shm_hdr *)be->base;
	take_layout(be, &chk);
	/* A shape asked for explicitly must match; a cluster nobody uses is replaced. */
	if ((o->nodes && (uint32_t)o->nodes != chk.nodes) || (o->contexts && want->contexts != chk.contexts) ||
	    (o->mtu && want->mtu != chk.mtu) || (o->rx_slots && want->rx_slots != chk.rx_slots) ||
	    (o->tx_entries && want->tx_entries != chk.tx_entries)) {
		int busy = cluster_in_use(be);
		munmap(be->base, be->size);
		be->base = NULL;
		if (busy)
			return -EBUSY;
		shm_unlink(name);
		return 0;
	}
	return 1;
}

int pn_sw_map_cluster(struct sw_be *be, const pn_open_opts_t *o)
{
	char name[96];
	struct sw_shm_hdr want;
	int r;

	if ((r = shm_name(o->cluster, name, sizeof(name))) < 0)
		return r;
	memset(&want, 0, sizeof(want));
	want.nodes = o->nodes ? (uint32_t)o->nodes : 1;
	want.contexts = o->contexts ? (uint32_t)o->contexts : PN_DEFAULT_CONTEXTS;
	want.mtu = o->mtu ? (uint32_t)o->mtu : PN_DEFAULT_MTU;
	want.rx_slots = o->rx_slots ? (uint32_t)o->rx_slots : PN_SW_DEFAULT_RX_SLOTS;
	want.tx_entries = o->tx_entries ? (uint32_t)o->tx_entries : PN_SW_DEFAULT_TX_ENTRIES;
	if (!shape_ok(&want))
		return -EINVAL;
	/* A node the asked shape does not have: refused before anything is created. */
	if (o->nodes && o->node >= o->nodes)
		return -EINVAL;
	layout(&want);

	for (int attempt = 0; attempt < 20; attempt++) {
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			r = sw_create(be, fd, &want);
			close(fd);
			if (r < 0)
				shm_unlink(name);
			return r;
		}
		if (errno != EEXIST)
			return -errno;
		fd = shm_open(name, O_RDWR, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		r = sw_attach_existing(be, fd, name, o, &want);
		close(fd);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	return -EAGAIN;
}

void pn_sw_unmap_cluster(struct sw_be *be, const char *cluster)
{
	char name[96];

	if (!be->base)
		return;
	if (be->created && !cluster_in_use(be) && shm_name(cluster, name, sizeof(name)) == 0) {
		/* Only the segment we made (the name may have been replaced meanwhile). */
		int fd = shm_open(name, O_RDONLY, 0);
		struct stat st;
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && (uint64_t)st.st_ino == be->shm_ino)
				shm_unlink(name);
			close(fd);
		}
	}
	munmap(be->base, be->size);
	be->base = NULL;
}
