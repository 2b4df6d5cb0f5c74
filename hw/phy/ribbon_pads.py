"""LiteX IO records for the ribbon PHY and the sync line on a board's connector.

A board file only names the connector::

    platform.add_extension(ribbon_io("LPC") + sync_io("LPC"))
    self.ribbon0 = RibbonPHY(platform.request("ribbon", 0), sys_clk_freq)
    self.sync0 = SyncLine(platform.request("ribbon_sync", 0))

Default FMC pinout (:data:`FMC_RIBBON_PINS`, both boards identical; the cable or
adapter crosses TX to RX): the receive side on LA00..LA10 (LA00_CC, a clock-capable
pair, carries the forwarded clock; LA00..LA16 share one bank on FMC carriers, which the
BUFIO needs), the transmit side on LA17..LA27, the sync line on LA11_P (single-ended).
"""

from __future__ import annotations

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal

from .ribbon_lane import LANES

#: FMC LA pairs of the ribbon: forwarded clock and lanes, per direction.
FMC_RIBBON_PINS = {
    "rx_clk": "LA00_CC",
    "rx_data": ["LA02", "LA03", "LA04", "LA05", "LA06", "LA07", "LA08", "LA09", "LA10"],
    "tx_clk": "LA17_CC",
    "tx_data": ["LA19", "LA20", "LA21", "LA22", "LA23", "LA24", "LA25", "LA26", "LA27"],
}
#: FMC pin of the wired-AND sync line.
FMC_SYNC_PIN = "LA11_P"


def _check_connector(platform, connector: str, names: list[str]) -> None:
    if platform is None:
        return
    table = platform.constraint_manager.connector_manager.connector_table
    if connector not in table:
        raise ValueError(f"platform has no connector '{connector}' (has: {', '.join(table)})")
    missing = [n for n in names if n not in table[connector]]
    if missing:
        raise ValueError(f"connector '{connector}' lacks pins {missing}")


def ribbon_io(connector: str = "LPC", index: int = 0, *, iostandard: str = "LVDS_25",
              pins: dict | None = None, platform=None) -> list:
    """IO record ``("ribbon", index)`` on FMC connector ``connector`` (e.g. "LPC", "HPC").

    Subsignals ``tx_clk_p/n``, ``tx_data_p/n`` (LANES pins), ``rx_clk_p/n``,
    ``rx_data_p/n`` (with DIFF_TERM). ``pins`` overrides :data:`FMC_RIBBON_PINS`;
    ``platform`` (optional) checks that the connector and pins exist.
    """
    p = dict(FMC_RIBBON_PINS, **(pins or {}))
    for d in ("rx_data", "tx_data"):
        if len(p[d]) != LANES:
            raise ValueError(f"{d} needs {LANES} pairs, got {len(p[d])}")
    names = [f"{p[k]}_{s}" for k in ("rx_clk", "tx_clk") for s in "PN"] + \
            [f"{n}_{s}" for d in ("rx_data", "tx_data") for n in p[d] for s in "PN"]
    if len(set(names)) != len(names):
        raise ValueError("ribbon pins overlap")
    _check_connector(platform, connector, names)

    def pin(names_: list[str], s: str) -> Pins:
        return Pins(" ".join(f"{connector}:{n}_{s}" for n in names_))

    term = Misc("DIFF_TERM=TRUE")
    return [("ribbon", index,
             Subsignal("tx_clk_p", pin([p["tx_clk"]], "P")),
             Subsignal("tx_clk_n", pin([p["tx_clk"]], "N")),
             Subsignal("tx_data_p", pin(p["tx_data"], "P")),
             Subsignal("tx_data_n", pin(p["tx_data"], "N")),
             Subsignal("rx_clk_p", pin([p["rx_clk"]], "P"), term),
             Subsignal("rx_clk_n", pin([p["rx_clk"]], "N"), term),
             Subsignal("rx_data_p", pin(p["rx_data"], "P"), term),
             Subsignal("rx_data_n", pin(p["rx_data"], "N"), term),
             IOStandard(iostandard))]


def sync_io(connector: str = "LPC", index: int = 0, *, pin: str = FMC_SYNC_PIN,
            iostandard: str = "LVCMOS25", platform=None) -> list:
    """IO record ``("ribbon_sync", index)``: the open-drain wired-AND sync line.

    On FMC the default pin is :data:`FMC_SYNC_PIN` (VADJ bank: LVCMOS25). On a PMOD
    pass e.g. ``sync_io("pmod0", pin="0", iostandard="LVCMOS33")``. The line needs one
    pull-up (1-4.7 kOhm to the bank voltage) on the cable or on one board; the weak
    internal PULLUP is enabled as a fallback for short cables.
    """
    _check_connector(platform, connector, [pin])
    return [("ribbon_sync", index, Pins(f"{connector}:{pin}"), IOStandard(iostandard),
             Misc("PULLUP=TRUE"))]


__all__ = ["FMC_RIBBON_PINS", "FMC_SYNC_PIN", "ribbon_io", "sync_io"]
