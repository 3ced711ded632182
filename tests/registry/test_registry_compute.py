"""ComputeLane: jobs run off the event loop, one at a time per thread, and stop at their deadline."""
import asyncio
import threading
import time

import pytest

from broker_sim.registry import errors
from broker_sim.registry.compute import ComputeLane
from broker_sim.registry.errors import RegistryError


def _spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return threading.current_thread().name


def _swallowing(seconds: float) -> str:
    """A job whose own ``except Exception`` must not keep it running past its deadline."""
    try:
        return _spin(seconds)
    except Exception:  # noqa: BLE001 - the point of the test
        return "swallowed"


def test_a_job_answers_off_the_loop_and_its_errors_come_back():
    lane = ComputeLane(threads=1, timeout_s=5)

    async def main():
        assert (await lane.run(_spin, 0.01)).startswith("schema-registry-compute")
        with pytest.raises(ZeroDivisionError):
            await lane.run(lambda: 1 / 0)
    asyncio.run(main())
    lane.close()


def test_a_job_past_its_deadline_is_stopped_and_the_loop_kept_running_meanwhile():
    lane = ComputeLane(threads=1, timeout_s=1.0)   # a loop blocked by the job would stall >= 1 s

    async def main():
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)
        task = asyncio.ensure_future(ticker())
        start = time.monotonic()
        for job in (_spin, _swallowing):
            with pytest.raises(RegistryError) as info:
                await lane.run(job, 60)
            assert info.value.error_code == errors.OPERATION_TIMEOUT
        took = time.monotonic() - start
        task.cancel()
        gaps = [b - a for a, b in zip(ticks, ticks[1:])]
        assert took < 6, f"two 60 s jobs took {took:.1f} s with a 1 s deadline"
        # under 0.6 s: well below the deadline a blocked loop would show, above a loaded machine's scheduling gaps
        assert max(gaps) < 0.6, f"the loop stalled {max(gaps):.2f} s while a job ran"
        assert await lane.run(_spin, 0.01)  # the worker still serves
    asyncio.run(main())
    assert lane.timeouts == 2
    lane.close()


def test_a_follower_parses_the_schemas_it_replays_off_the_loop():
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from memory_log import MemoryLog, Registry

    big = json.dumps({"type": "record", "name": "Big", "fields": [
        {"name": f"f{i}_{'x' * 30}", "type": "string", "default": "d"} for i in range(8000)]})
    log = MemoryLog()
    writer = Registry(log)
    assert writer.call("POST", "/subjects/big/versions", {"schema": big}) == (200, {"id": 1})
    follower = Registry(log.follower())

    async def read_while_ticking():
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.005)
        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.02)
        answer = await follower.acall("GET", "/schemas/ids/1")
        await asyncio.sleep(0.02)  # a tick after the read: a stall during it shows as a gap
        task.cancel()
        return answer, max(b - a for a, b in zip(ticks, ticks[1:]))
    (status, body), stall = follower.run(read_while_ticking())
    assert status == 200 and json.loads(body["schema"])["name"] == "Big"
    assert follower.service.state.schema_by_id(1).parsed is not None  # parsed, on the lane
    assert stall < 0.5, f"the follower's loop stalled {stall:.2f} s replaying a large schema"
    writer.close()
    follower.close()


def test_closing_the_lane_stops_its_running_job():
    lane = ComputeLane(threads=1, timeout_s=600)

    async def main():
        job = asyncio.ensure_future(lane.run(_spin, 600))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        lane.close()
        with pytest.raises(RegistryError):
            await job
        assert time.monotonic() - start < 5
    asyncio.run(main())
