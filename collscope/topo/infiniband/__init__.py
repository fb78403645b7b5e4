"""InfiniBand captures: host HCAs and ports (ibstat, ibstatus, ibv_devinfo, ibv_devices), their network
interfaces (ibdev2netdev)
and the fabric (ibnetdiscover, iblinkinfo).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.topo.infiniband.fabric import (
        IbFabric,
        IbLink,
        IbNode,
        looks_like_iblinkinfo,
        looks_like_ibnetdiscover,
        parse_iblinkinfo,
        parse_ibnetdiscover,
    )
    from collscope.topo.infiniband.host import (
        Hca,
        HcaListing,
        IbPort,
        looks_like_ibstat,
        looks_like_ibstatus,
        looks_like_ibv_devices,
        looks_like_ibv_devinfo,
        normalize_guid,
        parse_ibstat,
        parse_ibstatus,
        parse_ibv_devices,
        parse_ibv_devinfo,
    )
    from collscope.topo.infiniband.netdev import (
        NetdevMap,
        looks_like_ibdev2netdev,
        merge_netdevs,
        parse_ibdev2netdev,
    )

__all__ = [
    "Hca",
    "HcaListing",
    "IbFabric",
    "IbLink",
    "IbNode",
    "IbPort",
    "NetdevMap",
    "looks_like_ibdev2netdev",
    "looks_like_iblinkinfo",
    "looks_like_ibnetdiscover",
    "looks_like_ibstat",
    "looks_like_ibstatus",
    "looks_like_ibv_devices",
    "looks_like_ibv_devinfo",
    "merge_netdevs",
    "normalize_guid",
    "parse_ibdev2netdev",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "parse_ibstat",
    "parse_ibstatus",
    "parse_ibv_devices",
    "parse_ibv_devinfo",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.topo.infiniband.fabric": [
            "IbFabric",
            "IbLink",
            "IbNode",
            "looks_like_iblinkinfo",
            "looks_like_ibnetdiscover",
            "parse_iblinkinfo",
            "parse_ibnetdiscover",
        ],
        "collscope.topo.infiniband.host": [
            "Hca",
            "HcaListing",
            "IbPort",
            "looks_like_ibstat",
            "looks_like_ibstatus",
            "looks_like_ibv_devices",
            "looks_like_ibv_devinfo",
            "normalize_guid",
            "parse_ibstat",
            "parse_ibstatus",
            "parse_ibv_devices",
            "parse_ibv_devinfo",
        ],
        "collscope.topo.infiniband.netdev": [
            "NetdevMap",
            "looks_like_ibdev2netdev",
            "merge_netdevs",
            "parse_ibdev2netdev",
        ],
    })
