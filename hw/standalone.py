"""NicCore outside a LiteX SoC: one Wishbone slave for context pages and CSRs.

On a board, LiteX's SoC builder collects NicCore's CSRs into its CSR bus and
generates ``csr.h``/``csr.csv``. Standalone (cocotb benches, the Verilator cluster
simulator) this module does the same job with BAR0's layout from the spec: the
context pages at byte offset 0 and a CSR bank array at ``BAR0_CSR_OFFSET``;
:meth:`NicCoreStandalone.csr_map` exports the generated register map (name -> byte
address, width) and :func:`write_csr_json` writes it as ``csr.json``, the form the
header generator (``python -m paranic.hw.gen``) and the tools read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from litex.gen import LiteXModule
from litex.soc.interconnect import csr_bus, wishbone

from paranic.spec import protocol as P

from .niccore import NicCore

#: The CSR bank sits at BAR0's CSR region (P.BAR0_CSR_OFFSET, after up to 64 context
#: pages); its address width (in 32-bit words) covers exactly that region.
CSR_PAGING = 0x800
CSR_ADDRESS_WIDTH = (P.BAR0_CSR_BYTES // 4).bit_length() - 1
assert 4 << CSR_ADDRESS_WIDTH == P.BAR0_CSR_BYTES


@dataclass(frozen=True)
class CsrReg:
    name: str
    addr: int      # byte address of the first (most significant) 32-bit word
    size: int      # bits
    kind: str      # "rw" (CSRStorage / CSR) or "ro" (CSRStatus)

    @property
    def words(self) -> int:
        return (self.size + 31) // 32


class NicCoreStandalone(LiteXModule):
    """A NicCore with its CSRs mapped on the same Wishbone slave ``bus``.

    ``bus_width`` 32 (default) or 64 (word addresses in units of the width). At 64 the
    context pages take a 64-bit store as one beat (the simulator's host model, the
    board's BAR0 path); the CSR bank stays 32-bit behind a down-converter, which skips
    the half a 32-bit access does not select, so a 32-bit CSR access is one CSR access.
    """

    def __init__(self, bus_width: int = 32, **nic_kwargs) -> None:
        if bus_width not in (32, 64):
            raise ValueError(f"NicCoreStandalone: bus_width must be 32 or 64, not {bus_width}")
        host_kwargs = dict(nic_kwargs.pop("host_kwargs", None) or {})
        host_kwargs["bus_width"] = bus_width
        self.nic = NicCore(host_kwargs=host_kwargs, **nic_kwargs)
        self.bus_width = bus_width
        self.bus = wishbone.Interface(data_width=bus_width, address_width=32, addressing="word")

        self.csr_banks = csr_bus.CSRBankArray(
            # Bank 0 holds every NicCore CSR. Memories (routing table, PIO buffers) are not
            # mapped: they are reached through their own logic, never through the CSR bus.
            self, lambda name, memory: 0 if (name == "nic" and memory is None) else None,
            paging=CSR_PAGING,
            data_width=32, address_width=CSR_ADDRESS_WIDTH)
        self.wb2csr = wishbone.Wishbone2CSR(
            bus_csr=csr_bus.Interface(data_width=32, address_width=CSR_ADDRESS_WIDTH))
        self.csr_con = csr_bus.Interconnect(self.wb2csr.csr, self.csr_banks.get_buses())

        csr_wb = self.wb2csr.wishbone
        if bus_width == 64:
            csr_wb = wishbone.Interface(data_width=64, address_width=32, addressing="word")
            self.csr_down = wishbone.Converter(csr_wb, self.wb2csr.wishbone)
        ctx_words = P.BAR0_CSR_OFFSET // (bus_width // 8)
        self.decoder = wishbone.Decoder(self.bus, [
            (lambda a: a < ctx_words, self.nic.bus),
            (lambda a: a >= ctx_words, csr_wb),
        ], register=False)

    def csr_map(self) -> dict[str, CsrReg]:
        """Every CSR of the NicCore by name (``nic_`` prefix dropped)."""
        from litex.soc.interconnect.csr import CSRStatus

        regs: dict[str, CsrReg] = {}
        for name, csrs, mapaddr, _rmap in self.csr_banks.banks:
            addr = P.BAR0_CSR_OFFSET + mapaddr * CSR_PAGING
            for c in csrs:
                short = c.name[len(name) + 1:] if c.name.startswith(name + "_") else c.name
                kind = "ro" if isinstance(c, CSRStatus) else "rw"
                regs[short] = CsrReg(short, addr, c.size, kind)
                addr += 4 * ((c.size + 31) // 32)
        return regs


def write_csr_json(regs: dict[str, CsrReg], path: Path) -> None:
    path.write_text(json.dumps(csr_dict(regs), indent=1, sort_keys=True))


def read_csr_json(path: Path) -> dict[str, CsrReg]:
    d = json.loads(Path(path).read_text())
    return {n: CsrReg(n, v["addr"], v["size"], v["kind"]) for n, v in d.items()}


def csr_dict(regs: dict[str, CsrReg]) -> dict[str, dict]:
    """The map in csr.json form: name -> {"addr", "size", "kind"}."""
    return {n: {"addr": r.addr, "size": r.size, "kind": r.kind} for n, r in regs.items()}


__all__ = ["NicCoreStandalone", "CsrReg", "csr_dict", "write_csr_json", "read_csr_json"]
