"""ZkProducerIdManager: blocks of 1000 from /latest_producer_id_block, unique across racing brokers."""
from __future__ import annotations

import json
import threading

from kazoo.client import KazooClient

from broker_sim.controller import zk_layout as L
from broker_sim.coordinator.zk_producer_ids import ZkProducerIdManager


def client(zk_connect):
    from broker_sim.controller.zk_store import ensure_chroot
    ensure_chroot(zk_connect, 10)
    c = KazooClient(hosts=zk_connect, timeout=5)
    c.start(timeout=10)
    return c


def test_blocks_of_1000_written_in_kafkas_format(zk_connect):
    c = client(zk_connect)
    try:
        one = ZkProducerIdManager(c, 1)
        assert [one.next_id() for _ in range(3)] == [0, 1, 2]
        assert json.loads(c.get(L.PRODUCER_ID_BLOCK)[0]) == {"version": 1, "broker": 1,
                                                            "block_start": "0", "block_end": "999"}
        two = ZkProducerIdManager(c, 2)
        assert two.next_id() == 1000
        ids = [one.next_id() for _ in range(997)]
        assert ids[-1] == 999
        assert one.next_id() == 2000, "the next block follows broker 2's"
        assert L.decode_producer_id_block(c.get(L.PRODUCER_ID_BLOCK)[0]) == L.ProducerIdBlock(1, 2000, 2999)
        # a restarted broker never reuses its old block
        assert ZkProducerIdManager(c, 1).next_id() == 3000
    finally:
        c.stop()
        c.close()


def test_ids_are_unique_across_brokers_racing_for_blocks(zk_connect):
    clients = [client(zk_connect) for _ in range(4)]
    try:
        managers = [ZkProducerIdManager(c, i, block_size=10) for i, c in enumerate(clients)]
        results = [[] for _ in managers]
        barrier = threading.Barrier(len(managers) * 2)

        def take(manager, out):
            barrier.wait()
            for _ in range(100):
                out.append(manager.next_id())

        threads = [threading.Thread(target=take, args=(m, results[i])) for i, m in enumerate(managers)
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        everything = [x for r in results for x in r]
        assert len(everything) == 800
        assert len(set(everything)) == 800, "no producer id handed out twice"
        assert max(everything) < 800 + 10 * 8, "blocks claimed without gaps beyond unused tails"
    finally:
        for c in clients:
            c.stop()
            c.close()
