// SPDX-License-Identifier: BSD-2-Clause
/*
 * C-SIMULATION STAND-IN for Xilinx's hls::stream, used only when Vitis HLS is not
 * installed (docs/hls.md, "Headers"). With Vitis ($XILINX_HLS set) this folder is not on
 * the include path: csim, csynth and cosim use Vitis's own hls_stream.h.
 *
 * Why a stand-in: the hls4ml wheel carries Xilinx's ap_types under Apache-2.0, but its
 * hls_stream.h is under Xilinx's old proprietary notice, so ParaNIC does not use it.
 * This is an unbounded FIFO with the subset of the API the kernels use: read(), write(),
 * empty(), full() (never), size(), read_nb(), write_nb(), operator<< / >>. Reading an
 * empty stream aborts with a message (Vitis's csim warns and returns garbage).
 */
#ifndef PN_CSIM_HLS_STREAM_H
#define PN_CSIM_HLS_STREAM_H

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

namespace hls {

template <typename T>
class stream {
public:
	stream() : name_("stream") {}
	explicit stream(const char *name) : name_(name) {}
	stream(const stream &) = delete;
	stream &operator=(const stream &) = delete;

	bool empty() const { return q_.empty(); }
	bool full() const { return false; }
	size_t size() const { return q_.size(); }

	T read()
	{
		if (q_.empty()) {
			std::fprintf(stderr, "hls::stream '%s' read while empty (csim stand-in)\n", name_.c_str());
			std::abort();
		}
		T v = q_.front();
		q_.pop_front();
		return v;
	}
	void read(T &v) { v = read(); }
	bool read_nb(T &v)
	{
		if (q_.empty())
			return false;
		v = read();
		return true;
	}
	void write(const T &v) { q_.push_back(v); }
	bool write_nb(const T &v) { write(v); return true; }
	void operator>>(T &v) { read(v); }
	void operator<<(const T &v) { write(v); }

private:
	std::deque<T> q_;
	std::string name_;
};

} // namespace hls

#endif
