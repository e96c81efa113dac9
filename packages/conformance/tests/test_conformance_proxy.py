"""The shared fault proxy (anarchon_conformance.testing.FaultProxy) against a real echo server on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from anarchon_conformance.testing import FaultProxy, Link

pytestmark = pytest.mark.asyncio


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()


async def _client(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes, wait_s: float = 2) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.read(1024), wait_s)


async def _broken(reader: asyncio.StreamReader) -> bool:
    """Whether the connection ended (EOF or reset) within 2 s."""
    try:
        return await asyncio.wait_for(reader.read(1024), 2) == b""
    except ConnectionError:
        return True


async def test_pass_forwards_both_ways_and_counts_connections(echo_port: int) -> None:
    proxy = FaultProxy("127.0.0.1", echo_port)
    await proxy.start()
    reader, writer = await _client(proxy)
    assert await _ask(reader, writer, b"ping") == b"ping"
    assert (proxy.accepted, proxy.connections) == (1, 1)
    writer.close()
    await proxy.close()


async def test_silence_loses_bytes_quietly_and_restore_breaks_the_survivors(echo_port: int) -> None:
    proxy = FaultProxy("127.0.0.1", echo_port)
    await proxy.start()
    reader, writer = await _client(proxy)
    assert await _ask(reader, writer, b"before") == b"before"
    proxy.silence()
    with pytest.raises(asyncio.TimeoutError):
        await _ask(reader, writer, b"lost", wait_s=0.3)  # nobody is told
    proxy.restore()
    assert await _broken(reader)
    fresh_reader, fresh_writer = await _client(proxy)
    assert await _ask(fresh_reader, fresh_writer, b"after") == b"after"
    fresh_writer.close()
    await proxy.close()


async def test_a_held_answer_lets_the_request_through_and_keeps_its_answer(echo_port: int) -> None:
    held: list[bool] = []
    proxy = FaultProxy("127.0.0.1", echo_port, on_held=lambda: held.append(True))
    await proxy.start()
    reader, writer = await _client(proxy)
    proxy.hold_answers_after(b"claim")
    assert await _ask(reader, writer, b"hello") == b"hello"  # not the pattern: passes
    with pytest.raises(asyncio.TimeoutError):
        await _ask(reader, writer, b"claim 1", wait_s=0.3)
    assert held == [True] and proxy.mode == {"up": "pass", "down": "hold"}
    proxy.set("pass")  # released: the held answer arrives
    assert await asyncio.wait_for(reader.read(1024), 2) == b"claim 1"
    writer.close()
    await proxy.close()


async def test_drop_resets_open_and_new_connections(echo_port: int) -> None:
    proxy = FaultProxy("127.0.0.1", echo_port)
    await proxy.start()
    reader, _ = await _client(proxy)
    proxy.set("drop")
    assert await _broken(reader)
    new_reader, _ = await _client(proxy)
    assert await _broken(new_reader)
    proxy.set("pass")
    ok_reader, ok_writer = await _client(proxy)
    assert await _ask(ok_reader, ok_writer, b"back") == b"back"
    ok_writer.close()
    await proxy.close()


async def test_a_subclass_edits_chunks_with_state_per_connection(echo_port: int) -> None:
    class Upper(FaultProxy):
        def upstream_chunk(self, link: Link, data: bytes) -> bytes:
            link.state["seen"] = link.state.get("seen", 0) + 1
            return data.upper()

        def downstream_chunk(self, link: Link, data: bytes) -> bytes:
            return data + str(link.state["seen"]).encode()

    proxy = Upper("127.0.0.1", echo_port)
    await proxy.start()
    reader, writer = await _client(proxy)
    assert await _ask(reader, writer, b"one") == b"ONE1"
    assert await _ask(reader, writer, b"two") == b"TWO2"
    writer.close()
    await proxy.close()
