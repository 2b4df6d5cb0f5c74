"""DMA helpers for the host interface, on LitePCIe's crossbar master-port protocol.

* :class:`DmaPort`: a master port as a DMA client sees it (``source`` = requests,
  ``sink`` = completions), like ``LitePCIeMasterPort``.
* :class:`DmaWriter`: turns (address, word count) commands plus a data stream into
  write requests of at most ``max_payload_bytes`` that never cross a
  ``max_payload_bytes`` boundary (hence never a 4 KiB one).
* :class:`ReadRealigner`: turns the 8-byte aligned words read from host memory back
  into the byte stream that starts at an arbitrary byte address.

All host addresses handled here are multiples of 8 and all lengths whole 64-bit
words, so one 64-bit beat always carries two dwords.
"""

from __future__ import annotations

from migen import Case, Cat, If, Module, Replicate, Signal, log2_int
from litex.soc.interconnect import stream
from litepcie.common import completion_layout, request_layout



class DmaPort:
    """A LitePCIe master port from the client's side.

    ``source``: requests (``request_layout``: we, adr in bytes, len in dwords, dat,
    channel, user_id, req_id, tag), a write request carries its data beats with
    ``first``/``last``. ``sink``: completions (``completion_layout``: dat, len, end,
    err ...), in request order, each completion packet framed by ``first``/``last``
    and ``end`` on the last packet of a request.

    ``channel`` and ``req_id`` are copied into every request: on a board wire them to
    the crossbar port's ``channel`` and the PHY's ``id`` (in simulation leave 0).
    """

    def __init__(self, data_width: int = 64, address_width: int = 64, name: str | None = None) -> None:
        self.data_width = data_width
        self.address_width = address_width
        self.source = stream.Endpoint(request_layout(data_width, address_width),
                                      name=f"{name}_source" if name else None)
        self.sink = stream.Endpoint(completion_layout(data_width),
                                    name=f"{name}_sink" if name else None)
        self.channel = Signal(8)
        self.req_id = Signal(16)


def dma_cmd_layout(address_width: int = 64):
    return [("adr", address_width), ("words", 16)]


class DmaWriter(Module):
    """Writes ``cmd.words`` 64-bit words from ``data`` to host address ``cmd.adr``.

    ``cmd``: stream of (adr, words) (adr a multiple of 8, words >= 1; a command of 0
    words is taken and ignored); ``data``: exactly ``words`` beats per command;
    ``source``: write requests. The command is cut at every ``max_payload_bytes``
    boundary, so no request is longer than ``max_payload_bytes`` or crosses a 4 KiB
    page. A command is taken while the writer is idle (``busy`` low), and its first
    beat goes out in the same cycle if ``data`` is presented with it, so a client
    that does so loses no cycle between commands.
    """

    def __init__(self, address_width: int = 64, max_payload_bytes: int = 256) -> None:
        assert 8 <= max_payload_bytes <= 2048 and max_payload_bytes & (max_payload_bytes - 1) == 0
        self.cmd = stream.Endpoint(dma_cmd_layout(address_width))
        self.data = stream.Endpoint([("data", 64)])
        self.source = stream.Endpoint(request_layout(64, address_width))
        self.channel = Signal(8)
        self.req_id = Signal(16)
        self.busy = Signal()

        # # #

        mp_words = max_payload_bytes // 8
        mp_bits = log2_int(max_payload_bytes)
        adr = Signal(address_width)
        left = Signal(16)
        beat = Signal(max=mp_words + 1)
        running = self.busy
        # The command served this cycle: the running one, else the one being taken.
        c_adr = Signal(address_width)
        c_left = Signal(16)
        c_beat = Signal(max=mp_words + 1)
        active = Signal()
        room = Signal(max=mp_words + 1)
        chunk = Signal(max=mp_words + 1)

        self.comb += [
            If(running,
                c_adr.eq(adr), c_left.eq(left), c_beat.eq(beat),
            ).Else(
                c_adr.eq(Cat(Signal(3), self.cmd.adr[3:])), c_left.eq(self.cmd.words),
            ),
            active.eq(running | (self.cmd.valid & (self.cmd.words != 0))),
            room.eq(mp_words - c_adr[3:mp_bits]) if mp_bits > 3 else room.eq(1),
            chunk.eq(room),
            If(c_left < room, chunk.eq(c_left)),
            self.cmd.ready.eq(~running),
            self.source.we.eq(1),
            self.source.adr.eq(c_adr),
            self.source.len.eq(chunk << 1),
            self.source.dat.eq(self.data.data),
            self.source.channel.eq(self.channel),
            self.source.req_id.eq(self.req_id),
            self.source.first.eq(c_beat == 0),
            self.source.last.eq(c_beat == chunk - 1),
            If(active,
                self.source.valid.eq(self.data.valid),
                self.data.ready.eq(self.source.ready),
            ),
        ]
        self.sync += [
            If(self.cmd.valid & self.cmd.ready,
                adr.eq(c_adr),
                left.eq(c_left),
                beat.eq(0),
                running.eq(self.cmd.words != 0),
            ),
            If(self.source.valid & self.source.ready,
                beat.eq(c_beat + 1),
                If(self.source.last,
                    beat.eq(0),
                    adr.eq(c_adr + (chunk << 3)),
                    left.eq(c_left - chunk),
                    If(c_left == chunk, running.eq(0)),
                ),
            ),
        ]


