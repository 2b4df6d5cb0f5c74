"""ParaNIC board targets (package ``paranic.boards``): one LiteX target per board.

Each ``boards/<board>.py`` holds the board's facts (:class:`~paranic.boards.common.Board`:
part, PCIe, link connectors, how to program it) and a target class that subclasses
``paranic.hw.soc.ParaNicSoC`` with the board's clocks, PCIe PHY and link PHYs, plus a
``main()`` with litex-boards' argument habits (``python -m paranic.boards.xilinx_kc705
--build``). This is a tool layer above the gateware: it imports ``paranic.hw``, never
the reverse. Lint and the yosys resource report are in ``paranic.boardtool``
(``paranic boards ...``).
"""

from __future__ import annotations

import importlib

#: board name -> module of paranic.boards (the names `paranic boards` and `make BOARD=` take)
BOARDS: dict[str, str] = {
    "kc705": "xilinx_kc705",
    "kcu105": "xilinx_kcu105",
    "ac701": "xilinx_ac701",
    "u250": "xilinx_alveo_u250",
    "stlv7325": "sitlinv_stlv7325",
}


def board_module(name: str):
    """The module of board ``name`` (its ``BOARD`` facts, ``Target`` class and ``main``)."""
    from .common import BoardError

    if name not in BOARDS:
        raise BoardError(f"unknown board {name!r}: choose one of {', '.join(BOARDS)}")
    return importlib.import_module(f"{__name__}.{BOARDS[name]}")


def get_board(name: str):
    """The :class:`~paranic.boards.common.Board` facts of board ``name``."""
    return board_module(name).BOARD
