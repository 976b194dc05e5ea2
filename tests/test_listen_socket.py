"""The service's listening socket (``runtime.service.server.listen``), bound before anything else
starts and handed to uvicorn: its connections must send small answers at once."""

from __future__ import annotations

import asyncio
import socket

from runtime.service.server import listen


def test_accepted_connections_get_tcp_nodelay() -> None:
    """asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on sockets whose protocol is
    ``IPPROTO_TCP``; a socket made as ``socket(AF_INET, SOCK_STREAM)`` says 0, and so do the
    connections it accepts. Then an answer written in two parts (headers, body) waited for the
    client's delayed ACK: every request on a kept-alive connection took 44 ms, not 2."""
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