class ReadRealigner(Module):
    """Byte-realigns a message read from host memory as whole 64-bit words.

    Strobe ``start`` with ``shift`` (message address mod 8), ``n_in`` (aligned words
    that will arrive on ``sink``) and ``n_out`` (words of the message, ceil(length/8))
    and ``tail_bytes`` (length mod 8). ``source`` then carries the ``n_out`` words of
    the message (bytes past the end zeroed). The first input word is absorbed without
    output (one cycle per message), afterwards one word in, one word out.
    ``in_left``/``have_prev`` let a consumer compute how many input words the next
    ``k`` output words need: ``min(in_left, k + (1 if not have_prev else 0))``.
    """

    def __init__(self, count_bits: int = 22) -> None:
        self.sink = stream.Endpoint([("data", 64)])
        self.source = stream.Endpoint([("data", 64)])
        self.start = Signal()
        self.shift = Signal(3)
        self.n_in = Signal(count_bits)
        self.n_out = Signal(count_bits)
        self.tail_bytes = Signal(3)
        self.in_left = Signal(count_bits)
        self.out_left = Signal(count_bits)
        self.have_prev = Signal()

        # # #

        shift = Signal(3)
        tail = Signal(3)
        prev = Signal(64)
        combined = Signal(64)
        alone = Signal(64)
        raw = Signal(64)
        mask = Signal(64)

        cases_c, cases_a = {}, {}
        for s in range(8):
            if s == 0:
                cases_c[s] = combined.eq(prev)
                cases_a[s] = alone.eq(prev)
            else:
                cases_c[s] = combined.eq(Cat(prev[8 * s:], self.sink.data[:8 * s]))
                cases_a[s] = alone.eq(Cat(prev[8 * s:], Signal(8 * s)))
        mcases = {0: mask.eq(Replicate(1, 64))}
        for t in range(1, 8):
            mcases[t] = mask.eq((1 << (8 * t)) - 1)
        self.comb += [
            Case(shift, cases_c), Case(shift, cases_a), Case(tail, mcases),
            raw.eq(combined),
            If(self.in_left == 0, raw.eq(alone)),
            self.source.data.eq(raw),
            If(self.out_left == 1, self.source.data.eq(raw & mask)),
            If(~self.have_prev,
                self.sink.ready.eq(self.in_left != 0),
            ).Elif(self.in_left != 0,
                self.source.valid.eq(self.sink.valid),
                self.sink.ready.eq(self.source.ready),
            ).Else(
                self.source.valid.eq(self.out_left != 0),
            ),
        ]
        self.sync += [
            If(self.sink.valid & self.sink.ready,
                prev.eq(self.sink.data),
                self.have_prev.eq(1),
                self.in_left.eq(self.in_left - 1),
            ),
            If(self.source.valid & self.source.ready,
                self.out_left.eq(self.out_left - 1),
            ),
            If(self.start,
                shift.eq(self.shift),
                tail.eq(self.tail_bytes),
                self.in_left.eq(self.n_in),
                self.out_left.eq(self.n_out),
                self.have_prev.eq(0),
            ),
        ]
